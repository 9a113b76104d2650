/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after aio.bpf.h). Which processes are traced, beyond
 * the fork inheritance in proc.bpf.h: record -a's filters and the adoption of
 * processes and threads that existed before recording (record -p, -a), and,
 * not root, the untracing of a process that becomes another user or group
 * (setuid exec, setuid()).
 */

EV_KIND(EV_UNTRACED, 65);  /* none: a process let go, said at the end */

static __always_inline void on_rename(struct task_struct *task, const char *comm);

/* Whether -a's filters take the current task's process. */
static __always_inline bool wanted(struct task_struct *t, u32 tgid)
{
	char comm[16];
	int i;

	if (tgid == self_tgid)
		return false;
	if (want_comm[0]) {
		if (BPF_CORE_READ_INTO(&comm, t, group_leader, comm))
			return false;
		for (i = 0; i < 16; i++) {
			if (comm[i] != want_comm[i])
				return false;
			if (!comm[i])
				break;
		}
	}
	if (want_cgroup && bpf_current_task_under_cgroup(&cgroup_filter, 0) != 1)
		return false;
	return true;
}

/* -a: the current task's process passes the filters: add it to `traced`
 * and name it (its comm; it has no exec in the log). Returns false when it
 * is not wanted. */
static __always_inline bool adopt_process(struct task_struct *t, u32 tgid)
{
	u32 live = TRACED_LIVE;
	struct task_struct *leader;

	if (!wanted(t, tgid))
		return false;
	if (bpf_map_update_elem(&traced, &tgid, &live, BPF_NOEXIST) == 0) {
		traced_changed();
		leader = BPF_CORE_READ(t, group_leader);
		on_rename(leader, leader->comm);
	}
	return true;
}

/* Not root: whether `task` runs as another user or group than the one
 * recording, by any of its ids (real, effective, saved, filesystem). */
static __always_inline bool cred_changed(struct task_struct *task)
{
	const struct cred *c;

	if (only_uid == (u32)-1)
		return false;
	c = BPF_CORE_READ(task, cred);
	return BPF_CORE_READ(c, uid.val) != only_uid || BPF_CORE_READ(c, euid.val) != only_uid ||
	       BPF_CORE_READ(c, suid.val) != only_uid || BPF_CORE_READ(c, fsuid.val) != only_uid ||
	       BPF_CORE_READ(c, gid.val) != only_gid || BPF_CORE_READ(c, egid.val) != only_gid ||
	       BPF_CORE_READ(c, sgid.val) != only_gid || BPF_CORE_READ(c, fsgid.val) != only_gid;
}

/* Takes process `tgid` out of the traced set for good (its new identity is
 * not the recording user's) and says so, once: when, why, as whom. */
static __always_inline void untrace(struct task_struct *task, u32 tgid, u8 op, u32 nr, const char *path)
{
	const struct cred *c;
	struct ev_untraced *e;
	long n;

	if (bpf_map_delete_elem(&traced, &tgid))
		return;
	traced_changed();
	/* Its anonymous mmaps so far: counted while it was the user's. */
	emit_anon(tgid, bpf_get_current_pid_tgid());
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_UNTRACED, op, bpf_get_current_pid_tgid(), bpf_ktime_get_boot_ns());
	c = BPF_CORE_READ(task, cred);
	e->uid = BPF_CORE_READ(c, uid.val);
	e->euid = BPF_CORE_READ(c, euid.val);
	e->gid = BPF_CORE_READ(c, gid.val);
	e->egid = BPF_CORE_READ(c, egid.val);
	e->nr = nr;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	e->path_len = 0;
	e->path[0] = 0;
	if (path) {
		n = bpf_probe_read_kernel_str(e->path, sizeof(e->path), path);
		if (n > 0)
			e->path_len = n - 1;
	}
	bpf_ringbuf_submit(e, wake_flags());
}

/* A traced process that exec'd into another user or group than the one
 * who may watch it (a setuid or setgid program) leaves the traced set
 * before its new program runs: its exec is not recorded, its stop is. */
static __always_inline bool exec_escapes(struct task_struct *task, u32 tgid, struct linux_binprm *bprm)
{
	if (!cred_changed(task))
		return false;
	untrace(task, tgid, OP_NONE, 0, BPF_CORE_READ(bprm, filename));
	return true;
}

/* setuid() and its kin returned in a traced thread: if it now runs as
 * another user or group, its process leaves the traced set before the
 * call returns to it. */
static __always_inline bool setid_escapes(struct task_struct *task, u32 tgid, u32 nr)
{
	if (!cred_changed(task))
		return false;
	untrace(task, tgid, OP_SETID, nr, NULL);
	return true;
}

/* A thread without state whose process is traced (it existed before the
 * attach), or under -a passes the filters: give it state. Names it, since
 * its creation is not in the log. */
static __always_inline struct inflight *adopt_task(struct task_struct *t)
{
	u32 tgid = t->tgid;
	struct inflight *st;

	if (!bpf_map_lookup_elem(&traced, &tgid) && !(adopt_all && adopt_process(t, tgid)))
		return 0;
	st = bpf_task_storage_get(&tstore, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count_lost(LOST_MAP);
		return 0;
	}
	if (t->pid != tgid)
		on_rename(t, t->comm);
	return st;
}
