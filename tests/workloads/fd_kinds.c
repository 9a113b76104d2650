/*
 * Reads or writes one byte on each kind of non-file fd, so the tests can
 * check how each is named. stdin is whatever the test connected (a pipe).
 * Prints `name fd` lines.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
	char c;
	uint64_t one = 1;
	int sv[2], p[2];

	syscall(SYS_read, 0, &c, 1); /* stdin: inherited from before tracing */
	int efd = eventfd(0, 0);
	syscall(SYS_write, efd, &one, 8);
	int mfd = memfd_create("weights", 0);
	syscall(SYS_write, mfd, "x", 1);
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	syscall(SYS_write, sv[0], "y", 1);
	syscall(SYS_pipe2, p, 0);
	syscall(SYS_write, p[1], "z", 1);
	int null = open("/dev/null", O_WRONLY);
	syscall(SYS_write, null, "n", 1);
	int shm = open("/dev/shm/mltrace-test-shm", O_CREAT | O_RDWR, 0600);
	syscall(SYS_write, shm, "s", 1);
	unlink("/dev/shm/mltrace-test-shm");
	printf("eventfd %d\nmemfd %d\nsocket %d\npipe %d\nnull %d\nshm %d\n", efd, mfd, sv[0], p[1], null, shm);
	return 0;
}
