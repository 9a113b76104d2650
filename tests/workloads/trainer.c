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
 * its time blocked in read(), from its own clock. */
#define _GNU_SOURCE
#include <fcntl.h>
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
		size_t got = 0;
		while (got < chunk) {
			ssize_t n = read(fd, buf + got, chunk - got);
			if (n <= 0)
				_exit(4);
			got += n;
		}
		struct timespec d = { decode_ms / 1000, (decode_ms % 1000) * 1000000L };
		nanosleep(&d, NULL);
		if (write(out, buf, 4096) != 4096)
			_exit(5);
	}
	_exit(0);
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
	long long start = now_ns(), blocked = 0;

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
	for (int b = 0; b < batches; b++) {
		if (write(req[1], "b", 1) != 1)
			return 1;
		long long t0 = now_ns();
		size_t got = 0;
		while (got < sizeof(batch)) {
			ssize_t n = read(data[0], batch + got, sizeof(batch) - got);
			if (n <= 0)
				return 1;
			got += n;
		}
		blocked += now_ns() - t0;
		busy(compute_ms * 1000000LL);
	}
	int st;
	waitpid(w, &st, 0);
	long long total = now_ns() - start;
	printf("pid %d\nworker %d\ntotal_ns %lld\nblocked_ns %lld\n", getpid(), w, total, blocked);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
