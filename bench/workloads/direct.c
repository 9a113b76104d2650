/* (c) N O_DIRECT reads of 1 MiB from FILE (block-heavy). Prints the loop's ns. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
	long n = atol(argv[2]);
	void *buf;
	struct stat st;
	int fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || posix_memalign(&buf, 4096, 1 << 20))
		return 1;
	fstat(fd, &st);
	long chunks = st.st_size >> 20;
	long long t0 = now();
	for (long i = 0; i < n; i++)
		pread(fd, buf, 1 << 20, ((i * 37) % chunks) << 20);
	printf("%lld\n", now() - t0);
	return 0;
}
