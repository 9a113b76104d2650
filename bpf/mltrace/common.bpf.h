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

static __always_inline u64 wake_flags(void);

static __always_inline void count_lost_n(u32 kind, u64 n)
{
	u64 *c = bpf_map_lookup_elem(&lost, &kind);
	if (c)
		*c += n;
}

/* `x &= mask` that the compiler can neither drop nor move: for verifiers
 * that lose a bound the source has already checked. */
#define BOUND(x, mask) asm volatile("%0 &= " #mask : "+r"(x))

#define barrier() asm volatile("" ::: "memory")
#define READ_ONCE(x) (*(volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

/*
 * Batched records. A syscall's record goes into its CPU's batch, and the
 * batch into the CPU's ring as one record once it is full: one
 * reservation, header and wake-up check for about 60 records instead of
 * each (about 40 ns of a call's exit program here, 25 of the consumer's
 * work a record: docs/performance.md). Order is kept by the consumer:
 * `oldest` bounds what the merge hands over from other rings, every
 * straight record sends its CPU's batch first (so a ring stays in order),
 * and user space sends a stale batch by running flush_batch on its CPU.
 *
 * Only a program in a task's context adds to a batch; `busy` keeps a
 * program that interrupts it (an interrupt's, or flush_batch) from
 * sending the batch under it: that one writes straight, out of order by
 * the interrupted call at most, as a record reserved late always was.
 */
static __always_inline struct batch *cpu_batch(void)
{
	u32 *cpu;

	if (!batch_on)
		return NULL;
	cpu = bpf_map_lookup_elem(&cpu_index, (const void *)&key_zero);
	return cpu ? bpf_map_lookup_elem(&batches, cpu) : NULL;
}

/* Sends batch `b` (its caller holds it busy) and empties it. */
static __always_inline void send_batch_now(struct batch *b)
{
	u32 len = READ_ONCE(b->len), count = b->count;
	struct batch_hdr *h = (void *)b->data;
	void *r;

	if (len <= sizeof(*h))
		return;
	h->kind = RING_BATCH;
	h->count = count;
	r = cpu_ring();
	/* Always below BATCH_BYTES (batch_room): a bound for the verifier. */
	_Static_assert(BATCH_BYTES == 4096, "the bound below");
	BOUND(len, 4095);
	if (!r || bpf_ringbuf_output(r, b->data, len, wake_flags()))
		count_lost_n(LOST_RING, count);
	b->count = 0;
	WRITE_ONCE(b->len, 0);
	barrier();
	/* Last: user space that reads it empty then finds the batch sent. */
	WRITE_ONCE(b->oldest, 0);
}

/* The same, not inlined: its copies in fast_sys_exit took that program
 * past the stack's bound. */
static __noinline void send_batch(struct batch *b)
{
	send_batch_now(b);
}

/* What marks a batch busy: flush_batch, or a thread adding a record (see
 * rec_room). */
#define BUSY_FLUSH 1
#define THREAD_TAG(id) ((u32)(id) | 0x80000000)

/* Sends this CPU's batch unless a program it interrupted is adding to it
 * (before every straight record: not inlined, for the stack's sake). */
static __noinline void flush_cpu_batch(void)
{
	struct batch *b = cpu_batch();

	if (!b || READ_ONCE(b->busy) || !READ_ONCE(b->len))
		return;
	WRITE_ONCE(b->busy, BUSY_FLUSH);
	barrier();
	send_batch_now(b);
	barrier();
	WRITE_ONCE(b->busy, 0);
}

/* The bytes a record of `size` takes in a batch: its header, 8-aligned. */
#define BATCHED_SPAN(size) (((size) + 8 + 7) & ~7)

/* The place of a record of `size` bytes (at most BATCHED_MAX) in batch
 * `b`, which it marks busy with `tag` until batch_add; sends the batch
 * first when the record would not fit. NULL when a program this one
 * interrupted is adding to it: then the record goes straight. */
static __always_inline void *batch_room(struct batch *b, u32 size, u32 tag)
{
	u32 len;

	if (READ_ONCE(b->busy))
		return NULL;
	WRITE_ONCE(b->busy, tag);
	barrier();
	len = READ_ONCE(b->len);
	/* What batch_add will take: its header and the record, 8-aligned. A
	 * batch never reaches BATCH_BYTES (send_batch_now's bound). */
	if (len + BATCHED_SPAN(size) >= BATCH_BYTES) {
		send_batch(b);
		len = 0;
	}
	if (len < sizeof(struct batch_hdr))
		len = sizeof(struct batch_hdr);
	/* len < BATCH_BYTES: the mask changes nothing. */
	return &b->data[(len & (BATCH_BYTES - 1)) + 8];
}

/* Adds the record of `size` bytes written at batch_room's place, whose
 * merge key (decode::record_key) is `key`, and lets the batch go. */
static __always_inline void batch_add(struct batch *b, u32 size, u64 key)
{
	u32 len = READ_ONCE(b->len);

	if (len < sizeof(struct batch_hdr)) {
		len = sizeof(struct batch_hdr);
		WRITE_ONCE(b->oldest, key);
	}
	*(u32 *)&b->data[len & (BATCH_BYTES - 1)] = size;
	*(u32 *)&b->data[(len & (BATCH_BYTES - 1)) + 4] = 0;
	b->count++;
	barrier();
	WRITE_ONCE(b->len, len + BATCHED_SPAN(size));
	barrier();
	WRITE_ONCE(b->busy, 0);
}

/*
 * A syscall's record, in two steps that keep nothing more alive between
 * them than the record and the thread (fast_sys_exit's stack is at the
 * verifier's bound): rec_room gives its place, in the CPU's batch or, when
 * the batch cannot take it, in the per-CPU heap (a map value either way,
 * so the verifier need not know which); rec_done adds it to the batch if
 * the batch is still marked with this thread's tag, else sends it
 * straight. A thread's tag is its id with the top bit set (never
 * BUSY_FLUSH): one thread is never in two exits at once.
 */
static __always_inline void *rec_room(u32 size, u64 id)
{
	struct batch *b = cpu_batch();
	void *at = b ? batch_room(b, size, THREAD_TAG(id)) : NULL;
	struct heap *hp;

	if (at)
		return at;
	hp = bpf_map_lookup_elem(&heap, (const void *)&key_zero);
	if (!hp)
		return NULL;
	/* Else the compiler adds the offset before the check, which the
	 * verifier refuses. */
	asm volatile("" : "+r"(hp));
	return hp->rec;
}

static __always_inline long rb_output(void *data, u64 size, u64 flags);

static __always_inline long rec_done(void *e, u32 size, u64 key, u64 id)
{
	struct batch *b = cpu_batch();

	if (b && READ_ONCE(b->busy) == THREAD_TAG(id)) {
		batch_add(b, size, key);
		return 0;
	}
	return rb_output(e, size, wake_flags());
}

/* A record straight into the ring: the CPU's batch goes first. */
static __always_inline void *rb_reserve(u64 size)
{
	void *r;

	flush_cpu_batch();
	r = cpu_ring();
	return r ? bpf_ringbuf_reserve(r, size, 0) : NULL;
}

static __always_inline long rb_output(void *data, u64 size, u64 flags)
{
	void *r;

	flush_cpu_batch();
	r = cpu_ring();
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

/* Syscall arguments: direct loads from the typed pt_regs of tp_btf, CO-RE
 * reads from the raw pointer of raw_tp. `fast` is always a constant. */
#define ARG(n) (fast ? PT_REGS_PARM##n##_SYSCALL(regs) : PT_REGS_PARM##n##_CORE_SYSCALL(regs))

/* A thread's state on the fast and per-call routes (task storage): none
 * when it has not been seen or adopted yet. */
static __always_inline struct inflight *state_of(struct task_struct *t)
{
	return bpf_task_storage_get(&tstore, t, 0, 0);
}
