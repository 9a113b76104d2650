/*
 * RATE preads per second of one byte for SECONDS, paced by the clock (the
 * sustained-rate test). Prints the rate achieved.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
	double rate = atof(argv[2]), secs = atof(argv[3]);
	char c;
	int fd = open(argv[1], O_RDONLY);
	long long t0 = now(), total = (long long)(rate * secs), done = 0;
	while (done < total) {
		long long due = (long long)((now() - t0) * rate / 1e9);
		for (; done < due && done < total; done++)
			syscall(SYS_pread64, fd, &c, 1, 0L);
	}
	printf("%.0f\n", done / ((now() - t0) / 1e9));
	return 0;
}
