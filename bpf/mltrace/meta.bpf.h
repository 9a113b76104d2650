/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after mmap.bpf.h). The metadata calls (getdents64
 * through renameat2: stat, access, unlink, mkdir, rename...): their paths and
 * results in one record each (on_meta, built in meta_heap).
 */

EV_KIND(EV_META, 32);  /* mltrace_log::MetaCall */

/*
 * A metadata call: getdents64 on a directory fd (base: its file), or a call
 * on a path (the stat and access families, readlink, unlink, mkdir, rmdir;
 * rename and its kin on two). A relative path comes with the key of the
 * directory it is relative to (base, base2: the dirfd's file or the cwd,
 * named once as ev_file), for user space to join. h.op: OP_GETDENTS64 ...
 * OP_RENAMEAT2.
 */
struct ev_meta {
	struct ev_hdr h;
	u64 dur;
	u64 base;
	u64 base2;
	s64 ret;
	u32 flags;      /* the flags or mode argument (see mltrace_log::MetaCall) */
	s32 dirfd;      /* AT_FDCWD for the calls without one; getdents64: the fd */
	s32 dirfd2;
	u32 nblk;
	u16 path_len;
	u16 path2_len;
	u8 trunc;       /* str_bits TR_* */
	u8 _pad[3];
	char path[2 * PATHBUF];  /* the path, then (rename*) the new one */
};
struct ev_meta keep_meta = {};

/* The metadata calls' record, built like heap's (a per-CPU array's value
 * holds at most 32 KiB: heap's is full). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ev_meta);
} meta_heap SEC(".maps");

#define AT_EMPTY_PATH 0x1000

/* A path argument of a metadata call read into the record at `off`: its
 * length; a TR_* bit in *trunc when it was cut or could not be read. */
static __always_inline u32 meta_path(struct ev_meta *e, u32 off, u64 upath, u8 *trunc)
{
	long n = bpf_probe_read_user_str(&e->path[off & (PATHBUF - 1)], PATHBUF, (const char *)upath);

	if (n <= 0) {
		*trunc |= TR_UNREADABLE;
		return 0;
	}
	if (n == PATHBUF)
		*trunc |= TR_ARG;
	return n - 1;
}

/* The directory a path is relative to (0 for an absolute one): the
 * dirfd's file or the working directory, named once for user space. */
static __always_inline u64 meta_base(struct ev_meta *e, u32 off, u32 len, s32 dirfd, u64 id)
{
	if (len > 0 && e->path[off & (2 * PATHBUF - 1)] == '/')
		return 0;
	return dirfd == AT_FDCWD ? cwd_key(id) : file_key(fd_file(dirfd), id, NULL);
}

/* A stat of a fd, not of a path (glibc's fstat is newfstatat(fd, "",
 * buf, AT_EMPTY_PATH)): on_meta would not record it, so the entry programs
 * do not start it and its exit finds no call. Decided from the flags and
 * the path's first byte (an unreadable or NULL path is no path either). */
static __always_inline bool fd_stat(u8 op, struct pt_regs *regs, bool fast)
{
	u64 flags;
	char c = 0;

	if (op == OP_NEWFSTATAT)
		flags = ARG(4);
	else if (op == OP_STATX)
		flags = ARG(3);
	else
		return false;
	if (!(flags & AT_EMPTY_PATH))
		return false;
	return bpf_probe_read_user(&c, 1, (const void *)ARG(2)) || c == 0;
}

/*
 * Metadata calls at their exit: the path (two for rename and its kin), the
 * directory a relative one is relative to, the result. getdents64's
 * directory is its fd's file. newfstatat and statx of AT_EMPTY_PATH with
 * no path are fstat on a fd (glibc's fstat is one): no path is looked up,
 * and they are not recorded.
 */
static __noinline int on_meta(struct inflight *v, s64 ret, u64 now, u64 id)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
	struct ev_meta *e;
	u64 p1 = 0, p2 = 0;
	s32 dirfd = AT_FDCWD, dirfd2 = AT_FDCWD;
	u32 flags = 0, len = 0, len2 = 0;
	u8 trunc = 0;
	u8 op = v->op;

	e = bpf_map_lookup_elem(&meta_heap, &zero);
	if (!hp || !e)
		return 0;
	switch (op) {
	case OP_GETDENTS64:
		dirfd = hp->args[0];
		break;
	case OP_STAT:
	case OP_LSTAT:
	case OP_READLINK:
	case OP_UNLINK:
	case OP_RMDIR:
		p1 = hp->args[0];
		break;
	case OP_ACCESS:
	case OP_MKDIR:
		/* access(path, mode), mkdir(path, mode) */
		p1 = hp->args[0];
		flags = hp->args[1];
		break;
	case OP_NEWFSTATAT:
		/* newfstatat(dfd, path, buf, flags) */
		dirfd = hp->args[0];
		p1 = hp->args[1];
		flags = hp->args[3];
		break;
	case OP_FACCESSAT2:
		/* faccessat2(dfd, path, mode, flags): mode and AT_* bits do not overlap */
		dirfd = hp->args[0];
		p1 = hp->args[1];
		flags = hp->args[2] | hp->args[3];
		break;
	case OP_READLINKAT:
		dirfd = hp->args[0];
		p1 = hp->args[1];
		break;
	case OP_RENAME:
		p1 = hp->args[0];
		p2 = hp->args[1];
		break;
	case OP_RENAMEAT:
	case OP_RENAMEAT2:
		/* renameat2(olddfd, old, newdfd, new, flags) */
		dirfd = hp->args[0];
		p1 = hp->args[1];
		dirfd2 = hp->args[2];
		p2 = hp->args[3];
		if (op == OP_RENAMEAT2)
			flags = hp->args[4];
		break;
	default:
		/* statx, faccessat, unlinkat, mkdirat: (dfd, path, flags or mode) */
		dirfd = hp->args[0];
		p1 = hp->args[1];
		flags = hp->args[2];
	}
	if (op != OP_GETDENTS64)
		len = meta_path(e, 0, p1, &trunc);
	if ((op == OP_NEWFSTATAT || op == OP_STATX) && (flags & AT_EMPTY_PATH) && len == 0)
		return 0;
	e->base = op == OP_GETDENTS64 ? file_key(fd_file(dirfd), id, NULL) : meta_base(e, 0, len, dirfd, id);
	e->base2 = 0;
	if (p2) {
		len2 = meta_path(e, len, p2, &trunc);
		e->base2 = meta_base(e, len, len2, dirfd2, id);
	}
	if (trunc & TR_UNREADABLE)
		count_lost(LOST_STR);
	fill_hdr(&e->h, EV_META, op, id, v->ts);
	e->h.stack = hp->stack;
	e->dur = now - v->ts;
	e->ret = ret;
	e->flags = flags;
	e->dirfd = dirfd;
	e->dirfd2 = dirfd2;
	e->nblk = v->nblk;
	e->path_len = len;
	e->path2_len = len2;
	e->trunc = trunc;
	if (rb_output(e, offsetof(struct ev_meta, path) + (len & (PATHBUF - 1)) + (len2 & (PATHBUF - 1)),
		      wake_flags()))
		count_lost(LOST_RING);
	return 0;
}
