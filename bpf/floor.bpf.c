// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The benchmark's floors.
 *
 * - count: programs on the same raw tracepoints as mltrace's fast and
 *   compat routes that only count. What any BPF tracer that sees every
 *   syscall pays before doing any work.
 * - count per call: the same on each recorded call's own tracepoints, as
 *   mltrace's per-call route attaches.
 * - latency: the least a tracer must do to record each syscall of one
 *   process tree with its duration: per-thread state in task storage
 *   (its presence marks a traced thread; forks pass it on), a timestamp
 *   at entry and at exit, one 32-byte ring record. No file lookup, no
 *   arguments. Into one shared ring, one ring per CPU, or one per CPU
 *   in batches of 64 (what batched submits would save).
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, u64);
} counts SEC(".maps");

static __always_inline void bump(u32 k)
{
	u64 *c = bpf_map_lookup_elem(&counts, &k);

	if (c)
		*c += 1;
}

SEC("raw_tp/sys_enter")
int floor_enter(void *ctx)
{
	bump(0);
	return 0;
}

SEC("raw_tp/sys_exit")
int floor_exit(void *ctx)
{
	bump(1);
	return 0;
}

/* The count-only floor of the per-call route: the same counting, attached
 * by the bench to each recorded call's own syscalls:sys_enter_NAME and
 * sys_exit_NAME (as mltrace's per-call route is), so other calls run no
 * program. */
SEC("tp/syscalls/sys_enter_read")
int floor_call_enter(void *ctx)
{
	bump(0);
	return 0;
}

SEC("tp/syscalls/sys_exit_read")
int floor_call_exit(void *ctx)
{
	bump(1);
	return 0;
}

/* The process whose syscalls the latency floor records (set once it runs),
 * with its threads and descendants. */
u32 target_tgid = 0;

struct start {
	u64 ts;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24);
} records SEC(".maps");

/* The same records in one ring per CPU, when `per_cpu` (user space makes
 * the rings): no lock, producer position or record header shared between
 * CPUs, to measure what the one shared ring costs each call. */
struct cpu_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 256);
	__type(key, u32);
	__array(values, struct cpu_ring);
} cpu_records SEC(".maps");

const volatile bool per_cpu = false;

struct record {
	u64 ts;
	u64 dur;
	u64 nr;
	s64 ret;
};

/* With `batched` (and `per_cpu`): records gathered per CPU and sent BATCH
 * at a time, one reservation for all: what batched ring submits would
 * save each call at best (no ordering between CPUs' unsent batches is
 * kept here, which a recorder would need). */
#define BATCH 64
const volatile bool batched = false;

struct batch {
	u32 n;
	u32 pad;
	struct record r[BATCH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct batch);
} batches SEC(".maps");

SEC("tp_btf/sys_enter")
int BPF_PROG(latency_enter, struct pt_regs *regs, long nr)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct start *s;

	s = bpf_task_storage_get(&starts, t, 0, 0);
	if (!s && t->tgid == target_tgid)
		s = bpf_task_storage_get(&starts, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (s)
		s->ts = bpf_ktime_get_boot_ns();
	return 0;
}

/* A traced task's children and threads are traced from their first syscall
 * (the workers of a data loader are forked children). */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(latency_fork, struct task_struct *parent, struct task_struct *child)
{
	if (bpf_task_storage_get(&starts, parent, 0, 0))
		bpf_task_storage_get(&starts, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(latency_exit, struct pt_regs *regs, long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct start *s;
	struct record *r;

	s = bpf_task_storage_get(&starts, t, 0, 0);
	if (!s || !s->ts)
		return 0;
	if (batched) {
		u32 zero = 0, cpu;
		struct batch *b = bpf_map_lookup_elem(&batches, &zero);
		void *ring;
		u32 n;

		if (!b)
			return 0;
		n = b->n;
		if (n >= BATCH)
			n = 0;
		r = &b->r[n];
		r->ts = s->ts;
		r->dur = bpf_ktime_get_boot_ns() - s->ts;
		r->nr = PT_REGS_SYSCALL_NR(regs);
		r->ret = ret;
		if (++n < BATCH) {
			b->n = n;
			return 0;
		}
		b->n = 0;
		cpu = bpf_get_smp_processor_id();
		ring = bpf_map_lookup_elem(&cpu_records, &cpu);
		if (!ring || bpf_ringbuf_output(ring, b->r, sizeof(b->r), BPF_RB_NO_WAKEUP))
			bump(0);
		return 0;
	}
	if (per_cpu) {
		u32 cpu = bpf_get_smp_processor_id();
		void *ring = bpf_map_lookup_elem(&cpu_records, &cpu);

		if (!ring) {
			bump(0);
			return 0;
		}
		r = bpf_ringbuf_reserve(ring, sizeof(*r), 0);
	} else {
		r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	}
	if (!r) {
		bump(0);
		return 0;
	}
	r->ts = s->ts;
	r->dur = bpf_ktime_get_boot_ns() - s->ts;
	r->nr = PT_REGS_SYSCALL_NR(regs);
	r->ret = ret;
	/* No wakeup per record: the consumer polls, as mltrace batches wakeups. */
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}
