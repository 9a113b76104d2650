/*
 * (e) A cold-cache loader of big files, shaped like an MLPerf-style
 * PyTorch epoch: a main process with IDLE idle threads (a framework's
 * pools) takes batches from W forked workers over a pipe; each worker
 * reads its share of the N files in DIR (named 0..N-1, tens of MB each)
 * in 1 MiB reads, sums every byte (a light decode), and sends a batch
 * per 4 MiB. The caller drops the page cache before each run.
 * Prints the ns from the first fork to the last worker's exit.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *idle(void *arg) {
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;)
		pthread_cond_wait(&never, &mu);
	return NULL;
}

static void worker(const char *dir, int n, int w, int workers, int out) {
	static unsigned char buf[1 << 20];
	char path[4096];
	unsigned long sum = 0;
	for (int i = w; i < n; i += workers) {
		snprintf(path, sizeof path, "%s/%d", dir, i);
		int fd = open(path, O_RDONLY);
		if (fd < 0) {
			perror(path);
			_exit(1);
		}
		ssize_t got;
		int chunks = 0;
		while ((got = read(fd, buf, sizeof buf)) > 0) {
			for (ssize_t k = 0; k < got; k += 64)
				sum += buf[k];
			if (++chunks % 4 == 0 && write(out, "b", 1) != 1)
				_exit(1);
		}
		close(fd);
	}
	_exit(sum == 1 ? 2 : 0);
}

int main(int argc, char **argv) {
	if (argc != 5) {
		fprintf(stderr, "usage: %s DIR N WORKERS IDLE_THREADS\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	int n = atoi(argv[2]), workers = atoi(argv[3]), idle_threads = atoi(argv[4]);
	pthread_t t;
	for (int i = 0; i < idle_threads; i++)
		pthread_create(&t, NULL, idle, NULL);
	int p[2];
	if (pipe(p))
		return 1;
	long long t0 = now();
	for (int w = 0; w < workers; w++)
		if (fork() == 0) {
			close(p[0]);
			worker(dir, n, w, workers, p[1]);
		}
	close(p[1]);
	char b[64];
	long batches = 0;
	ssize_t got;
	while ((got = read(p[0], b, sizeof b)) > 0)
		batches += got;
	while (wait(NULL) > 0)
		;
	printf("%lld\n", now() - t0);
	fprintf(stderr, "%ld batches\n", batches);
	return 0;
}
