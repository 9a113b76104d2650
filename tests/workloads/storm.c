/*
 * A burst of N one-byte preads on one file, fenced by pauses so that the
 * only events during the burst are the burst's own.
 *
 * usage: storm FILE N [pause_ms]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
	if (argc < 3)
		return 2;
	long n = atol(argv[2]);
	int pause_ms = argc > 3 ? atoi(argv[3]) : 300;
	char c;
	usleep(pause_ms * 1000); /* let start-up's events drain first */
	int fd = open(argv[1], O_RDONLY);
	if (fd < 0)
		return 1;
	/* A fence (2 bytes asked: the burst asks 1) that names the file, and a
	 * pause for the consumer to catch up. */
	syscall(SYS_pread64, fd, &c, 2, 0L);
	usleep(pause_ms * 1000);
	for (long i = 0; i < n; i++)
		syscall(SYS_pread64, fd, &c, 1, 0L);
	usleep(pause_ms * 1000);
	return 0;
}
