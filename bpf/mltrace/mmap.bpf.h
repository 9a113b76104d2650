/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after net.bpf.h). mmap, munmap and mremap:
 * anonymous mappings only counted per process (anon_maps, in maps.bpf.h;
 * emit_anon sends the count), the others recorded (on_map); record_map
 * decides at entry which ones to record.
 */

EV_KIND(EV_MAP, 16);  /* mltrace_log::Mapping */

static __always_inline void count_anon(u32 tgid, u64 len)
{
	struct anon_count *c = bpf_map_lookup_elem(&anon_maps, &tgid);

	if (!c) {
		struct anon_count zero = {};

		/* Another thread may have made it meanwhile: then look again. */
		bpf_map_update_elem(&anon_maps, &tgid, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&anon_maps, &tgid);
		if (!c) {
			count_lost(LOST_MAP);
			return;
		}
	}
	__sync_fetch_and_add(&c->calls, 1);
	__sync_fetch_and_add(&c->bytes, len);
}

static __noinline int on_map(struct inflight *v, s64 ret, u64 now, u64 id)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
	struct file *f = NULL;
	struct ev_map *e;
	u64 flags = 0, ino;
	s32 fd = -1;
	u32 dev;

	if (!hp)
		return 0;
	if (v->op == OP_MMAP) {
		flags = hp->args[3];
		if (flags & MAP_ANONYMOUS) {
			/* MAP_FIXED (record_map let it through): counted, and
			 * recorded, as it replaced what was there. */
			count_anon(id >> 32, hp->args[1]);
			if (ret < 0)
				return 0;
		} else {
			fd = hp->args[4];
			f = fd_file(fd);
		}
	}
	u64 key = file_key(f, id, NULL);

	u32 stk = hp->stack;
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_MAP, v->op, id, v->ts);
	e->h.stack = stk;
	e->dur = now - v->ts;
	e->file = key;
	e->ino = f ? BPF_CORE_READ(f, f_inode, i_ino) : 0;
	e->dev = f ? BPF_CORE_READ(f, f_inode, i_sb, s_dev) : 0;
	e->magic = f ? BPF_CORE_READ(f, f_inode, i_sb, s_magic) : 0;
	e->addr = hp->args[0];
	e->len = hp->args[1];
	e->new_len = v->op == OP_MREMAP ? hp->args[2] : 0;
	e->offset = v->op == OP_MMAP ? hp->args[5] : 0;
	e->prot = v->op == OP_MMAP ? hp->args[2] : 0;
	e->flags = v->op == OP_MREMAP ? hp->args[3] : flags;
	e->fd = fd;
	e->ret = ret;
	ino = e->ino;
	dev = e->dev;
	bpf_ringbuf_submit(e, wake_flags());
	/* An interpreter library mapped from its start: its process is walked from now on. */
	if (f && v->op == OP_MMAP && hp->args[5] == 0 && ret > 0)
		py_adopt(id, ino, dev, ret, 0);
	return 0;
}

/* A process's anonymous mmaps, counted since it was traced. */
static __always_inline void emit_anon(u32 tgid, u64 id)
{
	struct anon_count *c = bpf_map_lookup_elem(&anon_maps, &tgid);
	struct ev_map *e;

	if (!c)
		return;
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	fill_hdr(&e->h, EV_MAP, OP_MMAP, id, bpf_ktime_get_boot_ns());
	e->h.flags = MAPF_ANON_SUMMARY;
	e->fd = -1;
	e->ret = c->calls;
	e->len = c->bytes;
	bpf_ringbuf_submit(e, wake_flags());
	bpf_map_delete_elem(&anon_maps, &tgid);
}

struct vma_probe {
	u64 end;
	bool file;
};

static long vma_seen(struct task_struct *task, struct vm_area_struct *vma, struct vma_probe *p)
{
	p->end = vma->vm_end;
	p->file = vma->vm_file != NULL;
	return 0;
}

/* Whether munmap/mremap of [addr, addr + len) may touch a file mapping:
 * only one anonymous mapping covering it all says no (those are many, and
 * not I/O). Without bpf_find_vma (before 5.17), or when the mm is busy,
 * every call is recorded. */
static __always_inline bool may_touch_file(u64 addr, u64 len)
{
	struct vma_probe p = {};

	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma))
		return true;
	if (bpf_find_vma(bpf_get_current_task_btf(), addr, vma_seen, &p, 0))
		return true;
	return p.file || p.end < addr + len;
}

/* Whether to record a mapping call, decided at its entry: an mmap of
 * anonymous memory is only counted (unless MAP_FIXED: it replaces what was
 * there), and munmap/mremap of anonymous memory are skipped where the
 * kernel can tell (the fast route). */
static __always_inline bool record_map(u8 op, struct pt_regs *regs, bool fast)
{
	if (op == OP_MMAP) {
		u64 flags = ARG(4);

		if ((flags & MAP_ANONYMOUS) && !(flags & MAP_FIXED)) {
			count_anon(bpf_get_current_pid_tgid() >> 32, ARG(2));
			return false;
		}
		return true;
	}
	return !fast || may_touch_file(ARG(1), ARG(2));
}
