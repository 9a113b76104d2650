/*
 * Block I/O whose requests are known: O_DIRECT reads and writes of given
 * sizes at given offsets on scratch.bin (which must exist, 1 MiB, written
 * and synced), a buffered read of cold.bin (whose pages the test dropped),
 * and a buffered write of warm.bin followed by fsync.
 * Prints `key value` lines, and each extent of scratch.bin as
 * `extent <logical> <physical> <length>` (bytes, from FIEMAP).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

static void extents(int fd) {
	size_t sz = sizeof(struct fiemap) + 32 * sizeof(struct fiemap_extent);
	struct fiemap *fm = calloc(1, sz);
	fm->fm_length = ~0ULL;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = 32;
	if (ioctl(fd, FS_IOC_FIEMAP, fm) == 0)
		for (unsigned i = 0; i < fm->fm_mapped_extents; i++)
			printf("extent %llu %llu %llu\n", (unsigned long long)fm->fm_extents[i].fe_logical,
			       (unsigned long long)fm->fm_extents[i].fe_physical,
			       (unsigned long long)fm->fm_extents[i].fe_length);
	free(fm);
}

int main(void) {
	char *buf;
	struct stat st;

	if (posix_memalign((void **)&buf, 4096, 1 << 20))
		return 1;
	memset(buf, 0x5a, 1 << 20);

	int fd = open("scratch.bin", O_RDWR | O_DIRECT);
	if (fd < 0) {
		perror("scratch.bin");
		return 1;
	}
	fstat(fd, &st);
	printf("dev_major %u\ndev_minor %u\n", major(st.st_dev), minor(st.st_dev));
	extents(fd);
	syscall(SYS_pwrite64, fd, buf, 4096, 0L);
	syscall(SYS_pwrite64, fd, buf, 16384, 65536L);
	syscall(SYS_pwrite64, fd, buf, 65536, 131072L);
	syscall(SYS_pread64, fd, buf, 8192, 4096L);
	syscall(SYS_pread64, fd, buf, 32768, 262144L);
	syscall(SYS_pread64, fd, buf, 4096, 1044480L);
	close(fd);

	/* Buffered read of a file whose pages are not cached. */
	fd = open("cold.bin", O_RDONLY);
	while (syscall(SYS_read, fd, buf, 65536) > 0)
		;
	close(fd);

	/* Buffered write, made durable by fsync in our own context. */
	fd = open("warm.bin", O_CREAT | O_WRONLY | O_TRUNC, 0600);
	syscall(SYS_write, fd, buf, 262144);
	syscall(SYS_fsync, fd);
	close(fd);
	printf("pid %d\n", getpid());
	return 0;
}
