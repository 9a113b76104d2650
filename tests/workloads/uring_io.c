/*
 * io_uring reads and writes of known sizes, through the raw syscalls (no
 * liburing): uring_io IN OUT, IN being 256 KiB.
 *
 *   user_data 1-4: READ 64 KiB at 0, 64, 128, 192 KiB, in flight together
 *   5: READV of 16 + 48 KiB at 0
 *   6: READ_FIXED of 32 KiB at 4096, into a registered buffer, from a
 *      registered file (IOSQE_FIXED_FILE, index 0)
 *   7: READ of 4 KiB at offset -1 (the file position, set to 8192)
 *   8: WRITE of 100000 bytes at 0 to OUT, with IOSQE_ASYNC (an io-wq
 *      worker does it and completes it)
 *   9: a NOP (not a read or write: not recorded)
 *   10: READ of 4 KiB at 0 on a second ring with SQPOLL (its kernel thread
 *       submits it), when the kernel lets us make one
 *
 * Prints `key value` lines: pid, in_fd, out_fd, each request's result
 * (res_N), and the SQPOLL thread's tid (sqpoll_tid, 0 without one).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

struct ring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *sq_flags;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	int sqpoll;
};

static long res[16];

static int setup(struct ring *r, unsigned flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	p.sq_thread_idle = 2000;
	r->fd = syscall(__NR_io_uring_setup, 8, &p);
	if (r->fd < 0)
		return -1;
	size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	int single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single)
		sq_sz = cq_sz = sq_sz > cq_sz ? sq_sz : cq_sz;
	char *sq = mmap(0, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	char *cq = single ? sq : mmap(0, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
	r->sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       r->fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
		return -1;
	r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p.sq_off.array);
	r->sq_flags = (unsigned *)(sq + p.sq_off.flags);
	r->cq_head = (unsigned *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	r->sqpoll = !!(flags & IORING_SETUP_SQPOLL);
	return 0;
}

static void queue(struct ring *r, const struct io_uring_sqe *s)
{
	unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask;

	r->sqes[idx] = *s;
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Submits the `n` queued requests and waits for all of them. */
static void run(struct ring *r, unsigned n)
{
	unsigned got = 0;

	while (got < n) {
		unsigned flags = IORING_ENTER_GETEVENTS;

		if (r->sqpoll && (__atomic_load_n(r->sq_flags, __ATOMIC_ACQUIRE) & IORING_SQ_NEED_WAKEUP))
			flags |= IORING_ENTER_SQ_WAKEUP;
		if (syscall(__NR_io_uring_enter, r->fd, got ? 0 : n, 1, flags, NULL, 0) < 0) {
			perror("io_uring_enter");
			exit(1);
		}
		unsigned head = *r->cq_head;
		while (head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
			struct io_uring_cqe *c = &r->cqes[head & *r->cq_mask];
			if (c->user_data < 16)
				res[c->user_data] = c->res;
			head++;
			got++;
		}
		__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	}
}

static struct io_uring_sqe rw(int op, int fd, void *buf, unsigned len, long long off, unsigned long long tag)
{
	struct io_uring_sqe s;

	memset(&s, 0, sizeof(s));
	s.opcode = op;
	s.fd = fd;
	s.addr = (unsigned long)buf;
	s.len = len;
	s.off = off;
	s.user_data = tag;
	return s;
}

/* The process's thread named iou-sqp-*, if any. */
static long sqpoll_tid(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long tid = 0;

	while (d && (e = readdir(d))) {
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "iou-sqp-", 8))
			tid = atol(e->d_name);
		fclose(f);
	}
	if (d)
		closedir(d);
	return tid;
}

int main(int argc, char **argv)
{
	struct ring r, sq;
	char *buf, *out;
	int in, wfd;

	if (argc != 3) {
		fprintf(stderr, "usage: uring_io IN OUT\n");
		return 2;
	}
	in = open(argv[1], O_RDONLY);
	wfd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	buf = aligned_alloc(4096, 1 << 20);
	out = malloc(100000);
	if (in < 0 || wfd < 0 || !buf || !out || setup(&r, 0)) {
		perror("setup");
		return 1;
	}
	memset(out, 'w', 100000);
	for (int i = 0; i < 4; i++) {
		struct io_uring_sqe s = rw(IORING_OP_READ, in, buf + i * 65536, 65536, i * 65536, 1 + i);
		queue(&r, &s);
	}
	run(&r, 4);

	struct iovec iov[2] = { { buf, 16384 }, { buf + 16384, 49152 } };
	struct io_uring_sqe s = rw(IORING_OP_READV, in, iov, 2, 0, 5);
	queue(&r, &s);
	run(&r, 1);

	struct iovec reg = { buf + (512 << 10), 65536 };
	if (syscall(__NR_io_uring_register, r.fd, IORING_REGISTER_FILES, &in, 1) ||
	    syscall(__NR_io_uring_register, r.fd, IORING_REGISTER_BUFFERS, &reg, 1)) {
		perror("io_uring_register");
		return 1;
	}
	s = rw(IORING_OP_READ_FIXED, 0, reg.iov_base, 32768, 4096, 6);
	s.flags = IOSQE_FIXED_FILE;
	s.buf_index = 0;
	queue(&r, &s);
	run(&r, 1);

	lseek(in, 8192, SEEK_SET);
	s = rw(IORING_OP_READ, in, buf, 4096, -1, 7);
	queue(&r, &s);
	run(&r, 1);

	s = rw(IORING_OP_WRITE, wfd, out, 100000, 0, 8);
	s.flags = IOSQE_ASYNC;
	queue(&r, &s);
	s = rw(IORING_OP_NOP, -1, NULL, 0, 0, 9);
	queue(&r, &s);
	run(&r, 2);

	long sqp = 0;
	if (setup(&sq, IORING_SETUP_SQPOLL) == 0) {
		s = rw(IORING_OP_READ, in, buf, 4096, 0, 10);
		queue(&sq, &s);
		run(&sq, 1);
		sqp = sqpoll_tid();
	}
	printf("pid %d\nin_fd %d\nout_fd %d\n", getpid(), in, wfd);
	for (int i = 1; i <= 10; i++)
		printf("res_%d %ld\n", i, res[i]);
	printf("sqpoll_tid %ld\n", sqp);
	return 0;
}
