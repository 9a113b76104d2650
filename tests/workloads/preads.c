/*
 * Exactly 5,000 preads of one file, in a worker forked without exec (a
 * DataLoader-like worker), for the Parquet export test. Syscalls go
 * through syscall(2) so libc cannot add, merge or split any.
 *
 * usage: preads   (run in an empty directory; prints `key value` lines)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PREADS 5000
#define BLOCK 4096
#define BLOCKS 64

static char buf[BLOCK];

int main(void) {
	memset(buf, 'x', sizeof buf);
	int fd = syscall(SYS_openat, AT_FDCWD, "data.bin", O_CREAT | O_TRUNC | O_WRONLY, 0644);
	if (fd < 0)
		return 1;
	for (int i = 0; i < BLOCKS; i++)
		if (syscall(SYS_write, fd, buf, BLOCK) != BLOCK)
			return 1;
	syscall(SYS_close, fd);
	fflush(stdout);
	pid_t child = fork();
	if (child == 0) {
		int rfd = syscall(SYS_openat, AT_FDCWD, "data.bin", O_RDONLY, 0);
		if (rfd < 0)
			_exit(1);
		for (int i = 0; i < PREADS; i++)
			if (syscall(SYS_pread64, rfd, buf, BLOCK, (long)(i % BLOCKS) * BLOCK) != BLOCK)
				_exit(1);
		syscall(SYS_close, rfd);
		_exit(0);
	}
	int st = 0;
	waitpid(child, &st, 0);
	printf("parent %d\nworker %d\nstatus %d\n", getpid(), child, st);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
