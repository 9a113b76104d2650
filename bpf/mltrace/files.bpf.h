/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after summary.bpf.h). Files: the struct file behind
 * an fd (probe reads, or plain loads through BTF pointers), its inode,
 * position, mode and device; the walk of a file's absolute path, the --path
 * filter, and the EV_FILE record that names a file identity the first time
 * it is seen (file_key, cwd_key): used by every handler that records a file.
 */

EV_KIND(EV_FILE, 64);  /* none: a file's name, joined to its records in user space */

/* The pointer-sized field at `ptr + off`, as a number: a plain load where
 * the kernel can cast (6.2+; see fd_file_fast), else a probe read. A path
 * walk does three of these per directory. */
static __always_inline u64 load_word(const void *ptr, u64 off)
{
	u64 v = 0;

	if (bpf_ksym_exists(bpf_rdonly_cast))
		return bpf_core_cast((void *)ptr + off, struct rb_node)->__rb_parent_color;
	bpf_probe_read_kernel(&v, sizeof(v), (void *)ptr + off);
	return v;
}

/* The file behind `fd` in the current task: plain loads where the kernel
 * can cast (a few probe reads less per open, close and mmap). */
static __always_inline struct file *fd_file(s64 fd)
{
	u64 task = bpf_get_current_task();
	u64 files = load_word((void *)task, bpf_core_field_offset(struct task_struct, files));
	u64 fdt = load_word((void *)files, bpf_core_field_offset(struct files_struct, fdt));
	u32 max = load_word((void *)fdt, bpf_core_field_offset(struct fdtable, max_fds));
	u64 fds;

	if (fd < 0 || fd >= max)
		return NULL;
	fds = load_word((void *)fdt, bpf_core_field_offset(struct fdtable, fd));
	return (void *)load_word((void *)fds, fd * sizeof(void *));
}

/* The same through BTF pointers: plain loads instead of helper calls
 * (tp_btf programs only). */
static __always_inline struct file *fd_file_fast(struct task_struct *t, s64 fd)
{
	struct fdtable *fdt = t->files->fdt;
	struct file *f = NULL;
	u64 slot;

	if (fd < 0 || fd >= fdt->max_fds)
		return NULL;
	slot = (u64)&fdt->fd[fd];
	if (bpf_ksym_exists(bpf_rdonly_cast))
		/* A plain load, not a helper call (~50 ns less per event). Cast
		 * because the verifier refuses a variable index into fdt->fd, and
		 * to a struct whose first member is a number: loaded as a
		 * pointer, the file could not serve as a key or an argument. */
		return (void *)bpf_core_cast((void *)slot, struct rb_node)->__rb_parent_color;
	bpf_probe_read_kernel(&f, sizeof(f), (void *)slot);
	return f;
}

/* A struct file's inode number: plain loads where the kernel can cast
 * (6.2+). The number, not the inode pointer: a loaded pointer stays a
 * pointer to the verifier, and these values go into maps and calls. */
static __always_inline u64 file_ino(struct file *f, bool fast)
{
	if (fast && bpf_ksym_exists(bpf_rdonly_cast))
		return bpf_core_cast(f, struct file)->f_inode->i_ino;
	return BPF_CORE_READ(f, f_inode, i_ino);
}

/* What files_seen and a thread's last files keep of a file's inode: its
 * number with its device mixed in. The number alone does not tell files
 * apart: a fresh filesystem's numbers and pipefs' or procfs' are all
 * small, and a pipe once took the name of a data file that had had its
 * struct file and its number (6.12 under QEMU, a scratch ext4). */
static __always_inline u64 inode_ident(u64 ino, u32 dev)
{
	return ino ^ ((u64)dev * 0x9e3779b97f4a7c15ULL);
}

static __always_inline u64 file_ident(struct file *f, bool fast)
{
	if (fast && bpf_ksym_exists(bpf_rdonly_cast)) {
		struct inode *i = bpf_core_cast(f, struct file)->f_inode;

		return inode_ident(i->i_ino, i->i_sb->s_dev);
	}
	return inode_ident(BPF_CORE_READ(f, f_inode, i_ino), BPF_CORE_READ(f, f_inode, i_sb, s_dev));
}

static __always_inline u64 file_pos(struct file *f, bool fast)
{
	if (fast && bpf_ksym_exists(bpf_rdonly_cast))
		return bpf_core_cast(f, struct file)->f_pos;
	return BPF_CORE_READ(f, f_pos);
}

#define S_IFMT 0170000
#define S_IFREG 0100000

/* Its inode's mode (type and permissions). */
static __always_inline u16 file_mode(struct file *f, bool fast)
{
	if (fast && bpf_ksym_exists(bpf_rdonly_cast))
		return bpf_core_cast(f, struct file)->f_inode->i_mode;
	return BPF_CORE_READ(f, f_inode, i_mode);
}

/* Its device (the kernel's dev_t of the inode's super block). */
static __always_inline u32 file_dev(struct file *f, bool fast)
{
	if (fast && bpf_ksym_exists(bpf_rdonly_cast))
		return bpf_core_cast(f, struct file)->f_inode->i_sb->s_dev;
	return BPF_CORE_READ(f, f_inode, i_sb, s_dev);
}

#define FD_FILE(fd) (fast ? fd_file_fast(bpf_get_current_task_btf(), fd) : fd_file(fd))

/*
 * Writes the absolute path of (dentry, vfsmnt) backwards into hp->walk,
 * ending at PATHBUF, crossing mount points up to the namespace root; leaves
 * the start offset in hp->off and flags in hp->flags. A dentry that is its
 * own parent but not a mount root (pipes, sockets, memfds: no place in any
 * tree) yields its bare name with F_DISCONNECTED.
 *
 * The loop keeps its state in the map value, not in registers: the verifier
 * then sees the same state at every iteration and prunes, instead of
 * exploring every combination of branches.
 */
static __always_inline void walk_path(struct dentry *dentry, struct vfsmount *vfsmnt, struct heap *hp)
{
	struct mount *mnt = (void *)vfsmnt - bpf_core_field_offset(struct mount, mnt);
	struct dentry *root = BPF_CORE_READ(vfsmnt, mnt_root);
	int i;

	hp->off = PATHBUF;
	for (i = 0; i < MAX_DEPTH; i++) {
		struct dentry *parent = (void *)load_word(dentry, bpf_core_field_offset(struct dentry, d_parent));
		struct qstr q;
		u32 len, off;

		if (dentry == root) {
			struct mount *mp = BPF_CORE_READ(mnt, mnt_parent);

			if (mp == mnt)
				break;
			dentry = BPF_CORE_READ(mnt, mnt_mountpoint);
			mnt = mp;
			vfsmnt = (void *)mp + bpf_core_field_offset(struct mount, mnt);
			root = BPF_CORE_READ(vfsmnt, mnt_root);
			continue;
		}
		/* d_name: hash_len (length in the high half) and name. */
		q.len = load_word(dentry, bpf_core_field_offset(struct dentry, d_name.hash_len)) >> 32;
		q.name = (void *)load_word(dentry, bpf_core_field_offset(struct dentry, d_name.name));
		len = q.len & 255;
		off = hp->off;
		if (dentry == parent) {
			/* Not in any tree: keep only the name, if nothing came before. */
			if (off == PATHBUF && len + 1 < off) {
				off -= len;
				bpf_probe_read_kernel(&hp->walk[off & (PATHBUF - 1)], len, q.name);
				hp->off = off;
				hp->flags |= F_DISCONNECTED;
			}
			break;
		}
		if (len + 2 > off) {
			hp->flags |= TR_ABS;
			break;
		}
		off -= len + 1;
		hp->walk[off & (PATHBUF - 1)] = '/';
		/* 6.12's verifier loses len's bound through the compiler's
		 * arithmetic above: bound it again where it is used. */
		BOUND(len, 255);
		bpf_probe_read_kernel(&hp->walk[(off + 1) & (PATHBUF - 1)], len, q.name);
		hp->off = off;
		dentry = parent;
	}
	if (i == MAX_DEPTH)
		hp->flags |= TR_ABS;
	if (hp->off == PATHBUF) {
		hp->off = PATHBUF - 1;
		hp->walk[PATHBUF - 1] = '/';
	}
}

/* --path: whether the path just walked (hp->walk[off..off+len]) is under
 * the prefix, whole components; remembers the files that are not. */
static __always_inline void judge_path(u64 key, struct heap *hp, u32 off, u32 len)
{
	u32 n = want_path_len;
	bool under = !(hp->flags & F_DISCONNECTED) && len >= n;
	u8 one = 1;
	int i;

	for (i = 0; i < WANT_PATH && under; i++) {
		if (i >= n)
			break;
		if (hp->walk[(off + i) & (2 * PATHBUF - 1)] != want_path[i])
			under = false;
	}
	if (under && len > n && hp->walk[(off + n) & (2 * PATHBUF - 1)] != '/')
		under = false;
	if (under)
		bpf_map_delete_elem(&path_excluded, &key);
	else
		bpf_map_update_elem(&path_excluded, &key, &one, BPF_ANY);
}

/*
 * Sends an EV_FILE naming `key`. Returns 0 when it reached the ring.
 * A global function, so the verifier checks it once, not at every caller;
 * kernel pointers therefore travel as plain integers.
 */
__noinline int emit_path(u64 key, u64 path_ptr, u64 inode_ptr, u64 flags, u64 id)
{
	struct path *p = (void *)path_ptr;
	struct inode *inode = (void *)inode_ptr;
	struct heap *hp = bpf_map_lookup_elem(&heap, (const void *)&key_zero);
	struct ev_file *e;
	u32 off, len;

	if (!hp)
		return -1;
	e = &hp->file;
	fill_hdr(&e->h, EV_FILE, 0, id, bpf_ktime_get_boot_ns());
	e->key = key;
	e->ino = BPF_CORE_READ(inode, i_ino);
	e->mode = BPF_CORE_READ(inode, i_mode);
	e->rdev = BPF_CORE_READ(inode, i_rdev);
	e->magic = BPF_CORE_READ(inode, i_sb, s_magic);
	e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	hp->flags = flags;
	walk_path(BPF_CORE_READ(p, dentry), BPF_CORE_READ(p, mnt), hp);
	off = hp->off;
	if (off > PATHBUF - 1)
		off = PATHBUF - 1;
	len = PATHBUF - off;
	bpf_probe_read_kernel(e->path, len & (PATHBUF - 1), &hp->walk[off & (PATHBUF - 1)]);
	e->path_len = len;
	e->flags = hp->flags;
	if (want_path_on)
		judge_path(key, hp, off, len);
	if (rb_output(e, offsetof(struct ev_file, path) + (len & (PATHBUF - 1)), 0)) {
		count_lost(LOST_RING);
		return -1;
	}
	return 0;
}

/*
 * Names the file an open returned inside the open's own record (heap's
 * `open`): what an ev_file says, with the resolved path after the passed
 * one (`len` bytes). Returns the resolved path's length, 0 if not named.
 * Global, like emit_path, so the verifier checks the walk once.
 */
__noinline int name_in_open(u64 file_ptr, u32 len, u32 passed_names_it)
{
	struct file *f = (void *)file_ptr;
	struct inode *inode;
	u64 sb;
	/* The key off the stack (key_zero): this frame is the third of the
	 * deepest chain (fast_sys_exit, on_open, this), which 6.1's verifier
	 * holds to 512 bytes counted in 32-byte steps. */
	struct heap *hp = bpf_map_lookup_elem(&heap, (const void *)&key_zero);
	struct ev_open *e;
	u32 off, alen;

	if (!hp || !f)
		return 0;
	e = &hp->open;
	/* Plain loads where the kernel can cast: this runs at every open. */
	inode = (void *)load_word(f, bpf_core_field_offset(struct file, f_inode));
	sb = load_word(inode, bpf_core_field_offset(struct inode, i_sb));
	e->ino = load_word(inode, bpf_core_field_offset(struct inode, i_ino));
	e->fmode = (u16)load_word(inode, bpf_core_field_offset(struct inode, i_mode));
	e->rdev = (u32)load_word(inode, bpf_core_field_offset(struct inode, i_rdev));
	e->magic = load_word((void *)sb, bpf_core_field_offset(struct super_block, s_magic));
	e->dev = (u32)load_word((void *)sb, bpf_core_field_offset(struct super_block, s_dev));
	if (passed_names_it) {
		e->abs_len = 0;
		e->fflags = F_PASSED;
		return 1;
	}
	hp->flags = 0;
	walk_path((void *)load_word(f, bpf_core_field_offset(struct file, f_path.dentry)),
		  (void *)load_word(f, bpf_core_field_offset(struct file, f_path.mnt)), hp);
	off = hp->off;
	if (off > PATHBUF - 1)
		off = PATHBUF - 1;
	alen = PATHBUF - off;
	bpf_probe_read_kernel(&e->path[len & (PATHBUF - 1)], alen & (PATHBUF - 1), &hp->walk[off & (PATHBUF - 1)]);
	e->abs_len = alen;
	e->fflags = hp->flags;
	if (want_path_on)
		judge_path(file_ptr, hp, off, alen);
	return alen != 0;
}

/* Whether an open's passed path can name its file without a walk: an
 * absolute path, read whole, outside /proc and /dev (their magic links
 * name other files). User space normalises it lexically. */
static __always_inline u32 passed_names_it(const char *p, u32 len)
{
	if (len == 0 || len >= PATHBUF - 1 || p[0] != '/')
		return 0;
	if (len >= 5 && p[1] == 'p' && p[2] == 'r' && p[3] == 'o' && p[4] == 'c' && (len == 5 || p[5] == '/'))
		return 0;
	if (len >= 4 && p[1] == 'd' && p[2] == 'e' && p[3] == 'v' && (len == 4 || p[4] == '/'))
		return 0;
	return 1;
}

/* The thread's two last files (see struct inflight). */
static __always_inline void remember_file(struct inflight *st, u64 key, u64 ident, u64 epoch)
{
	if (st->last_epoch == epoch) {
		st->prev_file = st->last_file;
		st->prev_ident = st->last_ident;
	} else {
		st->prev_file = 0;
	}
	st->last_file = key;
	st->last_ident = ident;
	st->last_epoch = epoch;
}

/*
 * The identity of `f`, naming it first if user space has not seen it.
 * `st` (the thread's state, when it outlives the call) remembers the last
 * file, so a loop on one file costs no map lookup.
 */
static __always_inline u64 file_key(struct file *f, u64 id, struct inflight *st)
{
	u64 key = (u64)f;
	u64 ident, epoch = 0;
	u64 *seen;

	if (!f)
		return 0;
	/* Only the fast route keeps `st`: it may also cast. */
	ident = file_ident(f, st != NULL);
	if (st) {
		u64 *e = bpf_map_lookup_elem(&files_epoch, (const void *)&key_zero);
		if (e)
			epoch = *e;
		if (st->last_epoch == epoch) {
			if (st->last_file == key && st->last_ident == ident)
				return key;
			if (st->prev_file == key && st->prev_ident == ident) {
				st->prev_file = st->last_file;
				st->prev_ident = st->last_ident;
				st->last_file = key;
				st->last_ident = ident;
				return key;
			}
		}
	}
	seen = bpf_map_lookup_elem(&files_seen, &key);
	if (!(seen && *seen == ident)) {
		if (emit_path(key, (u64)__builtin_preserve_access_index(&f->f_path), (u64)BPF_CORE_READ(f, f_inode), 0, id))
			return key;
		bpf_map_update_elem(&files_seen, &key, &ident, BPF_ANY);
	}
	if (st)
		remember_file(st, key, ident, epoch);
	return key;
}

/* The identity of the current working directory (tagged so it never equals a file's). */
static __always_inline u64 cwd_key(u64 id)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	struct dentry *d = BPF_CORE_READ(fs, pwd.dentry);
	u64 key = (u64)d | 1;
	u64 ident = inode_ident(BPF_CORE_READ(d, d_inode, i_ino), BPF_CORE_READ(d, d_inode, i_sb, s_dev));
	u64 *seen = bpf_map_lookup_elem(&files_seen, &key);

	if (seen && *seen == ident)
		return key;
	if (emit_path(key, (u64)__builtin_preserve_access_index(&fs->pwd), (u64)BPF_CORE_READ(d, d_inode), F_BASE, id) == 0)
		bpf_map_update_elem(&files_seen, &key, &ident, BPF_ANY);
	return key;
}
