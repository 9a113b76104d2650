/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after block.bpf.h). Scheduling: switches, wakeups
 * and migrations of traced threads, recorded one by one or (record --detail
 * summary) summed into spans per thread, with the open_spans task iterator
 * that reads the spans still open.
 */

EV_KIND(EV_SCHED, 20);  /* mltrace_log::SchedSwitch, SchedWake */
EV_KIND(EV_SPAN, 31);  /* mltrace_log::SchedSpan */

/*
 * record --detail summary (task-storage routes): a traced thread's
 * scheduling summed between its sleeps, instead of a record per switch and
 * wake-up. From `from` to `sleep_from` it was on a CPU `cpu` ns, waiting
 * for one `runnable` ns, stopped or otherwise `other` ns; then asleep
 * (`slept`, in the call numbered `call`) until h.ts, when the span is sent.
 * A thread that does not sleep sends one about every second, and one at
 * its exit: `slept` is then SS_RUNNABLE and `sleep_from` is h.ts. Short
 * sleeps the thread asked for (nanosleep, clock_nanosleep) that its timer
 * ended are summed in `timed` instead of ending the span: they wait for
 * nothing.
 */
struct ev_span {
	struct ev_hdr h;
	u64 from;
	u64 sleep_from;
	u64 cpu;
	u64 runnable;
	u64 other;
	u64 timed;
	u32 waker_pid;
	u32 waker_tid;
	s16 call;
	u8 slept;   /* enum sched_state */
	u8 by;      /* enum wake_by */
	u32 _pad;
};
/* ev_span.h.flags; an enum so that the skeleton carries it to user space */
enum span_bits {
	SPAN_WOKEN = 1,   /* a wake-up ended the sleep: by the task waker_*, or an interrupt (by) */
	SPAN_WAKER = 2,   /* the waker is a traced thread */
	SPAN_RUNNING = 4, /* on a CPU from h.ts (else runnable) */
};

struct ev_span keep_span = {};
enum span_bits keep_span_bits = 0;

/*
 * Scheduling: context switches with a traced thread on either side, and
 * wake-ups and migrations of traced threads. sched_switch runs on every
 * switch of the machine, so the filter is one task-storage lookup per side
 * (fast route) or one hash lookup per side (compat route) before anything
 * else; the untraced side of a switch is named from its task_struct.
 */
#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_STOPPED_BITS 0xc   /* __TASK_STOPPED | __TASK_TRACED */
#define TASK_DEAD_BITS 0xb0     /* EXIT_DEAD | EXIT_ZOMBIE | TASK_DEAD */
#define TASK_NOLOAD 0x400

static __always_inline u8 switch_state(bool preempt, struct task_struct *prev)
{
	long s;

	if (preempt)
		return SS_RUNNABLE;
	if (bpf_core_field_exists(prev->__state))
		s = BPF_CORE_READ(prev, __state);
	else
		s = BPF_CORE_READ((struct task_struct___old *)prev, state);
	if (s == 0)
		return SS_RUNNABLE;  /* woken before it got off the CPU */
	if (s & TASK_UNINTERRUPTIBLE)
		return s & TASK_NOLOAD ? SS_OTHER : SS_UNINTERRUPTIBLE;  /* TASK_IDLE is not I/O */
	if (s & TASK_INTERRUPTIBLE)
		return SS_SLEEPING;
	if (s & TASK_STOPPED_BITS)
		return SS_STOPPED;
	if (s & TASK_DEAD_BITS)
		return SS_DEAD;
	return SS_OTHER;
}

/*
 * The system call a thread going to sleep is in (its x86_64 number; CALL_GIL
 * for a futex on its Python's GIL), or -1: read from the registers saved at
 * the top of its kernel stack. orig_ax is the call's number, and ax still
 * holds the -ENOSYS that the entry code put there until the call returns;
 * an exception (a page fault) saves an error code in orig_ax and the
 * user's ax instead, so it names no call. Kernels with FRED (6.9+, when
 * enabled) leave 16 bytes above the registers: both places are tried.
 * KASAN kernels (32 KiB stacks) match neither and name no call.
 */
#define THREAD_SIZE (16 << 10)
#define ENOSYS 38

#if defined(__TARGET_ARCH_x86)
#define NR_FUTEX 202  /* x86_64 */

/* The registers a thread entered its sleeping call with, or NULL. */
static __always_inline struct pt_regs *call_regs(void *top)
{
	struct pt_regs *regs = top - bpf_core_type_size(struct pt_regs);

	if (BPF_CORE_READ(regs, ax) != (unsigned long)-ENOSYS || BPF_CORE_READ(regs, orig_ax) >= MAX_SYSCALL_NR)
		return NULL;
	return regs;
}
#define CALL_ARG1(regs) BPF_CORE_READ(regs, di)
#else
/* arm64 (asm-generic numbers): the entry code sets syscallno to -1 on any
 * entry from user space that is not a syscall, and the registers sit at
 * the very top of the stack (16 KiB with 4 and 16 KiB pages; 64 KiB-page
 * kernels name no call). */
#define NR_FUTEX 98

static __always_inline struct pt_regs *call_regs(void *top)
{
	struct pt_regs *regs = top - bpf_core_type_size(struct pt_regs);

	if ((u32)BPF_CORE_READ(regs, syscallno) >= MAX_SYSCALL_NR)
		return NULL;
	return regs;
}
#define CALL_ARG1(regs) BPF_CORE_READ(regs, orig_x0)
#endif

/* A futex inside its process's GIL (cond, mutex, switch_cond or
 * switch_mutex): the thread waits for the GIL, whoever drops it. */
static __always_inline bool on_gil(struct task_struct *t, struct pt_regs *regs)
{
	struct py_layout *l;
	u32 tgid;

	tgid = BPF_CORE_READ(t, tgid);
	l = bpf_map_lookup_elem(&py_procs, &tgid);
	return l && l->state == PY_READY && CALL_ARG1(regs) - l->runtime - l->gil_off < l->gil_size;
}

static __always_inline s16 sleeping_call(struct task_struct *t)
{
	void *stack = BPF_CORE_READ(t, stack);
	struct pt_regs *regs;
	s16 nr;

	if (!stack)
		return -1;
	regs = call_regs(stack + THREAD_SIZE);
#if defined(__TARGET_ARCH_x86)
	if (!regs)
		regs = call_regs(stack + THREAD_SIZE - 16);
#endif
	if (!regs)
		return -1;
	nr = PT_REGS_SYSCALL_NR_CORE(regs);
	return nr == NR_FUTEX && on_gil(t, regs) ? CALL_GIL : nr;
}

/*
 * What raised a wake-up (enum wake_by). A wake-up from a hard or soft
 * interrupt (a timer expiring, a device completing) runs on whatever task
 * the interrupt cut into: that task woke nobody and is not named, or the
 * verdict would take a timer for a worker handing over data.
 *
 * The CPU's preempt_count says which context runs. It is a per-CPU
 * variable that moved (x86: __preempt_count; in pcpu_hot from 6.2 to
 * 6.14), and the kernel resolves per-CPU symbols for BPF (typed ksyms)
 * only when it lists data symbols (CONFIG_KALLSYMS_ALL). So it is found
 * from a per-CPU variable the programs can reach, this CPU's runqueue
 * (the running task's cfs_rq->rq): every CPU's copy of the per-CPU
 * section has the same layout, and user space reads the distances from
 * the kernel's BTF (its .data..percpu section) or /proc/kallsyms.
 */
const volatile bool pc_known = false;
const volatile s64 pc_delta = 0;  /* &__preempt_count - &runqueues */
const volatile bool hb_known = false;
const volatile s64 hb_delta = 0;  /* &hrtimer_bases - &runqueues */

#define SOFTIRQ_OFFSET 0x100
#define HARDIRQ_MASK 0xf0000
#define NMI_MASK 0xf00000

static __always_inline u8 wake_by(void)
{
	struct task_struct *t = (void *)bpf_get_current_task();
	const struct hrtimer_cpu_base___mt *hb;
	void *rq;
	int pc = 0;

	if (!pc_known || !bpf_core_field_exists(t->se.cfs_rq))
		return WB_UNKNOWN;
	rq = BPF_CORE_READ(t, se.cfs_rq, rq);
#if defined(__TARGET_ARCH_x86)
	if (!rq || bpf_probe_read_kernel(&pc, sizeof(pc), rq + pc_delta))
		return WB_UNKNOWN;
#else
	/* arm64: the count is the running task's own, in its thread_info. */
	if (!rq)
		return WB_UNKNOWN;
	pc = (int)BPF_CORE_READ(t, thread_info.preempt_count);
#endif
	if (!(pc & (HARDIRQ_MASK | NMI_MASK)))
		return pc & SOFTIRQ_OFFSET ? WB_SOFTIRQ : WB_TASK;
	hb = rq + hb_delta;
	if (!hb_known || !bpf_core_field_exists(hb->in_hrtirq))
		return WB_HARDIRQ;
	return BPF_CORE_READ_BITFIELD_PROBED(hb, in_hrtirq) ? WB_TIMER : WB_HARDIRQ;
}

static __always_inline u32 task_cpu(struct task_struct *t)
{
	if (bpf_core_field_exists(t->thread_info.cpu))
		return BPF_CORE_READ(t, thread_info.cpu);
	return BPF_CORE_READ(t, cpu);
}

/* Whether task `t` belongs to a traced process (compat route: by tgid). */
static __always_inline bool compat_traced(struct task_struct *t)
{
	u32 tgid = BPF_CORE_READ(t, tgid);

	return BPF_CORE_READ(t, pid) != 0 && bpf_map_lookup_elem(&traced, &tgid);
}

static __always_inline void sched_ids(struct task_struct *t, u32 *pid, u32 *tid)
{
	*pid = BPF_CORE_READ(t, tgid);
	*tid = BPF_CORE_READ(t, pid);
}

/*
 * Ns thread `t`, switching out, ran since it got the CPU, by the kernel's
 * account of its run time (which leaves out time stolen by a hypervisor
 * and, where the kernel separates it, interrupts). The kernel's trace
 * sometimes lacks a switch-in (about one switch in 150 on a 6.18 VM,
 * the tracepoint itself not run: ftrace lacks it too); this places it.
 */
static __always_inline u64 stint_of(struct task_struct *t)
{
	u64 sum = BPF_CORE_READ(t, se.sum_exec_runtime), since = BPF_CORE_READ(t, se.prev_sum_exec_runtime);

	return sum > since ? sum - since : 0;
}

/* How far a run time may exceed the wait it ends (clocks apart) and still
 * place an untraced switch-in; the verdict's RAN_SLACK. */
#define RAN_SLACK_NS 100000ULL

static __always_inline void on_switch(bool preempt, struct task_struct *prev, struct task_struct *next, u8 traced)
{
	struct ev_sched *e = rb_reserve(sizeof(*e));
	u32 pid, tid;

	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	sched_ids(prev, &pid, &tid);
	fill_hdr(&e->h, EV_SCHED, SCHED_SWITCH, ((u64)pid << 32) | tid, bpf_ktime_get_boot_ns());
	sched_ids(next, &e->other_pid, &e->other_tid);
	e->cpu = bpf_get_smp_processor_id();
	e->target_cpu = e->cpu;
	e->prio = BPF_CORE_READ(prev, prio);
	e->other_prio = BPF_CORE_READ(next, prio);
	e->state = switch_state(preempt, prev);
	e->traced = traced;
	e->prev_call = (traced & ST_SELF) && e->state != SS_RUNNABLE ? sleeping_call(prev) : -1;
	e->ran_us = traced & ST_SELF ? stint_of(prev) / 1000 : 0;
	BPF_CORE_READ_STR_INTO(&e->comm, prev, comm);
	BPF_CORE_READ_STR_INTO(&e->other_comm, next, comm);
	bpf_ringbuf_submit(e, wake_flags());
}

/* A traced thread `p` woken by the running task (op SCHED_WAKING, to run on
 * p's CPU as the kernel has it then, as ftrace reports it), or moved to
 * `dest` (SCHED_MIGRATE). */
static __always_inline void on_wake(struct task_struct *p, u8 op, s32 dest, u8 traced)
{
	struct ev_sched *e = rb_reserve(sizeof(*e));
	u64 id = bpf_get_current_pid_tgid();
	u32 pid, tid;

	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	sched_ids(p, &pid, &tid);
	fill_hdr(&e->h, EV_SCHED, op, ((u64)pid << 32) | tid, bpf_ktime_get_boot_ns());
	e->state = op == SCHED_WAKING ? wake_by() : WB_TASK;
	if (e->state == WB_TASK || e->state == WB_UNKNOWN || op != SCHED_WAKING) {
		e->other_pid = id >> 32;
		e->other_tid = (u32)id;
		bpf_get_current_comm(&e->other_comm, sizeof(e->other_comm));
	} else {
		/* The interrupted task woke nobody. */
		e->other_pid = 0;
		e->other_tid = 0;
		e->other_comm[0] = 0;
		traced &= ~ST_OTHER;
	}
	e->prev_call = -1;
	if (op == SCHED_MIGRATE) {
		e->cpu = task_cpu(p);
		e->target_cpu = dest;
	} else {
		e->cpu = bpf_get_smp_processor_id();
		e->target_cpu = task_cpu(p);
	}
	e->prio = BPF_CORE_READ(p, prio);
	e->other_prio = 0;
	e->traced = traced;
	BPF_CORE_READ_STR_INTO(&e->comm, p, comm);
	bpf_ringbuf_submit(e, wake_flags());
}

/*
 * record --detail summary on the task-storage routes: each traced thread's
 * time on a CPU, runnable and otherwise is summed in its state, and sent
 * (ev_span) when a wake-up ends a sleep, with the sleep and its waker:
 * what the verdict needs of a thread, without a record per switch. A
 * thread that does not sleep sends its sums about every second.
 */
#define SPAN_FLUSH_NS 1000000000ULL
/* A timed sleep its timer ended, shorter than this, is summed in the span
 * (a loop paced by nanosleep sleeps thousands of times a second). */
#define SPAN_TIMED_NS 10000000ULL
#if defined(__TARGET_ARCH_x86)
#define NR_NANOSLEEP 35         /* x86_64, as sleeping_call reads them */
#define NR_CLOCK_NANOSLEEP 230
#else
#define NR_NANOSLEEP 101        /* arm64 */
#define NR_CLOCK_NANOSLEEP 115
#endif

static __always_inline void span_close(struct sched_acc *a, u64 now)
{
	u64 ns = now - a->since;

	if (a->st == SP_RUNNING)
		a->cpu += ns;
	else if (a->st == SP_RUNNABLE)
		a->runnable += ns;
	else if (a->st == SP_OTHER)
		a->other += ns;
	a->since = now;
}

static __always_inline void span_start(struct sched_acc *a, u64 now, u8 st)
{
	a->from = now;
	a->since = now;
	a->cpu = 0;
	a->runnable = 0;
	a->other = 0;
	a->timed = 0;
	a->st = st;
}

/* Sends thread `t`'s span, ended at `now` (by a sleep's end when `slept`
 * is SS_SLEEPING or SS_UNINTERRUPTIBLE), and starts the next. */
static __always_inline void span_send(struct task_struct *t, struct sched_acc *a, u64 now, u8 slept, u64 waker, u8 by,
				      u16 flags)
{
	struct ev_span *e = rb_reserve(sizeof(*e));

	if (e) {
		fill_hdr(&e->h, EV_SPAN, 0, ((u64)t->tgid << 32) | (u32)t->pid, now);
		e->h.flags = flags;
		e->from = a->from;
		e->sleep_from = slept == SS_RUNNABLE ? now : a->since;
		e->cpu = a->cpu;
		e->runnable = a->runnable;
		e->other = a->other;
		e->timed = a->timed;
		e->waker_pid = waker >> 32;
		e->waker_tid = (u32)waker;
		e->call = slept == SS_RUNNABLE ? -1 : a->call;
		e->slept = slept;
		e->by = by;
		e->_pad = 0;
		bpf_ringbuf_submit(e, wake_flags());
	} else {
		count_lost(LOST_RING);
	}
	span_start(a, now, a->st);
	a->since = now;
}

static __always_inline void span_switch(bool preempt, struct task_struct *prev, struct task_struct *next)
{
	struct tstate *ts = (struct tstate *)state_of(prev);
	struct sched_acc *a;
	u64 now = 0;
	u8 s;

	if (ts && ts->sa.st != SP_GONE) {
		a = &ts->sa;
		now = bpf_ktime_get_boot_ns();
		s = switch_state(preempt, prev);
		if (a->st == SP_NONE) {
			span_start(a, now, SP_RUNNING);
		} else {
			/* Not running by its spans: the kernel's trace lacked its
			 * switch-in. It got the CPU its run time ago, where that
			 * fits the wait (the count can span two stints). */
			if (a->st == SP_RUNNABLE || a->st == SP_OTHER) {
				u64 ran = stint_of(prev), waited = now - a->since;

				if (ran && ran <= waited + RAN_SLACK_NS) {
					if (waited > ran)
						span_close(a, now - ran);
					a->st = SP_RUNNING;
				}
			}
			span_close(a, now);
		}
		if (s == SS_SLEEPING || s == SS_UNINTERRUPTIBLE) {
			a->st = SP_ASLEEP;
			a->sleep = s;
			a->call = sleeping_call(prev);
		} else if (s == SS_RUNNABLE) {
			a->st = SP_RUNNABLE;
			if (now - a->from >= SPAN_FLUSH_NS)
				span_send(prev, a, now, SS_RUNNABLE, 0, 0, 0);
		} else {
			/* Dead: its last span went at its exit. */
			a->st = s == SS_DEAD ? SP_GONE : SP_OTHER;
		}
	}
	ts = (struct tstate *)state_of(next);
	if (!ts || ts->sa.st == SP_GONE)
		return;
	a = &ts->sa;
	if (!now)
		now = bpf_ktime_get_boot_ns();
	if (a->st == SP_NONE) {
		span_start(a, now, SP_RUNNING);
	} else if (a->st == SP_ASLEEP) {
		/* Its wake-up was not seen: the sleep ends here, by no one known. */
		a->st = SP_RUNNING;
		span_send(next, a, now, a->sleep, 0, WB_UNKNOWN, SPAN_RUNNING);
	} else {
		span_close(a, now);
		a->st = SP_RUNNING;
		if (now - a->from >= SPAN_FLUSH_NS)
			span_send(next, a, now, SS_RUNNABLE, 0, 0, SPAN_RUNNING);
	}
}

static __always_inline void span_wake(struct task_struct *p, struct sched_acc *a)
{
	u64 now = bpf_ktime_get_boot_ns(), waker = 0;
	u16 flags = SPAN_WOKEN;
	u8 by;

	if (a->st == SP_ASLEEP) {
		by = wake_by();
		if ((a->call == NR_NANOSLEEP || a->call == NR_CLOCK_NANOSLEEP) && by != WB_TASK && by != WB_UNKNOWN &&
		    now - a->since < SPAN_TIMED_NS) {
			a->timed += now - a->since;
			a->since = now;
			a->st = SP_RUNNABLE;
			return;
		}
		if (by == WB_TASK || by == WB_UNKNOWN) {
			waker = bpf_get_current_pid_tgid();
			if (state_of(bpf_get_current_task_btf()))
				flags |= SPAN_WAKER;
		}
		a->st = SP_RUNNABLE;
		span_send(p, a, now, a->sleep, waker, by, flags);
	} else if (a->st == SP_OTHER) {
		span_close(a, now);
		a->st = SP_RUNNABLE;
	} else if (a->st == SP_NONE) {
		span_start(a, now, SP_RUNNABLE);
	}
	/* Running or runnable: woken before it got off the CPU. */
}

/* An exiting thread's last span (it is running). */
static __always_inline void span_exit(struct task_struct *t, struct inflight *st)
{
	struct sched_acc *a = &((struct tstate *)st)->sa;
	u64 now;

	if (!summary || a->st == SP_NONE || a->st == SP_GONE)
		return;
	now = bpf_ktime_get_boot_ns();
	span_close(a, now);
	span_send(t, a, now, SS_RUNNABLE, 0, 0, SPAN_RUNNING);
	a->st = SP_GONE;
}

/*
 * User space's read of every thread's span in progress, at the end of the
 * recording: what it summed since its last span, up to now (or up to the
 * sleep it is in), so a thread that outlives an attached recording keeps
 * its last second. Read, not sent: the thread goes on.
 */
SEC("iter/task")
int open_spans(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct seq_file *seq = ctx->meta->seq;
	struct ev_span e = {};
	struct sched_acc a;
	struct tstate *ts;
	u64 now, ns;

	if (!t)
		return 0;
	ts = bpf_task_storage_get(&tstore, t, 0, 0);
	if (!ts)
		return 0;
	__builtin_memcpy(&a, &ts->sa, sizeof(a));
	if (a.st == SP_NONE || a.st == SP_GONE)
		return 0;
	now = bpf_ktime_get_boot_ns();
	if (a.st == SP_ASLEEP)
		now = a.since;
	ns = now > a.since ? now - a.since : 0;
	if (a.st == SP_RUNNING)
		a.cpu += ns;
	else if (a.st == SP_RUNNABLE)
		a.runnable += ns;
	else if (a.st == SP_OTHER)
		a.other += ns;
	fill_hdr(&e.h, EV_SPAN, 0, ((u64)t->tgid << 32) | (u32)t->pid, now);
	e.h.flags = a.st == SP_RUNNING ? SPAN_RUNNING : 0;
	e.from = a.from;
	e.sleep_from = now;
	e.cpu = a.cpu;
	e.runnable = a.runnable;
	e.other = a.other;
	e.timed = a.timed;
	e.call = -1;
	e.slept = SS_RUNNABLE;
	bpf_seq_write(seq, &e, sizeof(e));
	return 0;
}

/*
 * When a traced thread hands its CPU to an untraced task (not the idle
 * task), the CPU's next switch to the idle task is recorded too, unless a
 * traced thread comes back first: otherwise a CPU's track shows that task
 * running until the next recorded switch there, seconds later on an idle
 * CPU (a migration thread "running" for 9 s). Switches among untraced
 * tasks in between are not recorded (one extra record per hand-off at
 * most): the CPU shows busy with the task it was handed to until it idles.
 * Per CPU: whether such a hand-off is pending.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} cpu_handed SEC(".maps");

static __always_inline void switch_seen(bool preempt, struct task_struct *prev, struct task_struct *next, u8 traced,
				       bool idle_next)
{
	u32 zero = 0, *handed;

	/* Most switches of the machine: neither side traced, not to idle. */
	if (!traced && !idle_next)
		return;
	handed = bpf_map_lookup_elem(&cpu_handed, &zero);
	if (!handed || (!traced && !*handed))
		return;
	if (traced) {
		on_switch(preempt, prev, next, traced);
		*handed = !(traced & ST_OTHER) && !idle_next;
	} else if (idle_next) {
		on_switch(preempt, prev, next, 0);
		*handed = 0;
	}
}

SEC("raw_tp/sched_switch")
int sched_switch(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *prev = (void *)ctx->args[1], *next = (void *)ctx->args[2];
	u8 traced = (compat_traced(prev) ? ST_SELF : 0) | (compat_traced(next) ? ST_OTHER : 0);

	switch_seen(ctx->args[0], prev, next, traced, BPF_CORE_READ(next, pid) == 0);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(fast_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u8 traced;

	if (summary) {
		span_switch(preempt, prev, next);
		return 0;
	}
	traced = (state_of(prev) ? ST_SELF : 0) | (state_of(next) ? ST_OTHER : 0);

	switch_seen(preempt, prev, next, traced, next->pid == 0);
	return 0;
}

SEC("raw_tp/sched_waking")
int sched_waking(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *p = (void *)ctx->args[0];

	if (compat_traced(p))
		on_wake(p, SCHED_WAKING, 0,
			ST_SELF | (compat_traced((void *)bpf_get_current_task()) ? ST_OTHER : 0));
	return 0;
}

SEC("tp_btf/sched_waking")
int BPF_PROG(fast_sched_waking, struct task_struct *p)
{
	struct tstate *ts;

	if (summary) {
		ts = (struct tstate *)state_of(p);
		if (ts)
			span_wake(p, &ts->sa);
		return 0;
	}
	if (state_of(p))
		on_wake(p, SCHED_WAKING, 0, ST_SELF | (state_of(bpf_get_current_task_btf()) ? ST_OTHER : 0));
	return 0;
}

SEC("raw_tp/sched_migrate_task")
int sched_migrate(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *p = (void *)ctx->args[0];

	if (compat_traced(p))
		on_wake(p, SCHED_MIGRATE, ctx->args[1], ST_SELF);
	return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(fast_sched_migrate, struct task_struct *p, int dest_cpu)
{
	/* Summary detail: where a thread runs is not summed. */
	if (!summary && state_of(p))
		on_wake(p, SCHED_MIGRATE, dest_cpu, ST_SELF);
	return 0;
}
