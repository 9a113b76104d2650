/* A trainer that asks a forked worker for batches over a pipe and
 * measures its own waits: what data_wait_fraction must find.
 *
 *   trainer FILE BATCHES CHUNK_KIB DECODE_MS COMPUTE_MS
 *
 * The worker, per batch: reads the next CHUNK_KIB of FILE (dropped from
 * the page cache first, this file only, so the read goes to storage),
 * sleeps DECODE_MS (standing in for decoding), and writes the batch. The
 * trainer: asks, blocks in read() on the pipe until the batch arrives,
 * then computes (a busy loop) COMPUTE_MS. It prints its total time and
 * its time blocked in read(), from its own clock.
 *
 * With TRAINER_EPOCHS=N the batches are N epochs, each between MLLOG
 * epoch_start and epoch_stop lines, with its own times printed; in the
 * last one the worker does not sleep (data is ready sooner). With
 * TRAINER_BUSY_FILE the trainer keeps "BUSY_NS BUSY SINCE_NS" (monotonic
 * clock) in that file, for the stand-in NVML to report as GPU 0's SM
 * utilisation: its compute stands in for GPU kernels. With
 * TRAINER_RELAY=1 a thread of the trainer takes each batch from the
 * worker and hands it on through a pipe of its own, as PyTorch's
 * pin-memory thread does: the main thread is woken by that thread. With
 * TRAINER_SCHEDSTAT=1 it also prints, of its time blocked, what the
 * kernel counts as on a CPU or queued for one (queued_ns): a wait ends
 * at the wake-up, and on a busy machine the trainer may queue for a CPU
 * for milliseconds after it, which its own clock counts as blocked.
 * Per epoch it then prints its CPU time too (epochN_cpu_ns): how much of
 * an epoch's compute it ran, not queued, on a machine others share. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void busy(long long ns)
{
	volatile unsigned long x = 0;
	long long end = now_ns() + ns;
	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			x += i;
}

static void worker(const char *path, int batches, size_t chunk, int decode_ms, int req, int out)
{
	char *buf = malloc(chunk);
	int fd = open(path, O_RDONLY);
	char c;
	if (fd < 0 || !buf)
		_exit(2);
	/* This file only (others run tests beside us): written back, then dropped. */
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	for (int b = 0; b < batches; b++) {
		if (read(req, &c, 1) != 1)
			_exit(3);
		int decode = c == 'f' ? 0 : decode_ms;
		size_t got = 0;
		while (got < chunk) {
			ssize_t n = read(fd, buf + got, chunk - got);
			if (n <= 0)
				_exit(4);
			got += n;
		}
		struct timespec d = { decode / 1000, (decode % 1000) * 1000000L };
		nanosleep(&d, NULL);
		if (write(out, buf, 4096) != 4096)
			_exit(5);
	}
	_exit(0);
}

/* This thread's ns on a CPU (its CPU clock) and queued for one (the
 * run delay in /proc/thread-self/schedstat), or 0 without TRAINER_SCHEDSTAT. */
static int sched_fd = -1;

static long long cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long awake_ns(void)
{
	char b[96];
	long long on_cpu, queued;
	if (sched_fd < 0)
		return 0;
	ssize_t n = pread(sched_fd, b, sizeof b - 1, 0);
	if (n <= 0)
		_exit(8);
	b[n] = 0;
	if (sscanf(b, "%lld %lld", &on_cpu, &queued) != 2)
		_exit(8);
	/* The CPU clock is current to the call; schedstat's own CPU time
	 * only to the last tick or switch. */
	return cpu_ns() + queued;
}

static int busy_fd = -1;
static long long busy_total;

/* The stand-in GPU's state: busy time so far, whether busy, since when. */
static void gpu_state(int busy_now, long long t)
{
	char line[80];
	if (busy_fd < 0)
		return;
	int n = snprintf(line, sizeof line, "%lld %d %lld\n", busy_total, busy_now, t);
	if (pwrite(busy_fd, line, n, 0) != n)
		_exit(6);
	if (ftruncate(busy_fd, n))
		_exit(6);
}

/* The relay thread: from the worker's pipe to the main thread's. */
static int relay_in, relay_out;

static void *relay(void *arg)
{
	static char b[4096];
	(void)arg;
	for (;;) {
		size_t got = 0;
		while (got < sizeof(b)) {
			ssize_t n = read(relay_in, b + got, sizeof(b) - got);
			if (n <= 0)
				return NULL;
			got += n;
		}
		if (write(relay_out, b, sizeof(b)) != (ssize_t)sizeof(b))
			_exit(7);
	}
}

static void mllog(const char *key, int epoch)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	printf(":::MLLOG {\"namespace\": \"\", \"time_ms\": %lld, \"event_type\": \"%s\", \"key\": \"%s\", "
	       "\"value\": null, \"metadata\": {\"epoch_num\": %d}}\n",
	       t.tv_sec * 1000LL + t.tv_nsec / 1000000, strstr(key, "start") ? "INTERVAL_START" : "INTERVAL_END", key,
	       epoch);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: trainer FILE BATCHES CHUNK_KIB DECODE_MS COMPUTE_MS\n");
		return 1;
	}
	int batches = atoi(argv[2]), decode_ms = atoi(argv[4]), compute_ms = atoi(argv[5]);
	size_t chunk = (size_t)atoi(argv[3]) << 10;
	int req[2], data[2];
	static char batch[4096];
	long long start = now_ns(), blocked = 0, queued = 0;
	const char *ep = getenv("TRAINER_EPOCHS"), *bf = getenv("TRAINER_BUSY_FILE");
	int epochs = ep ? atoi(ep) : 0;
	long long e_start = 0, e_blocked = 0, e_queued = 0, e_cpu = 0;
	if (getenv("TRAINER_SCHEDSTAT") && (sched_fd = open("/proc/thread-self/schedstat", O_RDONLY)) < 0) {
		perror("/proc/thread-self/schedstat");
		return 1;
	}
	if (bf) {
		busy_fd = open(bf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		gpu_state(0, start);
	}

	if (pipe(req) || pipe(data))
		return 1;
	pid_t w = fork();
	if (w == 0) {
		close(req[1]);
		close(data[0]);
		worker(argv[1], batches, chunk, decode_ms, req[0], data[1]);
	}
	close(req[0]);
	close(data[1]);
	int from = data[0];
	if (getenv("TRAINER_RELAY")) {
		int handed[2];
		pthread_t t;
		if (pipe(handed))
			return 1;
		relay_in = data[0];
		relay_out = handed[1];
		from = handed[0];
		if (pthread_create(&t, NULL, relay, NULL))
			return 1;
	}
	int per = epochs > 0 ? (batches + epochs - 1) / epochs : batches;
	for (int b = 0; b < batches; b++) {
		int e = b / per + 1;
		if (epochs > 0 && b % per == 0) {
			mllog("epoch_start", e);
			e_start = now_ns();
			e_cpu = cpu_ns();
			e_blocked = 0;
			e_queued = 0;
		}
		if (write(req[1], epochs > 0 && e == epochs ? "f" : "b", 1) != 1)
			return 1;
		long long a0 = awake_ns(), t0 = now_ns();
		size_t got = 0;
		while (got < sizeof(batch)) {
			ssize_t n = read(from, batch + got, sizeof(batch) - got);
			if (n <= 0)
				return 1;
			got += n;
		}
		long long t1 = now_ns(), a1 = awake_ns();
		blocked += t1 - t0;
		e_blocked += t1 - t0;
		queued += a1 - a0;
		e_queued += a1 - a0;
		gpu_state(1, t1);
		busy(compute_ms * 1000000LL);
		long long t2 = now_ns();
		busy_total += t2 - t1;
		gpu_state(0, t2);
		if (epochs > 0 && (b % per == per - 1 || b == batches - 1)) {
			printf("epoch%d_total_ns %lld\nepoch%d_blocked_ns %lld\n", e, now_ns() - e_start, e, e_blocked);
			if (sched_fd >= 0)
				printf("epoch%d_queued_ns %lld\nepoch%d_cpu_ns %lld\n", e, e_queued, e, cpu_ns() - e_cpu);
			mllog("epoch_stop", e);
		}
	}
	int st;
	waitpid(w, &st, 0);
	long long total = now_ns() - start;
	printf("pid %d\nworker %d\ntotal_ns %lld\nblocked_ns %lld\n", getpid(), w, total, blocked);
	if (sched_fd >= 0)
		printf("queued_ns %lld\n", queued);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
