/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after python.bpf.h). record --detail summary: reads,
 * writes, syncs and closes summed per thread, file, operation and second
 * (io_sums on the compat route, the thread's slots in struct tstate on the
 * others), the sum_slots task iterator user space reads them with, and
 * SUM_CALL, which the I/O handlers (io.bpf.h) call.
 */

EV_KIND(EV_SUM, 30);  /* mltrace_log::IoSummary */

/*
 * record --detail summary (summary true): every read, write, sync and close
 * is summed per thread, file, operation and second: in the thread's own
 * state on the fast and per-call routes (struct sum_slot), in io_sums on
 * the compat route. Only a call that failed or took summary_slow_ns or
 * more is also recorded on its own. io_sums is not LRU: an evicted sum
 * would be lost without a word; a call that finds the map full is recorded
 * on its own instead.
 */
const volatile bool summary = false;
const volatile u64 summary_slow_ns = 1000000;

/* Preallocated: an insert on every new (thread, file) pair must not
 * allocate (with BPF_F_NO_PREALLOC the exit program took 620 ns a call on
 * a small-file loader). Still the dearest part of a summed call: about
 * 140 ns of the exit program's 404-440 on make bench's (b), against
 * 272-282 recording every call (docs/performance.md). About 11 MB of
 * kernel memory; user space sizes it to 1 entry when summaries are off. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, struct io_sum_key);
	__type(value, struct io_sum);
} io_sums SEC(".maps");

const struct io_sum io_sum_zero = {};

/* The histogram slot of a latency (see struct io_sum). */
static __always_inline u32 sum_bucket(u64 dur)
{
	u64 d = dur >> 10;
	u32 b = 1;

	if (!d)
		return 0;
	if (d >> 32) {
		d >>= 32;
		b += 32;
	}
	if (d >> 16) {
		d >>= 16;
		b += 16;
	}
	if (d >> 8) {
		d >>= 8;
		b += 8;
	}
	if (d >> 4) {
		d >>= 4;
		b += 4;
	}
	if (d >> 2) {
		d >>= 2;
		b += 2;
	}
	if (d >> 1)
		b += 1;
	return b < SUM_BUCKETS ? b : SUM_BUCKETS - 1;
}

/* `dev_op` of sum_call: the file's device, the low 24 bits of the second
 * the call ended in (user space knows which 194 days), the operation. By
 * its end: user space takes a second's sums once it has ended, and a call
 * that started in it may still be running then. */
#define SUM_DEV_OP(dev, end, op) (((u64)(dev) << 32) | ((((end) / 1000000000) & 0xffffff) << 8) | (op))

/* A summed call's Python stack, with stacks on: a call from another line
 * is another sum. Walked again for a slow call's own record (rare). */
static __always_inline u32 sum_stack(u64 id)
{
	return py_stacks_on ? py_stack(id) : 0;
}

/* The compat route (no task storage): sums a call in io_sums; 0 when the
 * map is full. Its thread is the only writer of its sums (a key holds the
 * thread, which runs on one CPU at a time, and programs are not preempted
 * by others of the same thread): plain adds, no atomics. User space reads
 * a second's sums after it has ended. */
static __noinline int sum_compat(u64 file, u64 ino, u64 dev_op, s64 ret, u64 dur)
{
	struct io_sum_key k = {
		.op = dev_op & 0xff,
		.sec = (dev_op >> 8) & 0xffffff,
		.file = file,
		.ino = ino,
		.dev = dev_op >> 32,
	};
	u64 id = bpf_get_current_pid_tgid();
	struct io_sum *s;
	u32 b;

	k.tgid = id >> 32;
	k.tid = (u32)id;
	k.stack = sum_stack(id);
	k.exec = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), self_exec_id);
	s = bpf_map_lookup_elem(&io_sums, &k);
	if (!s) {
		bpf_map_update_elem(&io_sums, &k, &io_sum_zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&io_sums, &k);
		if (!s)
			return 0;
	}
	s->calls++;
	if (ret >= 0)
		s->bytes += ret;
	else
		s->failed++;
	s->ns += dur;
	b = sum_bucket(dur);
	if (b < SUM_BUCKETS)
		s->hist[b]++;
	return 1;
}

/* The slot of an operation in a thread's state. */
static __always_inline u32 sum_slot_of(u32 op)
{
	if (op <= OP_PREADV2)
		return 0;
	if (op <= OP_PWRITEV2)
		return 1;
	if (op == OP_CLOSE)
		return 3;
	return 2;
}

/* Sends a slot's sums; the ring full: a record lost, counted. */
static __always_inline void send_slot(struct sum_slot *s, u64 now)
{
	/* Its merge key (the rings per CPU): a clock read after the open
	 * naming its file (the caller's, not a helper call here: that spilled
	 * one more register in fast_sys_exit, over 6.1's stack bound). */
	s->h.ts = now;
	if (s->sum.calls && rb_output(s, sizeof(*s), wake_flags()))
		count_lost(LOST_RING);
}

/* A slot's sums into the CPU's batch (the ring's record when the batch
 * cannot take it), not straight: on a small-file loader nearly every file
 * ends a slot, and a straight record also sends the batch before it.
 * A subprogram: its copy and the batch's bookkeeping once, not at every
 * handler that sums. */
static __noinline void send_slot_batched(struct sum_slot *s, u64 now, u64 id)
{
	void *at;

	_Static_assert(sizeof(*s) <= sizeof(((struct heap *)0)->rec) && sizeof(*s) < BATCHED_MAX,
		       "a slot fits rec_room's places");

	s->h.ts = now;
	if (!s->sum.calls)
		return;
	at = rec_room(sizeof(*s), id);
	if (!at) {
		count_lost(LOST_RING);
		return;
	}
	__builtin_memcpy(at, s, sizeof(*s));
	if (rec_done(at, sizeof(*s), now, id))
		count_lost(LOST_RING);
}

/* The fast and per-call routes: the call added to its thread's slot, which
 * is sent first when it holds another file's, operation's or second's. */
static __always_inline int sum_fast(struct tstate *ts, u64 now, u64 file, u64 ino, u64 dev_op, s64 ret, u64 dur)
{
	struct task_struct *t = bpf_get_current_task_btf();
	u32 op = dev_op & 0xff, i = sum_slot_of(op), b;
	u64 sec = (dev_op >> 8) & 0xffffff;
	struct sum_slot *s;
	u32 stack;

	if (!ts || i >= SUM_SLOTS)
		return 0;
	stack = sum_stack(((u64)t->tgid << 32) | t->pid);
	s = &ts->sums[i];
	if (s->key.stack != stack || s->key.file != file || s->key.ino != ino || s->key.sec != sec || s->key.op != op ||
	    s->key.dev != dev_op >> 32 || s->key.exec != t->self_exec_id || s->key.tid != t->pid || !s->sum.calls) {
		send_slot_batched(s, now, ((u64)t->tgid << 32) | t->pid);
		/* Odd while the key changes: the iterator skips the slot. */
		s->seq++;
		asm volatile("" ::: "memory");
		__builtin_memset(&s->sum, 0, sizeof(s->sum));
		s->h.kind = EV_SUM;
		s->slot = i;
		s->key.tgid = t->tgid;
		s->key.tid = t->pid;
		s->key.exec = t->self_exec_id;
		s->key.op = op;
		s->key.sec = sec;
		s->key.file = file;
		s->key.ino = ino;
		s->key.dev = dev_op >> 32;
		s->key.stack = stack;
		asm volatile("" ::: "memory");
		s->seq++;
	}
	s->sum.calls++;
	if (ret >= 0)
		s->sum.bytes += ret;
	else
		s->sum.failed++;
	s->sum.ns += dur;
	b = sum_bucket(dur);
	if (b < SUM_BUCKETS)
		s->sum.hist[b]++;
	return 1;
}

/* An exiting thread's sums, all sent: its state goes with it. */
static __always_inline void send_slots(struct inflight *st)
{
	struct tstate *ts = (struct tstate *)st;

	u64 now = bpf_ktime_get_boot_ns();

	if (!summary)
		return;
	for (int i = 0; i < SUM_SLOTS; i++) {
		struct sum_slot *s = &ts->sums[i];

		if (!s->sum.calls)
			continue;
		send_slot(s, now);
		/* Emptied, the iterator's way (the task outlives this). */
		s->seq++;
		asm volatile("" ::: "memory");
		s->sum.calls = 0;
		asm volatile("" ::: "memory");
		s->seq++;
	}
}

/*
 * User space's read of the threads' slots (every round, and at the end):
 * each filled slot whose key is not changing, with its seq; user space
 * keeps those of seconds that have ended (their threads will not add to
 * them) and takes each filling of a slot once, whether read here or sent.
 */
SEC("iter/task")
int sum_slots(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct seq_file *seq = ctx->meta->seq;
	struct tstate *ts;

	if (!t)
		return 0;
	ts = bpf_task_storage_get(&tstore, t, 0, 0);
	if (!ts)
		return 0;
	for (int i = 0; i < SUM_SLOTS; i++) {
		struct sum_slot *s = &ts->sums[i], copy;
		u32 before = s->seq;

		if ((before & 1) || !s->sum.calls)
			continue;
		asm volatile("" ::: "memory");
		__builtin_memcpy(&copy, s, sizeof(copy));
		asm volatile("" ::: "memory");
		/* Changed while copied: the thread sent it. */
		if (s->seq != before)
			continue;
		bpf_seq_write(seq, &copy, sizeof(copy));
	}
	return 0;
}

#define SUM_CALL(st, now, ...) (fast ? sum_fast((struct tstate *)(st), now, __VA_ARGS__) : sum_compat(__VA_ARGS__))
