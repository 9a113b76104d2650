/* (a) N preads of 4 KiB from a cached file. Prints the loop's ns. */
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
	long n = atol(argv[2]);
	char buf[4096];
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		return 1;
	long long t0 = now();
	for (long i = 0; i < n; i++)
		syscall(SYS_pread64, fd, buf, 4096, (i & 255) * 4096L);
	printf("%lld\n", now() - t0);
	return 0;
}
