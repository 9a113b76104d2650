/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after traced.bpf.h, since it calls every handler).
 * The syscall programs, on each of the three routes: compat (raw_tp
 * sys_enter/sys_exit, state in the inflight hash), fast (tp_btf, state in
 * task storage) and per-call (tracepoints of each recorded call), and leave,
 * the exit's dispatch by operation to the handlers of io.bpf.h, net.bpf.h,
 * mmap.bpf.h, meta.bpf.h and aio.bpf.h.
 */

/* In page_cache.bpf.h: sends the call's pending run of page-cache
 * insertions (at its exit, and at the thread's exit in proc.bpf.h). */
static __always_inline void flush_pcache(struct inflight *st, u64 id);

/* The syscall's arguments for the handlers that are subprograms (opens,
 * transfers, libaio, mappings), read here where `fast` is known: plain
 * loads from tp_btf's typed registers instead of probe reads. Kept out of
 * the exit program's own frame: the verifier before 6.14 limits a program
 * and the subprograms it calls to 512 bytes of stack together. */
static __always_inline bool save_args(struct pt_regs *regs, bool fast, u64 id)
{
	u32 zero = 0, stack = py_stack(id);
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);

	if (!hp)
		return false;
	hp->stack = stack;
	hp->args[0] = ARG(1);
	hp->args[1] = ARG(2);
	hp->args[2] = ARG(3);
	hp->args[3] = ARG(4);
	hp->args[4] = ARG(5);
	hp->args[5] = ARG(6);
	return true;
}

/* An open named its file in its own record: remember so. On the fast route
 * the thread remembers it as its last file (no map update per open; its
 * reads find it there); another thread's first use names it once more. */
static __always_inline void opened_named(struct inflight *st)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
	u64 key, ident;

	if (!hp)
		return;
	key = hp->open.file;
	ident = inode_ident(hp->open.ino, hp->open.dev);
	if (st) {
		u64 *epoch = bpf_map_lookup_elem(&files_epoch, &zero);

		remember_file(st, key, ident, epoch ? *epoch : 0);
		return;
	}
	bpf_map_update_elem(&files_seen, &key, &ident, BPF_ANY);
}

/* Syscall exit: `v` is the entry state; on the fast route `st` is the
 * thread's own state (the same memory; it outlives the call) and `t` the
 * thread. The caller marks the call handled after this returns. */
static __always_inline void leave(u8 op, struct inflight *v, struct inflight *st, struct task_struct *t,
				  struct pt_regs *regs, s64 ret, u64 id, bool fast)
{
	u64 now = bpf_ktime_get_boot_ns();

	/* v->op, passed apart so that a program of one operation (the
	 * trampoline route's) has only its handler. */
	switch (op) {
	case OP_READ ... OP_PWRITEV2:
	case OP_FSYNC ... OP_SYNC_FILE_RANGE:
		on_io(v, st, t, regs, ret, now, id, fast);
		break;
	case OP_OPEN ... OP_CREAT:
		if (save_args(regs, fast, id) && on_open(v, ret, now, id))
			opened_named(st);
		break;
	case OP_CLOSE:
		on_close(v, regs, ret, now, id, fast);
		break;
	case OP_SENDFILE:
	case OP_COPY_FILE_RANGE:
		if (save_args(regs, fast, id))
			on_xfer(v, ret, now, id);
		break;
	case OP_IO_SUBMIT ... OP_IO_PGETEVENTS:
		if (save_args(regs, fast, id))
			on_aio(v, ret, now, id);
		break;
	case OP_MMAP ... OP_MREMAP:
		if (save_args(regs, fast, id))
			on_map(v, ret, now, id);
		break;
	case OP_SENDTO ... OP_RECVMMSG:
		if (save_args(regs, fast, id))
			on_net(v, ret, now, id);
		break;
	case OP_GETDENTS64 ... OP_RENAMEAT2:
		if (save_args(regs, fast, id))
			on_meta(v, ret, now, id);
		break;
	}
}

/* Sends this CPU's batch of records (common.bpf.h): run by user space on
 * a CPU whose batch holds records back (BPF_PROG_TEST_RUN on that CPU),
 * and on every CPU before the last read; never attached. */
SEC("raw_tp")
int flush_batch(void *ctx)
{
	flush_cpu_batch();
	return 0;
}

/* The compat route: raw_tp programs, state in hash maps. */
SEC("raw_tp/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	u64 nr = ctx->args[1];
	u64 id;
	u32 tgid, tid;
	u8 op;
	struct inflight v = {};

	if (nr >= MAX_SYSCALL_NR)
		return 0;
	op = sys_op[nr];
	if (op == OP_NONE)
		return 0;
	id = bpf_get_current_pid_tgid();
	tgid = id >> 32;
	tid = (u32)id;
	if (!bpf_map_lookup_elem(&traced, &tgid) &&
	    !(adopt_all && adopt_process((void *)bpf_get_current_task(), tgid)))
		return 0;
	if (op >= OP_MMAP && op <= OP_MREMAP && !record_map(op, (void *)ctx->args[0], false))
		return 0;
	if (fd_stat(op, (void *)ctx->args[0], false))
		return 0;
	enter(&v, op, (void *)ctx->args[0], id, false);
	if (bpf_map_update_elem(&inflight, &tid, &v, BPF_ANY))
		count_lost(LOST_MAP);
	return 0;
}

SEC("raw_tp/sys_exit")
int sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	struct inflight *vp = bpf_map_lookup_elem(&inflight, &tid);

	if (!vp)
		return 0;
	if (vp->op == OP_SETID) {
		u32 nr = PT_REGS_SYSCALL_NR_CORE((struct pt_regs *)ctx->args[0]);

		setid_escapes((void *)bpf_get_current_task(), id >> 32, nr);
		bpf_map_delete_elem(&inflight, &tid);
		return 0;
	}
	/* No copy of the state (stack is short, see save_args): only this
	 * thread touches its entry, which goes once the call is handled. */
	flush_pcache(vp, id);
	leave(vp->op, vp, NULL, NULL, (void *)ctx->args[0], ctx->args[1], id, false);
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

/* The fast route: tp_btf programs, state in task storage. */
/* The fast route's work at a syscall's entry and exit, given the user's
 * registers (typed: plain loads) and the call's number. */
static __always_inline int fast_start(struct pt_regs *regs, u8 op);

static __always_inline int fast_enter(struct pt_regs *regs, u64 nr)
{
	u8 op;

	if (nr >= MAX_SYSCALL_NR)
		return 0;
	op = sys_op[nr];
	if (op == OP_NONE)
		return 0;
	return fast_start(regs, op);
}

/* A recorded call of operation `op` starts: on the fast, per-call and
 * trampoline routes. */
static __always_inline int fast_start(struct pt_regs *regs, u8 op)
{
	struct inflight *st;

	st = state_of(bpf_get_current_task_btf());
	if (!st && adopt)
		st = adopt_task(bpf_get_current_task_btf());
	if (!st)
		return 0;
	if (op >= OP_MMAP && op <= OP_MREMAP && !record_map(op, regs, true))
		return 0;
	if (fd_stat(op, regs, true))
		return 0;
	/* The ids are only needed to name the file a close is about. */
	enter(st, op, regs, op == OP_CLOSE ? bpf_get_current_pid_tgid() : 0, true);
	return 0;
}

static __always_inline int fast_exit(struct pt_regs *regs, u64 nr, long ret)
{
	struct task_struct *t;
	struct inflight *st;

	/* Most syscalls are not ours: decide before looking anything up. */
	if (nr >= MAX_SYSCALL_NR || sys_op[nr] == OP_NONE)
		return 0;
	t = bpf_get_current_task_btf();
	st = state_of(t);
	if (!st || st->op == OP_NONE)
		return 0;
	if (st->op == OP_SETID) {
		st->op = OP_NONE;
		if (setid_escapes(t, t->tgid, (u32)nr))
			bpf_task_storage_delete(&tstore, t);
		return 0;
	}
	/* The state itself, not a copy (stack is short, see save_args). */
	flush_pcache(st, ((u64)t->tgid << 32) | (u32)t->pid);
	leave(st->op, st, st, t, regs, ret, ((u64)t->tgid << 32) | (u32)t->pid, true);
	st->op = OP_NONE;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(fast_sys_enter, struct pt_regs *regs, long nr)
{
	return fast_enter(regs, nr);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(fast_sys_exit, struct pt_regs *regs, long ret)
{
	return fast_exit(regs, PT_REGS_SYSCALL_NR(regs), ret);
}

/*
 * The per-call route: the fast route's work, run only on the calls that
 * are recorded. User space attaches these two programs to each recorded
 * call's own syscalls:sys_enter_NAME and sys_exit_NAME tracepoints, so a
 * call it does not record (fstat, lseek, futex...), in any process, runs
 * no program at all. The context is the kernel's syscall_tp_t: the call's
 * number at offset 8 (an int since 6.5, a long before: on little-endian
 * the same low half), then its arguments or its return value; the first
 * 8 bytes, the registers, are not readable: they come from the task
 * (bpf_task_pt_regs, 5.15+).
 */
struct call_ctx {
	u64 hidden;
	s32 nr;
	s32 pad;
	s64 ret;
};

SEC("tp/syscalls/sys_enter_read")
int call_enter(struct call_ctx *ctx)
{
	return fast_enter((struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()), (u32)ctx->nr);
}

SEC("tp/syscalls/sys_exit_read")
int call_exit(struct call_ctx *ctx)
{
	return fast_exit((struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf()), (u32)ctx->nr, ctx->ret);
}

/*
 * The trampoline route: the fast route's work, run by fentry and fexit
 * programs on each recorded call's own kernel function (__x64_sys_NAME,
 * which takes the user's registers), so a call mltrace does not record
 * runs no program, and no call takes the syscall tracepoints' slow path.
 * Each program is of one operation: its exit has only that handler (see
 * leave). User space loads the pairs of the calls it records (mappings and
 * the set*id calls only when they are), and the route only where the
 * kernel has BPF trampolines and every one of those functions.
 */
#if defined(__TARGET_ARCH_arm64)
#define SYS_FN(name) "__arm64_sys_" #name
#else
#define SYS_FN(name) "__x64_sys_" #name
#endif

static __always_inline int tramp_exit(struct pt_regs *regs, u8 op, long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct inflight *st = state_of(t);
	u64 id;

	if (!st || st->op != op)
		return 0;
	if (op == OP_SETID) {
		st->op = OP_NONE;
		if (setid_escapes(t, t->tgid, (u32)PT_REGS_SYSCALL_NR(regs)))
			bpf_task_storage_delete(&tstore, t);
		return 0;
	}
	id = ((u64)t->tgid << 32) | (u32)t->pid;
	flush_pcache(st, id);
	leave(op, st, st, t, regs, ret, id, true);
	st->op = OP_NONE;
	return 0;
}

#define TRAMPOLINE(name, op)							\
	SEC("fentry/" SYS_FN(name))						\
	int BPF_PROG(tr_enter_##name, struct pt_regs *regs)			\
	{									\
		return fast_start(regs, op);					\
	}									\
	SEC("fexit/" SYS_FN(name))						\
	int BPF_PROG(tr_exit_##name, struct pt_regs *regs, long ret)		\
	{									\
		return tramp_exit(regs, op, ret);				\
	}

/* Every call crates/capture/src/syscalls.rs can record, by the name its
 * tracepoints and kernel function have (a test checks the two lists). */
TRAMPOLINE(read, OP_READ)
TRAMPOLINE(pread64, OP_PREAD64)
TRAMPOLINE(readv, OP_READV)
TRAMPOLINE(preadv, OP_PREADV)
TRAMPOLINE(preadv2, OP_PREADV2)
TRAMPOLINE(write, OP_WRITE)
TRAMPOLINE(pwrite64, OP_PWRITE64)
TRAMPOLINE(writev, OP_WRITEV)
TRAMPOLINE(pwritev, OP_PWRITEV)
TRAMPOLINE(pwritev2, OP_PWRITEV2)
TRAMPOLINE(openat, OP_OPENAT)
TRAMPOLINE(openat2, OP_OPENAT2)
TRAMPOLINE(close, OP_CLOSE)
TRAMPOLINE(sendfile64, OP_SENDFILE)
TRAMPOLINE(copy_file_range, OP_COPY_FILE_RANGE)
TRAMPOLINE(fsync, OP_FSYNC)
TRAMPOLINE(fdatasync, OP_FDATASYNC)
TRAMPOLINE(sync_file_range, OP_SYNC_FILE_RANGE)
TRAMPOLINE(io_submit, OP_IO_SUBMIT)
TRAMPOLINE(io_getevents, OP_IO_GETEVENTS)
TRAMPOLINE(io_pgetevents, OP_IO_PGETEVENTS)
TRAMPOLINE(sendto, OP_SENDTO)
TRAMPOLINE(recvfrom, OP_RECVFROM)
TRAMPOLINE(sendmsg, OP_SENDMSG)
TRAMPOLINE(recvmsg, OP_RECVMSG)
TRAMPOLINE(sendmmsg, OP_SENDMMSG)
TRAMPOLINE(recvmmsg, OP_RECVMMSG)
TRAMPOLINE(open, OP_OPEN)
TRAMPOLINE(creat, OP_CREAT)
TRAMPOLINE(getdents64, OP_GETDENTS64)
TRAMPOLINE(newfstatat, OP_NEWFSTATAT)
TRAMPOLINE(statx, OP_STATX)
TRAMPOLINE(faccessat, OP_FACCESSAT)
TRAMPOLINE(faccessat2, OP_FACCESSAT2)
TRAMPOLINE(readlinkat, OP_READLINKAT)
TRAMPOLINE(renameat, OP_RENAMEAT)
TRAMPOLINE(renameat2, OP_RENAMEAT2)
TRAMPOLINE(unlinkat, OP_UNLINKAT)
TRAMPOLINE(mkdirat, OP_MKDIRAT)
TRAMPOLINE(newstat, OP_STAT)
TRAMPOLINE(newlstat, OP_LSTAT)
TRAMPOLINE(access, OP_ACCESS)
TRAMPOLINE(readlink, OP_READLINK)
TRAMPOLINE(rename, OP_RENAME)
TRAMPOLINE(unlink, OP_UNLINK)
TRAMPOLINE(mkdir, OP_MKDIR)
TRAMPOLINE(rmdir, OP_RMDIR)
TRAMPOLINE(mmap, OP_MMAP)
TRAMPOLINE(munmap, OP_MUNMAP)
TRAMPOLINE(mremap, OP_MREMAP)
TRAMPOLINE(setuid, OP_SETID)
TRAMPOLINE(setreuid, OP_SETID)
TRAMPOLINE(setresuid, OP_SETID)
TRAMPOLINE(setfsuid, OP_SETID)
TRAMPOLINE(setgid, OP_SETID)
TRAMPOLINE(setregid, OP_SETID)
TRAMPOLINE(setresgid, OP_SETID)
TRAMPOLINE(setfsgid, OP_SETID)
