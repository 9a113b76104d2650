/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after maps.bpf.h). The small helpers every
 * subsystem uses: loss counting, the ring buffer's wakeup policy, record
 * headers, a thread's state on the fast route (state_of) and the syscall
 * argument macros.
 */

static __always_inline void count_lost(u32 kind)
{
	u64 *c = bpf_map_lookup_elem(&lost, &kind);
	if (c)
		*c += 1;
}

/* This CPU's ring (none only if user space failed to put one in place:
 * then every record is counted lost). */
static __always_inline void *cpu_ring(void)
{
	u32 *cpu = bpf_map_lookup_elem(&cpu_index, (const void *)&key_zero);

	return cpu ? bpf_map_lookup_elem(&cpu_rings, cpu) : NULL;
}

static __always_inline void *rb_reserve(u64 size)
{
	void *r = cpu_ring();

	return r ? bpf_ringbuf_reserve(r, size, 0) : NULL;
}

static __always_inline long rb_output(void *data, u64 size, u64 flags)
{
	void *r = cpu_ring();

	return r ? bpf_ringbuf_output(r, data, size, flags) : -1;
}

/* Wakes the consumer if it sleeps with the flag set (it sets it once it
 * has slept a while: ring.rs, Merged::poll), once: the flag is cleared
 * here (two CPUs may both see it set). No look-up of the ring and no
 * query: this runs on every record (see consumer_asleep). */
static __always_inline u64 wake_flags(void)
{
	u32 *asleep = bpf_map_lookup_elem(&consumer_asleep, (const void *)&key_zero);

	if (!asleep || !*asleep)
		return BPF_RB_NO_WAKEUP;
	*asleep = 0;
	return BPF_RB_FORCE_WAKEUP;
}

static __always_inline void fill_hdr(struct ev_hdr *h, u8 kind, u8 op, u64 id, u64 ts)
{
	h->kind = kind;
	h->op = op;
	h->flags = 0;
	h->pid = id >> 32;
	h->tid = (u32)id;
	h->stack = 0;
	h->ts = ts;
}

/* `x &= mask` that the compiler can neither drop nor move: for verifiers
 * that lose a bound the source has already checked. */
#define BOUND(x, mask) asm volatile("%0 &= " #mask : "+r"(x))

/* Syscall arguments: direct loads from the typed pt_regs of tp_btf, CO-RE
 * reads from the raw pointer of raw_tp. `fast` is always a constant. */
#define ARG(n) (fast ? PT_REGS_PARM##n##_SYSCALL(regs) : PT_REGS_PARM##n##_CORE_SYSCALL(regs))

/* A thread's state on the fast and per-call routes (task storage): none
 * when it has not been seen or adopted yet. */
static __always_inline struct inflight *state_of(struct task_struct *t)
{
	return bpf_task_storage_get(&tstore, t, 0, 0);
}
