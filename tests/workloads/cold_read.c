/*
 * Reads files from storage, as a data loader does, after dropping their
 * pages from the page cache (posix_fadvise DONTNEED on a clean file):
 *
 *   cold_read make FILE MIB        writes FILE (MIB MiB), syncs it, drops its pages
 *   cold_read twice FILE           read() it to the end twice: the first pass from
 *                                  storage, the second from the cache
 *   cold_read mmap FILE [STRIDE [PASSES]]
 *                                  drop its pages, map it and touch one byte every
 *                                  STRIDE bytes (default 4096), PASSES times (1)
 *   cold_read mmapfd FD            the same on an inherited fd (no open is traced)
 *
 * Prints `key value` lines: pid, bytes read or touched, and a checksum so
 * the reads cannot be optimised away.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 20];

static int drop(int fd) {
	if (fdatasync(fd))
		return -1;
	return posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	const char *mode = argv[1], *path = argv[2];
	printf("pid %d\n", getpid());
	if (strcmp(mode, "make") == 0) {
		long mib = argc > 3 ? atol(argv[3]) : 64;
		int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		for (long i = 0; i < mib; i++) {
			for (size_t j = 0; j < sizeof buf; j += 8)
				*(long *)(buf + j) = i * 131071 + (long)j;
			if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
				return 1;
		}
		if (drop(fd))
			return 1;
		close(fd);
		return 0;
	}
	int fd = strcmp(mode, "mmapfd") == 0 ? atoi(path) : open(path, O_RDONLY);
	if (fd < 0 || drop(fd))
		return 1;
	struct stat st;
	fstat(fd, &st);
	unsigned long sum = 0;
	long total = 0;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (strcmp(mode, "twice") == 0) {
		for (int pass = 0; pass < 2; pass++) {
			lseek(fd, 0, SEEK_SET);
			ssize_t n;
			while ((n = read(fd, buf, sizeof buf)) > 0) {
				total += n;
				sum += (unsigned char)buf[n / 2];
			}
		}
	} else if (strcmp(mode, "mmap") == 0 || strcmp(mode, "mmapfd") == 0) {
		long stride = argc > 3 ? atol(argv[3]) : 4096;
		long passes = argc > 4 ? atol(argv[4]) : 1;
		volatile unsigned char *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			return 1;
		for (long pass = 0; pass < passes; pass++)
			for (long off = 0; off < st.st_size; off += stride)
				sum += m[off];
		total = st.st_size * passes;
		munmap((void *)m, st.st_size);
	} else {
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	printf("size %ld\nbytes %ld\nsum %lu\n", (long)st.st_size, total, sum);
	printf("elapsed_ns %ld\n", (t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec));
	return 0;
}
