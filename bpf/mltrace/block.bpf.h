/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after faults.bpf.h). Block requests, system-wide:
 * started (block_io_start, block_rq_insert or block_rq_issue) and
 * completed (block_rq_complete), attributed to the submitter.
 */

EV_KIND(EV_BLOCK, 10);  /* mltrace_log::Block */

/*
 * Block I/O, system-wide: writeback and readahead often run in kworkers or
 * other tasks, so filtering by traced pid here would lose them. A request is
 * attributed where it starts (block_io_start on 6.5+, else block_rq_insert,
 * else block_rq_issue for directly issued requests): that is the only point
 * in the submitter's context. Completion runs in interrupt context, so the
 * submitter travels with the request in blk_reqs.
 */
#define BLK_REQ_OF_STARTED 1

struct blk_req {
	u64 start;
	u64 issue;
	u64 cause_ts;
	u32 cause_idx;
	u32 pid;
	u32 tid;
	u16 flags;
	u16 _pad;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct blk_req);
} blk_reqs SEC(".maps");

/* True when requests are started by block_io_start (set by user space):
 * then a request first seen at issue was in flight before tracing. */
const volatile bool blk_have_io_start = false;

static __always_inline struct blk_req *blk_start(struct request *rq, u64 now, u16 extra, bool fast)
{
	u64 key = (u64)rq;
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct task_struct *task = (void *)bpf_get_current_task();
	struct blk_req v = {};
	struct inflight *inf;

	v.start = now;
	v.pid = tgid;
	v.tid = tid;
	v.flags = extra;
	bpf_get_current_comm(&v.comm, sizeof(v.comm));
	if (BPF_CORE_READ(task, flags) & PF_KTHREAD)
		v.flags |= BLK_KTHREAD;
	if (fast) {
		inf = state_of(bpf_get_current_task_btf());
		if (inf)
			v.flags |= BLK_TRACED;
		if (inf && inf->op == OP_NONE)
			inf = NULL;
	} else {
		inf = NULL;
		if (bpf_map_lookup_elem(&traced, &tgid)) {
			v.flags |= BLK_TRACED;
			inf = bpf_map_lookup_elem(&inflight, &tid);
		}
	}
	{
		/* Started inside a recorded syscall of this thread: link them. */
		if (inf) {
			v.cause_ts = inf->ts;
			v.cause_idx = inf->nblk;
			inf->nblk += 1;
		}
	}
	if (bpf_map_update_elem(&blk_reqs, &key, &v, BPF_ANY)) {
		count_lost(LOST_MAP);
		return NULL;
	}
	return bpf_map_lookup_elem(&blk_reqs, &key);
}

static __always_inline void blk_insert(struct request *rq, bool fast)
{
	u64 key = (u64)rq;

	if (!bpf_map_lookup_elem(&blk_reqs, &key))
		blk_start(rq, bpf_ktime_get_boot_ns(), 0, fast);
}

static __always_inline void blk_issue(struct request *rq, bool fast)
{
	u64 key = (u64)rq;
	u64 now = bpf_ktime_get_boot_ns();
	struct blk_req *v = bpf_map_lookup_elem(&blk_reqs, &key);

	if (!v)
		v = blk_start(rq, now, blk_have_io_start ? BLK_START_UNKNOWN : 0, fast);
	if (v)
		v->issue = now;
}

SEC("raw_tp/block_io_start")
int block_io_start(struct bpf_raw_tracepoint_args *ctx)
{
	blk_start((void *)ctx->args[0], bpf_ktime_get_boot_ns(), 0, false);
	return 0;
}

SEC("raw_tp/block_rq_insert")
int block_rq_insert(struct bpf_raw_tracepoint_args *ctx)
{
	blk_insert((void *)ctx->args[0], false);
	return 0;
}

SEC("raw_tp/block_rq_issue")
int block_rq_issue(struct bpf_raw_tracepoint_args *ctx)
{
	blk_issue((void *)ctx->args[0], false);
	return 0;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(fast_block_io_start, struct request *rq)
{
	blk_start(rq, bpf_ktime_get_boot_ns(), 0, true);
	return 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(fast_block_rq_insert, struct request *rq)
{
	blk_insert(rq, true);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(fast_block_rq_issue, struct request *rq)
{
	blk_issue(rq, true);
	return 0;
}

static __always_inline u16 rq_flags(u32 f)
{
	u16 out = 0;

	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_SYNC) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC))))
		out |= RQF_SYNC;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_META) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_META))))
		out |= RQF_META;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_PRIO) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PRIO))))
		out |= RQF_PRIO;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_FUA) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA))))
		out |= RQF_FUA;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_PREFLUSH) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH))))
		out |= RQF_PREFLUSH;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_RAHEAD) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD))))
		out |= RQF_RAHEAD;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_BACKGROUND) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_BACKGROUND))))
		out |= RQF_BACKGROUND;
	return out;
}

SEC("raw_tp/block_rq_complete")
int block_rq_complete(struct bpf_raw_tracepoint_args *ctx)
{
	struct request *rq = (void *)ctx->args[0];
	u64 key = (u64)rq;
	u32 nr_bytes = ctx->args[2];
	u64 now = bpf_ktime_get_boot_ns();
	struct blk_req *v = bpf_map_lookup_elem(&blk_reqs, &key);
	struct gendisk *disk;
	struct ev_block *e;
	u32 remaining = BPF_CORE_READ(rq, __data_len);
	u32 cmd = BPF_CORE_READ(rq, cmd_flags);
	bool final = nr_bytes >= remaining;

	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		if (final && v)
			bpf_map_delete_elem(&blk_reqs, &key);
		return 0;
	}
	if (bpf_core_field_exists(rq->rq_disk))
		disk = BPF_CORE_READ(rq, rq_disk);
	else
		disk = BPF_CORE_READ(rq, q, disk);
	e->h.kind = EV_BLOCK;
	e->h.op = 0;
	e->h.stack = 0;
	if (v) {
		e->h.ts = v->start;
		e->h.pid = v->pid;
		e->h.tid = v->tid;
		e->h.flags = v->flags;
		e->issue = v->issue;
		e->cause_ts = v->cause_ts;
		e->cause_idx = v->cause_idx;
		__builtin_memcpy(e->comm, v->comm, sizeof(e->comm));
		if (!v->issue)
			e->h.flags |= BLK_ISSUE_UNKNOWN;
	} else {
		e->h.ts = 0;
		e->h.pid = 0;
		e->h.tid = 0;
		e->h.flags = BLK_START_UNKNOWN | BLK_ISSUE_UNKNOWN;
		e->issue = 0;
		e->cause_ts = 0;
		e->cause_idx = 0;
		e->comm[0] = 0;
	}
	if (!final)
		e->h.flags |= BLK_PARTIAL;
	e->complete = now;
	e->sector = BPF_CORE_READ(rq, __sector);
	e->bytes = nr_bytes;
	e->dev = ((u32)BPF_CORE_READ(disk, major) << 20) | (u32)BPF_CORE_READ(disk, first_minor);
	e->error = (s32)(u8)ctx->args[1];
	e->op = cmd & 0xff;
	e->rq_flags = rq_flags(cmd);
	e->_pad = 0;
	e->_pad2 = 0;
	BPF_CORE_READ_STR_INTO(&e->disk, disk, disk_name);
	bpf_ringbuf_submit(e, wake_flags());
	if (final && v)
		bpf_map_delete_elem(&blk_reqs, &key);
	return 0;
}
