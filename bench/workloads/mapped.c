/* (d) FILE read through a shared read-only mapping, one byte per 4 KiB
 * page, after dropping its pages from the cache (every run starts cold;
 * the file must have been written back, as the bench syncs it). Prints
 * the loop's ns. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
	struct stat st;
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		return 1;
	if (posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		return 1;
	const volatile unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return 1;
	unsigned long sum = 0;
	long long t0 = now();
	for (off_t o = 0; o < st.st_size; o += 4096)
		sum += p[o];
	printf("%lld\n", now() - t0);
	/* The sum keeps the loads. */
	fprintf(stderr, "%lu\n", sum);
	return 0;
}
