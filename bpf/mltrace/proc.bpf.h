/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after syscalls.bpf.h). Processes and threads: fork
 * (children of traced processes are traced), exec, exit (the thread's last
 * sums, page-cache run and scheduling span; the process's I/O counters),
 * the leader's free (its tgid leaves `traced`) and comm changes (task_rename).
 */

EV_KIND(EV_FORK, 1);  /* mltrace_log::Fork */
EV_KIND(EV_EXEC, 2);  /* mltrace_log::Exec */
EV_KIND(EV_EXIT, 4);  /* mltrace_log::Exit */
EV_KIND(EV_COMM, 3);  /* mltrace_log::Comm */

/* A traced task forked: trace the child (its tgid too when it is a new
 * process, for user space's list) and say so. */
static __always_inline void on_fork(struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u32 cpid, ctid, one = 1;
	struct ev_fork *e;

	cpid = BPF_CORE_READ(child, tgid);
	ctid = BPF_CORE_READ(child, pid);
	if (cpid != ptgid) {
		if (bpf_map_update_elem(&traced, &cpid, &one, BPF_ANY))
			count_lost(LOST_MAP);
		else
			traced_changed();
	}
	if (cpid != ptgid)
		py_fork(ptgid, cpid);
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_FORK, 0, ((u64)cpid << 32) | ctid, bpf_ktime_get_boot_ns());
	e->parent_pid = ptgid;
	e->parent_tid = BPF_CORE_READ(parent, pid);
	e->thread = cpid == ptgid;
	bpf_ringbuf_submit(e, wake_flags());
}

SEC("raw_tp/sched_process_fork")
int sched_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (void *)ctx->args[0];
	u32 ptgid = BPF_CORE_READ(parent, tgid);

	if (bpf_map_lookup_elem(&traced, &ptgid))
		on_fork(parent, (void *)ctx->args[1]);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fast_sched_fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid;

	if (!state_of(parent)) {
		/* Attached: a thread that made no recorded call yet (and could
		 * not be added, before PIDFD_THREAD) still has its children
		 * followed. */
		ptgid = parent->tgid;
		if (!adopt || !bpf_map_lookup_elem(&traced, &ptgid) ||
		    !bpf_task_storage_get(&tstore, parent, 0, BPF_LOCAL_STORAGE_GET_F_CREATE))
			return 0;
	}
	/* Every thread of a traced process carries its own state. */
	if (!bpf_task_storage_get(&tstore, child, 0, BPF_LOCAL_STORAGE_GET_F_CREATE))
		count_lost(LOST_MAP);
	on_fork(parent, child);
	return 0;
}

/* The thread's own I/O counters, where the kernel keeps them. */
static __always_inline void read_ioac(struct task_struct *task, struct ev_ioac *a)
{
	__builtin_memset(a, 0, sizeof(*a));
	if (!bpf_core_field_exists(task->ioac))
		return;
	if (bpf_core_field_exists(task->ioac.rchar)) {
		a->rchar = BPF_CORE_READ(task, ioac.rchar);
		a->wchar = BPF_CORE_READ(task, ioac.wchar);
		a->syscr = BPF_CORE_READ(task, ioac.syscr);
		a->syscw = BPF_CORE_READ(task, ioac.syscw);
		a->have |= IOAC_CHARS;
	}
	if (bpf_core_field_exists(task->ioac.read_bytes)) {
		a->read_bytes = BPF_CORE_READ(task, ioac.read_bytes);
		a->write_bytes = BPF_CORE_READ(task, ioac.write_bytes);
		a->cancelled_write_bytes = BPF_CORE_READ(task, ioac.cancelled_write_bytes);
		a->have |= IOAC_BYTES;
	}
}

static __always_inline void on_exec(struct task_struct *task, struct linux_binprm *bprm)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 zero = 0;
	struct heap *hp;
	struct ev_exec *e;
	unsigned long start, end;
	long n;
	u32 flen = 0, alen;

	hp = bpf_map_lookup_elem(&heap, &zero);
	if (!hp)
		return;
	py_forget(id >> 32);
	e = &hp->exec;
	fill_hdr(&e->h, EV_EXEC, 0, id, bpf_ktime_get_boot_ns());
	/* The new program's exec id (low bits): a summary's calls with another
	 * one were the program's before (see io_sum_key). */
	e->h.flags = (u16)BPF_CORE_READ(task, self_exec_id);
	read_ioac(task, &e->ioac);
	e->trunc = 0;
	n = bpf_probe_read_kernel_str(e->data, PATHBUF, BPF_CORE_READ(bprm, filename));
	if (n > 0)
		flen = n - 1;
	else
		e->trunc |= TR_UNREADABLE;
	start = BPF_CORE_READ(task, mm, arg_start);
	end = BPF_CORE_READ(task, mm, arg_end);
	alen = end > start ? end - start : 0;
	if (alen > ARGVBUF - 1) {
		alen = ARGVBUF - 1;
		e->trunc |= TR_ARG;
	}
	flen &= PATHBUF - 1;
	alen &= ARGVBUF - 1;
	if (bpf_probe_read_user(&e->data[flen], alen, (void *)start)) {
		alen = 0;
		e->trunc |= TR_UNREADABLE;
		count_lost(LOST_STR);
	}
	e->filename_len = flen;
	e->argv_len = alen;
	if (rb_output(e, offsetof(struct ev_exec, data) + ((flen + alen) & (PATHBUF + ARGVBUF - 1)),
		      wake_flags()))
		count_lost(LOST_RING);	/* After the exec's record: user space forgets the old program's there. */
	py_exec(task, id);
}

SEC("raw_tp/sched_process_exec")
int sched_exec(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	if (exec_escapes((void *)ctx->args[0], tgid, (void *)ctx->args[2]))
		return 0;
	on_exec((void *)ctx->args[0], (void *)ctx->args[2]);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(fast_sched_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	if (!state_of(task))
		return 0;
	if (exec_escapes(task, task->tgid, bprm)) {
		bpf_task_storage_delete(&tstore, task);
		return 0;
	}
	on_exec(task, bprm);
	return 0;
}

static __always_inline void on_exit(struct task_struct *task)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	struct ev_exit *e;
	bool dead;

	/* signal->live was decremented before this tracepoint: 0 means last
	 * thread. Others may still be on their way here (they decremented it
	 * first, this one overtook them), so the process stays in `traced`,
	 * marked, until its leader is freed (sched_process_free). */
	dead = BPF_CORE_READ(task, signal, live.counter) == 0;
	if (dead) {
		u32 exited = TRACED_EXITED;

		if (bpf_map_update_elem(&traced, &tgid, &exited, BPF_EXIST) == 0)
			traced_changed();
		emit_anon(tgid, id);
		py_forget(tgid);
	}
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_EXIT, 0, id, bpf_ktime_get_boot_ns());
	e->status = BPF_CORE_READ(task, exit_code);
	e->group_dead = dead;
	read_ioac(task, &e->ioac);
	bpf_ringbuf_submit(e, wake_flags());
}

SEC("raw_tp/sched_process_exit")
int sched_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct inflight *vp;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	/* A thread killed inside a syscall never reaches sys_exit. */
	vp = bpf_map_lookup_elem(&inflight, &tid);
	if (vp)
		flush_pcache(vp, id);
	bpf_map_delete_elem(&inflight, &tid);
	on_exit((void *)ctx->args[0]);
	return 0;
}

static __always_inline void span_exit(struct task_struct *t, struct inflight *st);

SEC("tp_btf/sched_process_exit")
int BPF_PROG(fast_sched_exit, struct task_struct *task)
{
	struct inflight *st = state_of(task);
	u32 tgid;

	if (st) {
		if (st->op != OP_NONE)
			flush_pcache(st, ((u64)task->tgid << 32) | (u32)task->pid);
		send_slots(st);
		span_exit(task, st);
		on_exit(task);
		return 0;
	}
	/* io_uring's threads (iou-wrk-*, iou-sqp-*) are created without
	 * sched_process_fork, so they carry no state, and one of them may be
	 * the process's last thread to exit: its exit ends the process. */
	tgid = task->tgid;
	if (bpf_map_lookup_elem(&traced, &tgid))
		on_exit(task);
	return 0;
}

/* A process's leader is freed after all its threads were released: no
 * thread of it can still reach sched_process_exit. A pid reused since then
 * by a new traced process is TRACED_LIVE again and stays. */
SEC("raw_tp/sched_process_free")
int sched_free(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *t = (void *)ctx->args[0];
	u32 tgid = BPF_CORE_READ(t, tgid);
	u32 *v;

	if ((u32)BPF_CORE_READ(t, pid) != tgid)
		return 0;
	v = bpf_map_lookup_elem(&traced, &tgid);
	if (v && *v == TRACED_EXITED && bpf_map_delete_elem(&traced, &tgid) == 0)
		traced_changed();
	return 0;
}

static __always_inline void on_rename(struct task_struct *task, const char *comm)
{
	u32 tgid = BPF_CORE_READ(task, tgid);
	struct ev_comm *e;

	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_COMM, 0, ((u64)tgid << 32) | (u32)BPF_CORE_READ(task, pid), bpf_ktime_get_boot_ns());
	if (bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), comm) < 0)
		e->comm[0] = 0;
	bpf_ringbuf_submit(e, wake_flags());
}

SEC("raw_tp/task_rename")
int task_rename(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = (void *)ctx->args[0];
	u32 tgid = BPF_CORE_READ(task, tgid);

	if (bpf_map_lookup_elem(&traced, &tgid))
		on_rename(task, (const char *)ctx->args[1]);
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(fast_task_rename, struct task_struct *task, const char *comm)
{
	if (state_of(task))
		on_rename(task, comm);
	return 0;
}
