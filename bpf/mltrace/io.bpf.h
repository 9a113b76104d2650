/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after files.bpf.h). The file I/O calls' handlers,
 * run at syscall entry (enter) and exit (on_io, on_close, on_xfer, on_open,
 * called from leave in syscalls.bpf.h): reads, writes, syncs, closes,
 * sendfile and copy_file_range, and opens.
 */

EV_KIND(EV_IO, 6);  /* mltrace_log::Io */
EV_KIND(EV_OPEN, 5);  /* mltrace_log::Open */
EV_KIND(EV_CLOSE, 7);  /* mltrace_log::Close */
EV_KIND(EV_XFER, 8);  /* mltrace_log::Transfer */

static __always_inline u64 iov_sum(const struct iovec *iov, u64 cnt, u16 *flags)
{
	u64 sum = 0;

	if (cnt > MAX_IOV) {
		*flags |= IOF_REQ_PARTIAL;
		cnt = MAX_IOV;
	}
	for (int i = 0; i < MAX_IOV; i++) {
		struct iovec v;

		if (i >= cnt)
			break;
		if (bpf_probe_read_user(&v, sizeof(v), &iov[i])) {
			*flags |= IOF_REQ_PARTIAL;
			break;
		}
		sum += v.iov_len;
	}
	return sum;
}

/* Syscall entry for a traced thread: note the time (and for close, the file). */
static __always_inline void enter(struct inflight *v, u8 op, struct pt_regs *regs, u64 id, bool fast)
{
	v->ts = bpf_ktime_get_boot_ns();
	v->op = op;
	v->nblk = 0;
	if (op == OP_CLOSE)
		/* The fd is gone at exit: identify its file now. */
		v->file = file_key(FD_FILE((int)ARG(1)), id, fast ? v : NULL);
}

static __always_inline void on_io(struct inflight *v, struct inflight *st, struct task_struct *t,
				  struct pt_regs *regs, s64 ret, u64 now, u64 id, bool fast)
{
	int fd = ARG(1);
	struct file *f = fast ? fd_file_fast(t, fd) : fd_file(fd);
	u64 key = file_key(f, id, st);
	struct ev_io *e;
	u16 flags = 0;
	u64 pos;

	/* --path: the bulk of the events, dropped before the ring. */
	if (want_path_on && bpf_map_lookup_elem(&path_excluded, &key))
		return;
	if (summary) {
		u64 ino = 0, dev_op = SUM_DEV_OP(0, now, v->op), sum_file = key;

		if (f) {
			ino = file_ino(f, fast);
			dev_op |= (u64)file_dev(f, fast) << 32;
			/* A regular file is its inode: every open of it, one sum. */
			if ((file_mode(f, fast) & S_IFMT) == S_IFREG)
				sum_file = 0;
		}
		if (SUM_CALL(v, now, sum_file, ino, dev_op, ret, now - v->ts)) {
			if (ret >= 0 && now - v->ts < summary_slow_ns)
				return;
			flags |= IOF_SUMMED;
		}
	}
	u32 stk = py_stack(id);

	e = rec_room(sizeof(*e), id);
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	switch (v->op) {
	case OP_READ:
	case OP_WRITE:
	case OP_PREAD64:
	case OP_PWRITE64:
		e->requested = ARG(3);
		break;
	case OP_FSYNC:
	case OP_FDATASYNC:
		e->requested = 0;
		flags |= IOF_NO_OFFSET;
		break;
	case OP_SYNC_FILE_RANGE:
		/* sync_file_range(fd, offset, nbytes, flags) */
		e->requested = ARG(3);
		break;
	default:
		e->requested = iov_sum((const struct iovec *)ARG(2), ARG(3), &flags);
	}
	pos = -1;
	switch (v->op) {
	case OP_FSYNC:
	case OP_FDATASYNC:
		pos = 0;
		break;
	case OP_SYNC_FILE_RANGE:
		pos = ARG(2);
		break;
	case OP_PREAD64:
	case OP_PWRITE64:
	case OP_PREADV:
	case OP_PWRITEV:
	case OP_PREADV2:
	case OP_PWRITEV2:
		pos = ARG(4);
	}
	if (pos == (u64)-1) {
		/* read/write and the v2 calls with offset -1 use and advance f_pos. */
		flags |= IOF_FILEPOS;
		pos = f ? file_pos(f, fast) : 0;
		if (ret > 0)
			pos -= ret;
	}
	fill_hdr(&e->h, EV_IO, v->op, id, v->ts);
	e->h.stack = stk;
	e->h.flags = flags;
	e->dur = now - v->ts;
	e->file = key;
	e->offset = pos;
	e->ret = ret;
	e->fd = fd;
	e->nblk = v->nblk;
	if (rec_done(e, sizeof(*e), now, id))
		count_lost(LOST_RING);
}

static __always_inline void on_close(struct inflight *v, struct pt_regs *regs, s64 ret, u64 now, u64 id, bool fast)
{
	struct ev_close *e;
	u16 flags = 0;

	/* Summed without its file: the file is gone, and its struct file
	 * is the next open's. */
	if (summary && SUM_CALL(v, now, 0, 0, SUM_DEV_OP(0, now, v->op), ret, now - v->ts)) {
		if (ret >= 0 && now - v->ts < summary_slow_ns)
			return;
		flags = IOF_SUMMED;
	}
	u32 stk = py_stack(id);

	e = rec_room(sizeof(*e), id);
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_CLOSE, v->op, id, v->ts);
	e->h.stack = stk;
	e->h.flags = flags;
	e->dur = now - v->ts;
	e->file = v->file;
	e->ret = ret;
	e->fd = ARG(1);
	e->_pad = 0;
	if (rec_done(e, sizeof(*e), now, id))
		count_lost(LOST_RING);
}

static __noinline int on_xfer(struct inflight *v, s64 ret, u64 now, u64 id)
{
	struct heap *hp = bpf_map_lookup_elem(&heap, (const void *)&key_zero);
	int in_fd, out_fd;
	u64 req;
	struct ev_xfer *e;

	if (!hp)
		return 0;
	if (v->op == OP_SENDFILE) {
		/* sendfile(out_fd, in_fd, *offset, count) */
		out_fd = hp->args[0];
		in_fd = hp->args[1];
		req = hp->args[3];
	} else {
		/* copy_file_range(fd_in, *off_in, fd_out, *off_out, len, flags) */
		in_fd = hp->args[0];
		out_fd = hp->args[2];
		req = hp->args[4];
	}
	u64 in_key = file_key(fd_file(in_fd), id, NULL);
	u64 out_key = file_key(fd_file(out_fd), id, NULL);

	u32 stk = hp->stack;
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_XFER, v->op, id, v->ts);
	e->h.stack = stk;
	e->dur = now - v->ts;
	e->in_file = in_key;
	e->out_file = out_key;
	e->requested = req;
	e->ret = ret;
	e->in_fd = in_fd;
	e->out_fd = out_fd;
	e->nblk = v->nblk;
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}

/* An open's record (built in the heap): into the batch when it fits. */
static __always_inline long open_out(struct ev_open *e, u32 size, u64 now, u64 id)
{
	struct batch *b = cpu_batch();
	void *at;

	if (b && size < BATCHED_MAX) {
		at = batch_room(b, size, THREAD_TAG(id));
		if (at) {
			long err = bpf_probe_read_kernel(at, size & (BATCHED_MAX - 1), e);

			if (!err)
				batch_add(b, size, now);
			else
				WRITE_ONCE(b->busy, 0);
			return err;
		}
	}
	return rb_output(e, size, wake_flags());
}

static __noinline int on_open(struct inflight *v, s64 ret, u64 now, u64 id)
{
	struct heap *hp = bpf_map_lookup_elem(&heap, (const void *)&key_zero);
	struct ev_open *e;
	const char *upath;
	int dirfd = AT_FDCWD;
	u64 flags = 0;
	u32 mode = 0, len = 0, alen = 0;
	long n;
	u8 trunc = 0;
	u8 op = v->op;
	u64 start = v->ts;

	if (!hp)
		return 0;
	e = &hp->open;
	switch (op) {
	case OP_OPEN:
		upath = (const char *)hp->args[0];
		flags = hp->args[1];
		mode = hp->args[2];
		break;
	case OP_OPENAT2: {
		struct open_how how = {};

		dirfd = hp->args[0];
		upath = (const char *)hp->args[1];
		bpf_probe_read_user(&how, sizeof(how), (void *)hp->args[2]);
		flags = how.flags;
		mode = how.mode;
		break;
	}
	case OP_CREAT:
		upath = (const char *)hp->args[0];
		mode = hp->args[1];
		flags = 01 | 0100 | 01000; /* O_WRONLY|O_CREAT|O_TRUNC */
		break;
	default:
		dirfd = hp->args[0];
		upath = (const char *)hp->args[1];
		flags = hp->args[2];
		mode = hp->args[3];
	}
	n = bpf_probe_read_user_str(e->path, PATHBUF, upath);
	if (n <= 0) {
		trunc |= TR_UNREADABLE;
		count_lost(LOST_STR);
	} else {
		len = n - 1;
	}
	e->file = 0;
	e->base = 0;
	e->named = 0;
	if (ret >= 0) {
		/* Named here, unless a file closed before left this identity
		 * (a slot reused for the same inode: a file reopened in a loop). */
		struct file *f = fd_file(ret);
		u64 key = (u64)f;
		u64 ident = 0, *seen, *epoch = bpf_map_lookup_elem(&files_epoch, (const void *)&key_zero);

		e->file = key;
		if (f) {
			u64 inode = load_word(f, bpf_core_field_offset(struct file, f_inode));
			u64 sb = load_word((void *)inode, bpf_core_field_offset(struct inode, i_sb));

			ident = inode_ident(load_word((void *)inode, bpf_core_field_offset(struct inode, i_ino)),
					    (u32)load_word((void *)sb, bpf_core_field_offset(struct super_block, s_dev)));
		}
		/* The thread's last file (fast route), else files_seen. */
		if (f && epoch && v->last_epoch == *epoch &&
		    ((v->last_file == key && v->last_ident == ident) || (v->prev_file == key && v->prev_ident == ident)))
			seen = &ident;
		else
			seen = bpf_map_lookup_elem(&files_seen, &key);
		if (!(seen && f && *seen == ident)) {
			/* On the fast route the opener remembers the file in the
			 * thread, not here: an entry here is of the file this
			 * identity was before, and would let that file, opened
			 * here again, go unnamed. Forgotten (0 matches none). */
			if (seen)
				*seen = 0;
			/* --path judges the kernel's own path: walk then. */
			e->named = name_in_open(key, len, !want_path_on && passed_names_it(e->path, len));
			alen = e->named ? e->abs_len : 0;
		}
	} else if (len == 0 || e->path[0] != '/') {
		/* Failed relative open: name the directory it was relative to. */
		e->base = dirfd == AT_FDCWD ? cwd_key(id) : file_key(fd_file(dirfd), id, NULL);
	}
	fill_hdr(&e->h, EV_OPEN, op, id, start);
	e->h.stack = hp->stack;
	e->dur = now - start;
	e->ret = ret;
	e->flags = flags;
	e->mode = mode;
	e->dirfd = dirfd;
	e->path_len = len;
	e->trunc = trunc;
	e->nblk = v->nblk;
	if (open_out(e, offsetof(struct ev_open, path) + (len & (PATHBUF - 1)) + (alen & (PATHBUF - 1)), now, id)) {
		count_lost(LOST_RING);
		return 0;
	}
	return e->named;
}
