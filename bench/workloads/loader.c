/*
 * (b) A data loader: W worker processes, each opening, reading in 64 KiB
 * chunks and closing its share of the files in DIR (named 0..N-1).
 * Prints the ns from the first fork to the last worker's exit. With
 * BENCH_GO (a FIFO), it waits for a byte there first.
 */
#define _GNU_SOURCE
#include <fcntl.h>
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

int main(int argc, char **argv) {
	const char *dir = argv[1];
	int n = atoi(argv[2]), workers = atoi(argv[3]), epochs = argc > 4 ? atoi(argv[4]) : 1;
	/* Section 1's start signal (bench/src/go.rs): the bench reads the
	 * files, then sends a byte. */
	const char *go = getenv("BENCH_GO");
	if (go) {
		char c;
		int fd = open(go, O_RDONLY);
		if (fd < 0 || read(fd, &c, 1) != 1)
			return 2;
		close(fd);
	}
	long long t0 = now();
	for (int w = 0; w < workers; w++) {
		if (fork() == 0) {
			static char buf[65536];
			char path[4096];
			for (int e = 0; e < epochs; e++)
				for (int i = w; i < n; i += workers) {
					snprintf(path, sizeof path, "%s/%d", dir, (i * 7919 + e) % n);
					int fd = open(path, O_RDONLY);
					while (read(fd, buf, sizeof buf) > 0)
						;
					close(fd);
				}
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
	printf("%lld\n", now() - t0);
	return 0;
}
