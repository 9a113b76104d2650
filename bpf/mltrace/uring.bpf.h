/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after page_cache.bpf.h). io_uring reads and writes:
 * submission kept by request until its completion (uring_reqs).
 */

EV_KIND(EV_URING, 18);  /* mltrace_log::IoUring */

/*
 * io_uring reads and writes of traced processes. A request is submitted in
 * the thread that called io_uring_enter (or the ring's SQPOLL thread, a
 * thread of the same process) and completes wherever the kernel finishes
 * it: in that thread's task work, an io-wq worker (iou-wrk-*), or an
 * interrupt. So the submission is kept by request pointer until its
 * completion, which is attributed to the submitter. Classic tracepoints:
 * their records have the same fields on every kernel with a request
 * pointer (5.18+), and they work on both routes.
 */
#define IORING_OP_READV 1
#define IORING_OP_WRITEV 2
#define IORING_OP_READ_FIXED 4
#define IORING_OP_WRITE_FIXED 5
#define IORING_OP_READ 22
#define IORING_OP_WRITE 23
#define IOSQE_FIXED_FILE 1
#define IOSQE_BUFFER_SELECT 32

struct uring_req {
	u64 ts;
	u64 offset;
	u64 requested;
	u32 pid;
	u32 tid;
	s32 fd;
	u16 flags;
	u8 opcode;
	u8 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct uring_req);
} uring_reqs SEC(".maps");

/* Submissions of traced processes by opcode (all opcodes, drawn or not). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, u32);
	__type(value, u64);
} uring_ops SEC(".maps");

static __always_inline void uring_submit(void *req, u8 opcode, u64 sqe_flags, bool sq_thread)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, op = opcode;
	struct io_kiocb *k = req;
	struct io_rw *rw = req;
	struct uring_req v = {};
	u64 key = (u64)req, *n;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return;
	n = bpf_map_lookup_elem(&uring_ops, &op);
	if (n)
		*n += 1;
	switch (opcode) {
	case IORING_OP_READV:
	case IORING_OP_WRITEV:
	case IORING_OP_READ_FIXED:
	case IORING_OP_WRITE_FIXED:
	case IORING_OP_READ:
	case IORING_OP_WRITE:
		break;
	default:
		return;
	}
	v.ts = bpf_ktime_get_boot_ns();
	v.pid = tgid;
	v.tid = (u32)id;
	v.opcode = opcode;
	v.fd = -1;
	if (bpf_core_field_exists(k->cqe.fd))
		v.fd = BPF_CORE_READ(k, cqe.fd);
	if (sqe_flags & IOSQE_FIXED_FILE)
		v.flags |= URF_FIXED_FILE;
	if (sq_thread)
		v.flags |= URF_SQPOLL;
	/* The request was prepared before this tracepoint: its io_rw holds
	 * the sqe's offset, buffer and length. */
	v.offset = BPF_CORE_READ(rw, kiocb.ki_pos);
	if (v.offset == (u64)-1)
		v.flags |= URF_FILEPOS;
	if (sqe_flags & IOSQE_BUFFER_SELECT)
		v.flags |= URF_BUF_SELECT;
	if (opcode == IORING_OP_READV || opcode == IORING_OP_WRITEV) {
		u16 f = 0;

		if (!(sqe_flags & IOSQE_BUFFER_SELECT))
			v.requested = iov_sum((const struct iovec *)BPF_CORE_READ(rw, addr), BPF_CORE_READ(rw, len), &f);
		if (f & IOF_REQ_PARTIAL)
			v.flags |= URF_REQ_PARTIAL;
	} else {
		v.requested = BPF_CORE_READ(rw, len);
	}
	if (bpf_map_update_elem(&uring_reqs, &key, &v, BPF_ANY))
		count_lost(LOST_MAP);
}

SEC("tp/io_uring/io_uring_submit_req")
int uring_submit_req(struct trace_event_raw_io_uring_submit_req *ctx)
{
	uring_submit(ctx->req, ctx->opcode, ctx->flags, ctx->sq_thread);
	return 0;
}

/* 5.18 and 5.19 call it io_uring_submit_sqe. */
SEC("tp/io_uring/io_uring_submit_sqe")
int uring_submit_sqe(struct trace_event_raw_io_uring_submit_sqe *ctx)
{
	uring_submit(ctx->req, ctx->opcode, ctx->flags, ctx->sq_thread);
	return 0;
}

SEC("tp/io_uring/io_uring_complete")
int uring_complete(struct trace_event_raw_io_uring_complete *ctx)
{
	u64 key = (u64)ctx->req;
	struct uring_req *p = bpf_map_lookup_elem(&uring_reqs, &key);
	struct io_kiocb *k = (void *)key;
	struct io_rw *rw = (void *)key;
	struct uring_req v;
	struct ev_uring *e;
	u64 now, pos;
	s64 res;

	if (!p)
		return 0;
	v = *p;
	bpf_map_delete_elem(&uring_reqs, &key);
	now = bpf_ktime_get_boot_ns();
	res = ctx->res;
	pos = v.offset;
	if (v.flags & URF_FILEPOS) {
		/* The request read the file position and moved it past what it did. */
		pos = BPF_CORE_READ(rw, kiocb.ki_pos);
		if (pos == (u64)-1)
			v.flags |= URF_NO_OFFSET;
		else if (res > 0)
			pos -= res;
	}
	/* The file is named in the submitter's name: the id only labels EV_FILE. */
	u64 fkey = file_key(BPF_CORE_READ(k, file), ((u64)v.pid << 32) | v.tid, NULL);
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_URING, v.opcode, ((u64)v.pid << 32) | v.tid, v.ts);
	e->h.flags = v.flags;
	e->dur = now - v.ts;
	e->file = fkey;
	e->offset = pos;
	e->requested = v.requested;
	e->user_data = ctx->user_data;
	e->ret = res;
	e->fd = v.fd;
	e->complete_tid = (u32)bpf_get_current_pid_tgid();
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}
