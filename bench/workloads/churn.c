/*
 * A data loader running for hours, for the long-recording benchmark:
 * RATE syscalls per second in total for SECONDS, paced by the clock, in
 * epochs of EPOCH seconds. Each epoch forks WORKERS fresh worker processes
 * (new pids, as a DataLoader respawns its workers); each runs two threads
 * that open files of DIR (DIR/D/N for N in 0..FILES-1, D = N % 100, a
 * different order every epoch), do 14 preads of 1 KiB, and close them.
 * Every second each thread also starts a short-lived thread that opens,
 * reads and closes one file (thread churn).
 * Prints the rate achieved (syscalls per second).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READS 14

static const char *dir;
static int files, workers;
static double rate;
static long long *total; /* shared with the workers */

struct lane {
	long long deadline, t0, done;
	unsigned seed;
	int fd, left;
};

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int open_next(unsigned *seed) {
	char path[4096];
	int n = rand_r(seed) % files;
	snprintf(path, sizeof path, "%s/%02d/%d", dir, n % 100, n);
	return open(path, O_RDONLY);
}

/* One syscall of the open, read..., close cycle. */
static void step(struct lane *l) {
	static __thread char buf[1024];
	if (l->fd < 0) {
		l->fd = open_next(&l->seed);
		l->left = READS;
	} else if (l->left > 0) {
		syscall(SYS_pread64, l->fd, buf, sizeof buf, (long)(l->left % 4) * 1024);
		l->left--;
	} else {
		close(l->fd);
		l->fd = -1;
	}
	l->done++;
}

static void *short_lived(void *arg) {
	struct lane l = {.seed = (unsigned)(long)arg, .fd = -1};
	do
		step(&l);
	while (l.fd >= 0);
	__atomic_fetch_add(total, l.done, __ATOMIC_RELAXED);
	return NULL;
}

static void *run(void *arg) {
	struct lane *l = arg;
	double r = rate / (workers * 2);
	struct timespec nap = {0, 100000};
	long long next_spawn = l->t0 + 1000000000LL;

	for (;;) {
		long long t = now();
		if (t >= l->deadline)
			break;
		if (t >= next_spawn) {
			pthread_t s;
			next_spawn += 1000000000LL;
			if (pthread_create(&s, NULL, short_lived, (void *)(long)rand_r(&l->seed)) == 0)
				pthread_join(s, NULL);
		}
		long long due = (long long)((t - l->t0) * r / 1e9);
		if (l->done >= due) {
			nanosleep(&nap, NULL);
			continue;
		}
		while (l->done < due)
			step(l);
	}
	if (l->fd >= 0)
		close(l->fd);
	__atomic_fetch_add(total, l->done, __ATOMIC_RELAXED);
	return NULL;
}

static void worker(int epoch, int w, long long t0, long long deadline) {
	struct lane lanes[2];
	pthread_t t[2];
	for (int i = 0; i < 2; i++) {
		lanes[i] = (struct lane){.deadline = deadline, .t0 = t0, .seed = epoch * 7919u + w * 31u + i, .fd = -1};
		pthread_create(&t[i], NULL, run, &lanes[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	_exit(0);
}

int main(int argc, char **argv) {
	if (argc < 7)
		return 2;
	dir = argv[1];
	files = atoi(argv[2]);
	rate = atof(argv[3]);
	double secs = atof(argv[4]), epoch_secs = atof(argv[6]);
	workers = atoi(argv[5]);
	if (files < 1 || workers < 1 || epoch_secs <= 0)
		return 2;
	total = mmap(NULL, sizeof *total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (total == MAP_FAILED)
		return 1;
	long long start = now(), end = start + (long long)(secs * 1e9);
	for (int e = 0; now() < end; e++) {
		long long t0 = now(), deadline = t0 + (long long)(epoch_secs * 1e9);
		if (deadline > end)
			deadline = end;
		for (int w = 0; w < workers; w++)
			if (fork() == 0)
				worker(e, w, t0, deadline);
		while (wait(NULL) > 0)
			;
	}
	printf("%.0f\n", *total / ((now() - start) / 1e9));
	return 0;
}
