/*
 * Reads files through mappings, after dropping their pages from the page
 * cache (posix_fadvise DONTNEED on a clean file):
 *
 *   maps fork FILE      map it, fork a child that touches every 4 KiB page
 *                       of the parent's mapping (inherited), wait, unmap
 *   maps partial FILE   map it (16 MiB or more, MADV_RANDOM: one page per
 *                       fault), unmap [4, 8) MiB, touch a page every 64 KiB
 *                       of what is left, move [8, 12) MiB elsewhere with
 *                       mremap and touch the pages 32 KiB further in there,
 *                       shrink what is left at 12 MiB with mremap, unmap all
 *
 * Prints `key value` lines: pid (and child), addresses, pages touched.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1L << 20)
#define KIB 1024L

static unsigned long touch(volatile unsigned char *p, long from, long to, long step) {
	unsigned long sum = 0;
	for (long off = from; off < to; off += step)
		sum += p[off];
	return sum;
}

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	const char *mode = argv[1];
	int fd = open(argv[2], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) || fdatasync(fd) || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED))
		return 1;
	long size = st.st_size;
	printf("pid %d\nsize %ld\n", getpid(), size);
	unsigned char *m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return 1;
	printf("addr %lu\n", (unsigned long)m);
	if (strcmp(mode, "fork") == 0) {
		fflush(stdout);
		pid_t child = fork();
		if (child == 0) {
			unsigned long sum = touch(m, 0, size, 4096);
			printf("child %d\nchild_sum %lu\n", getpid(), sum);
			fflush(stdout);
			_exit(0);
		}
		int status;
		waitpid(child, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			return 1;
	} else if (strcmp(mode, "partial") == 0) {
		if (size < 16 * MIB || madvise(m, size, MADV_RANDOM))
			return 1;
		if (munmap(m + 4 * MIB, 4 * MIB))
			return 1;
		long pages = 0;
		touch(m, 0, 4 * MIB, 64 * KIB);
		touch(m, 8 * MIB, 16 * MIB, 64 * KIB);
		pages += 4 * MIB / (64 * KIB) + 8 * MIB / (64 * KIB);
		/* A place for the moved piece: reserved, then replaced by mremap. */
		unsigned char *to = mmap(NULL, 4 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		unsigned char *moved = mremap(m + 8 * MIB, 4 * MIB, 4 * MIB, MREMAP_MAYMOVE | MREMAP_FIXED, to);
		if (to == MAP_FAILED || moved != to)
			return 1;
		touch(moved, 32 * KIB, 4 * MIB, 64 * KIB);
		pages += 4 * MIB / (64 * KIB);
		/* What is left at 12 MiB shrinks to 2 MiB in place. */
		if (mremap(m + 12 * MIB, size - 12 * MIB, 2 * MIB, 0) != m + 12 * MIB)
			return 1;
		printf("moved %lu\npages %ld\n", (unsigned long)moved, pages);
		munmap(moved, 4 * MIB);
		munmap(m + 12 * MIB, 2 * MIB);
		munmap(m, 4 * MIB);
		close(fd);
		return 0;
	} else {
		return 2;
	}
	munmap(m, size);
	close(fd);
	return 0;
}
