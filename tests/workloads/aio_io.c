/*
 * Linux native AIO (what libaio wraps) through the raw syscalls:
 * aio_io IN OUT, IN being at least 12 KiB.
 *
 *   io_submit of 3 iocbs: pread 4096 at 0 and 8192 at 4096 from IN,
 *   pwrite 5000 at 0 to OUT
 *   io_getevents(min 3, max 8) until the 3 events are in
 *   io_pgetevents(min 0, max 4, timeout 0): nothing left, returns 0
 *
 * Prints `key value` lines: pid, in_fd, submitted, got (events of the
 * first io_getevents), read (bytes its read events returned), written.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	aio_context_t ctx = 0;
	struct iocb cbs[3], *list[3];
	struct io_event ev[8];
	char *buf = malloc(1 << 16);
	long submitted, got = 0, read = 0, written = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: aio_io IN OUT\n");
		return 2;
	}
	int in = open(argv[1], O_RDONLY);
	int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (in < 0 || out < 0 || !buf || syscall(__NR_io_setup, 8, &ctx)) {
		perror("setup");
		return 1;
	}
	memset(cbs, 0, sizeof(cbs));
	memset(buf + 32768, 'a', 5000);
	struct { int fd, op; long len, off; char *b; } want[3] = {
		{ in, IOCB_CMD_PREAD, 4096, 0, buf },
		{ in, IOCB_CMD_PREAD, 8192, 4096, buf + 4096 },
		{ out, IOCB_CMD_PWRITE, 5000, 0, buf + 32768 },
	};
	for (int i = 0; i < 3; i++) {
		cbs[i].aio_fildes = want[i].fd;
		cbs[i].aio_lio_opcode = want[i].op;
		cbs[i].aio_buf = (unsigned long)want[i].b;
		cbs[i].aio_nbytes = want[i].len;
		cbs[i].aio_offset = want[i].off;
		cbs[i].aio_data = i;
		list[i] = &cbs[i];
	}
	submitted = syscall(__NR_io_submit, ctx, 3, list);
	if (submitted != 3) {
		perror("io_submit");
		return 1;
	}
	long n = 0, first = -1;
	while (n < 3) {
		long k = syscall(__NR_io_getevents, ctx, 3 - n, 8, ev, NULL);
		if (k < 0) {
			perror("io_getevents");
			return 1;
		}
		if (first < 0)
			first = k;
		for (long i = 0; i < k; i++) {
			struct iocb *cb = (struct iocb *)(unsigned long)ev[i].obj;
			if (cb->aio_lio_opcode == IOCB_CMD_PREAD)
				read += ev[i].res;
			else
				written += ev[i].res;
		}
		n += k;
	}
	got = first;
	struct timespec zero = { 0, 0 };
	long none = syscall(__NR_io_pgetevents, ctx, 0, 4, ev, &zero, NULL);
	syscall(__NR_io_destroy, ctx);
	printf("pid %d\nin_fd %d\nsubmitted %ld\ngot %ld\nread %ld\nwritten %ld\npgetevents %ld\n", getpid(), in,
	       submitted, got, read, written, none);
	return 0;
}
