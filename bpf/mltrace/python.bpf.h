/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after common.bpf.h; every call handler uses it).
 * The Python stack of a recorded call: py_stack() walks the calling
 * thread's CPython frames where the call is recorded, and returns the id
 * of that stack in its process, sending the stack (ev_pystack) and each
 * code object in it (ev_pycode) the first time the process shows them.
 *
 * How a process's interpreter is read comes from user space (py_layout,
 * filled per process when an ev_pyprobe asks): a process that is not
 * Python costs one lookup per recorded call. The frame chain does not
 * change while a call runs, so one walk at the call's end is the stack
 * the call was made from, GIL released or not.
 */

EV_KIND(EV_PYPROBE, 66);  /* none: asks user space for an interpreter */
EV_KIND(EV_PYCODE, 67);  /* none: a code object, for the frames */
EV_KIND(EV_PYSTACK, 33);  /* mltrace_log::PyFrame */

/* record --py-stacks on: the stacks are walked. Interpreters are read
 * either way (a wait for the GIL is told from a wait for data, sched.bpf.h). */
const volatile bool py_stacks_on = false;

/* Ask again this long after user space was asked and did not decide (a
 * python executable whose libpython is not mapped yet). */
#define PY_REASK_NS (5 * 1000 * 1000ULL)
/* The thread states looked through for the calling thread's. */
#define PY_THREADS 64

/* tgid -> how to read its interpreter. Copied to a forked child. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct py_layout);
} py_procs SEC(".maps");

/* With stacks off, each CPU's last process found decided (not Python, or
 * read): its next calls skip py_procs' lookup, as long as no process's
 * entry has been forgotten since (py_forgets: exec and exit are the only
 * ways a decided process becomes undecided). */
struct py_quick {
	u32 tgid;
	u32 forgets;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct py_quick);
} py_quick SEC(".maps");

u32 py_forgets = 0;

/* Interpreter files user space has read (see struct py_bin). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct py_bin_key);
	__type(value, struct py_bin);
} py_bins SEC(".maps");

/* tid -> its PyThreadState, checked against the thread at each use. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u64);
} py_threads SEC(".maps");

struct py_key {
	u32 tgid;
	u32 gen;  /* py_layout.gen: a program exec'd in the same process is another */
	u64 val;  /* a stack's hash, or a code object's address */
};

/* (tgid, stack hash) -> the stack's id. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_key);
	__type(value, u32);
} py_stacks SEC(".maps");

/* (tgid, code object) -> its line table object when sent (py_frame.ident). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_key);
	__type(value, u64);
} py_codes SEC(".maps");

/* Per-CPU scratch: the stack and code records, and the keys (the
 * programs calling py_stack leave it little of the 512-byte stack). */
struct py_heap {
	struct ev_pystack st;
	struct ev_pycode code;
	struct py_key key;
	struct py_key ck;
	struct py_layout fresh;
	u8 frame[PY_FRAME_READ];  /* the frame being read */
	/* This CPU's last thread and last stack: a thread making calls in a
	 * loop finds them here, without the hash maps' lookups. */
	u64 last_ts;
	u32 last_tid;
	u32 last_id;
	struct py_key last_key;
	u32 next;  /* this CPU's stacks so far: ids are (next << 10) | cpu */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct py_heap);
} py_heap SEC(".maps");

static __always_inline u64 py_ptr(u64 addr)
{
	u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (void *)addr);
	return v;
}

/* user space has not decided on this process yet: ask, at most every PY_REASK_NS */
static __always_inline void py_ask(struct py_heap *hp, struct py_layout *l, u32 tgid, u64 id)
{
	u64 now = bpf_ktime_get_boot_ns();
	struct ev_pyprobe *e;

	if (!l) {
		__builtin_memset(&hp->fresh, 0, sizeof(hp->fresh));
		hp->fresh.state = PY_PENDING;
		hp->fresh.asked = now;
		hp->fresh.gen = bpf_get_prandom_u32();
		if (bpf_map_update_elem(&py_procs, &tgid, &hp->fresh, BPF_NOEXIST))
			return;
	} else {
		if (now - l->asked < PY_REASK_NS)
			return;
		l->asked = now;
	}
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_PYPROBE, PYP_ASK, id, now);
	/* The program run asked about: an answer about one before an exec is stale. */
	e->h.stack = l ? l->gen : hp->fresh.gen;
	e->ino = 0;
	e->dev = 0;
	/* User space answers at once: until then the process's calls have no stack. */
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* A str object's characters (raw, in its kind) into dst: their length in bytes. */
static __always_inline u32 py_str(struct py_layout *l, u64 obj, char *dst, u8 *kind, u8 *bits)
{
	u32 state = 0;
	u64 len = 0, data;

	if (!obj || bpf_probe_read_user(&state, sizeof(state), (void *)(obj + l->u_state)) ||
	    bpf_probe_read_user(&len, sizeof(len), (void *)(obj + l->u_length)))
		return 0;
	/* state: interned:2, kind:3, compact:1, ascii:1 (3.9 to 3.14) */
	if (!(state & (1 << 5)))
		return 0;  /* not compact: not a code object's name */
	*kind = (state >> 2) & 7;
	data = obj + ((state & (1 << 6)) ? l->u_ascii_size : l->u_compact_size);
	len *= *kind;
	if (len > PY_STR) {
		len = PY_STR;
		*bits |= PYB_QUAL_CUT;
	}
	BOUND(len, 0x1ff);
	if (len > PY_STR || bpf_probe_read_user(dst, len, (void *)data))
		return 0;
	return len;
}

/* Sends a code object's names and line table (once per process and code). */
static __always_inline void py_code_send(struct py_heap *hp, struct py_layout *l, u64 id, u64 code)
{
	struct ev_pycode *e = &hp->code;
	u64 lines, len = 0;

	fill_hdr(&e->h, EV_PYCODE, 0, id, bpf_ktime_get_boot_ns());
	e->h.stack = 0;
	e->code = code;
	e->bits = 0;
	e->name_kind = 1;
	e->file_kind = 1;
	e->first_line = 0;
	bpf_probe_read_user(&e->first_line, sizeof(e->first_line), (void *)(code + l->co_first));
	e->name_len = py_str(l, py_ptr(code + l->co_name), e->data, &e->name_kind, &e->bits);
	e->file_len = py_str(l, py_ptr(code + l->co_file), e->data + PY_STR, &e->file_kind, &e->bits);
	lines = py_ptr(code + l->co_lines);
	if (lines)
		bpf_probe_read_user(&len, sizeof(len), (void *)(lines + l->b_size));
	if (len > PY_LINES) {
		len = PY_LINES;
		e->bits |= PYB_QUAL_CUT;
	}
	BOUND(len, 0x3fff);
	if (len > PY_LINES || !lines || bpf_probe_read_user(e->data + 2 * PY_STR, len, (void *)(lines + l->b_data)))
		len = 0;
	e->lines_len = len;
	/* Sent up to the end of its line table (the names have fixed places). */
	if (rb_output(e, offsetof(struct ev_pycode, data) + 2 * PY_STR + (len & 0x3fff),
		      wake_flags()))
		count_lost(LOST_RING);
}

/* The calling thread's PyThreadState, or 0. */
static __always_inline u64 py_tstate(struct py_heap *hp, struct py_layout *l, u32 tid)
{
	u64 want = tid, ts, *cached, interp;

	if (!(l->bits & PYB_NATIVE_TID)) {
		/* 3.9, 3.10: thread_id is pthread_self(), the thread pointer */
		struct task_struct *t = (void *)bpf_get_current_task();

		if (!bpf_core_field_exists(t->thread.fsbase))
			return 0;
		want = BPF_CORE_READ(t, thread.fsbase);
	}
	if (hp->last_tid == tid && hp->last_ts && py_ptr(hp->last_ts + l->ts_tid) == want)
		return hp->last_ts;
	cached = bpf_map_lookup_elem(&py_threads, &tid);
	if (cached && py_ptr(*cached + l->ts_tid) == want) {
		hp->last_tid = tid;
		hp->last_ts = *cached;
		return *cached;
	}
	interp = py_ptr(l->runtime + l->rt_interp);
	if (!interp)
		return 0;
	ts = py_ptr(interp + l->is_threads);
	for (int i = 0; i < PY_THREADS && ts; i++) {
		if (py_ptr(ts + l->ts_tid) == want) {
			bpf_map_update_elem(&py_threads, &tid, &ts, BPF_ANY);
			hp->last_tid = tid;
			hp->last_ts = ts;
			return ts;
		}
		ts = py_ptr(ts + l->ts_next);
	}
	return 0;
}

/* Sends the code objects of the stack in py_heap that its process has
 * not shown before. */
__noinline int py_codes_new(u64 id, u32 depth)
{
	u32 zero = 0, tgid = id >> 32;
	struct py_layout *l = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_heap *hp = bpf_map_lookup_elem(&py_heap, &zero);

	if (!l || !hp)
		return 0;
	hp->ck.tgid = tgid;
	hp->ck.gen = l->gen;
	for (int i = 0; i < PY_DEPTH; i++) {
		u64 *ident;

		if (i >= depth)
			break;
		hp->ck.val = hp->st.frames[i].code;
		/* Read here, for new stacks only: the walk of every call does without it. */
		hp->st.frames[i].ident = py_ptr(hp->ck.val + l->co_lines);
		ident = bpf_map_lookup_elem(&py_codes, &hp->ck);
		if (!hp->ck.val || (ident && *ident == hp->st.frames[i].ident))
			continue;
		bpf_map_update_elem(&py_codes, &hp->ck, &hp->st.frames[i].ident, BPF_ANY);
		py_code_send(hp, l, id, hp->ck.val);
	}
	return 0;
}

/*
 * The id of the calling thread's Python stack (sent the first time its
 * process shows it), or 0: not Python, no Python frame, not readable.
 * A global function: verified once, not once per call site. The walk
 * has one branch per frame (its end): a verifier follows every path.
 */
__noinline u32 py_stack(u64 id)
{
	u32 zero = 0, tgid = id >> 32, depth = 0, *known, forgets = py_forgets;
	struct py_quick *q = py_stacks_on ? NULL : bpf_map_lookup_elem(&py_quick, &zero);
	struct py_layout *l;
	u64 ts, f, h = 0xcbf29ce484222325ULL;
	struct py_heap *hp;

	if (q && q->tgid == tgid && q->forgets == forgets)
		return 0;
	l = bpf_map_lookup_elem(&py_procs, &tgid);
	/* Not Python, or read with stacks off: no more than a lookup. */
	if (l && (l->state == PY_NO || (l->state == PY_READY && !py_stacks_on))) {
		if (q) {
			q->tgid = tgid;
			q->forgets = forgets;
		}
		return 0;
	}
	hp = bpf_map_lookup_elem(&py_heap, &zero);
	if (!hp)
		return 0;
	if (!l || l->state == PY_PENDING) {
		py_ask(hp, l, tgid, id);
		return 0;
	}
	ts = py_tstate(hp, l, (u32)id);
	if (!ts)
		return 0;
	f = py_ptr(ts + l->ts_frame);
	if (l->model == PYM_CFRAME && f)
		f = py_ptr(f + l->cf_current);
	for (int i = 0; i < PY_DEPTH; i++) {
		struct py_frame *fr = &hp->st.frames[i];
		u64 globals;

		if (!f)
			break;
		/* The frame's first PY_FRAME_READ bytes hold every field the walk
		 * reads (user space checks it): one read, not four. */
		if (!bpf_probe_read_user(hp->frame, sizeof(hp->frame), (void *)f)) {
			fr->code = *(u64 *)&hp->frame[l->f_code & (PY_FRAME_READ - 8)] & ~7ULL;
			fr->instr = *(u64 *)&hp->frame[l->f_instr & (PY_FRAME_READ - 8)];
			fr->owner = hp->frame[l->f_owner & (PY_FRAME_READ - 1)];
			globals = *(u64 *)&hp->frame[l->f_globals & (PY_FRAME_READ - 8)];
			f = *(u64 *)&hp->frame[l->f_back & (PY_FRAME_READ - 8)];
		} else {
			/* The end of a mapping: field by field. */
			fr->code = py_ptr(f + l->f_code) & ~7ULL;
			fr->instr = py_ptr(f + l->f_instr);
			fr->owner = 0;
			bpf_probe_read_user(&fr->owner, 1, (void *)(f + l->f_owner));
			globals = py_ptr(f + l->f_globals);
			f = py_ptr(f + l->f_back);
		}
		/* The frame's module (its globals, which outlive its code)
		 * tells apart two code objects made at one address after each
		 * other (two modules' bodies, run at import and freed): no read
		 * of its own. The C stack's and the interpreter's entry frames
		 * leave theirs unset. */
		if (fr->owner == 3 || fr->owner == 4)
			globals = 0;
		h = (h ^ fr->code) * 0x100000001b3ULL;
		h = (h ^ fr->instr) * 0x100000001b3ULL;
		h = (h ^ globals) * 0x100000001b3ULL;
		depth = i + 1;
	}
	if (!depth)
		return 0;
	hp->st.bits = f ? PYB_TRUNCATED : 0;
	hp->key.tgid = tgid;
	hp->key.gen = l->gen;
	hp->key.val = h ^ hp->st.bits;
	if (hp->last_id && hp->last_key.val == hp->key.val && hp->last_key.tgid == tgid && hp->last_key.gen == l->gen)
		return hp->last_id;
	known = bpf_map_lookup_elem(&py_stacks, &hp->key);
	if (known) {
		hp->last_key = hp->key;
		hp->last_id = *known;
		return *known;
	}
	/* New to this process: its code objects, then the stack. */
	py_codes_new(id, depth);
	hp->next++;
	fill_hdr(&hp->st.h, EV_PYSTACK, 0, id, bpf_ktime_get_boot_ns());
	hp->st.h.stack = (hp->next << 10) | (bpf_get_smp_processor_id() & 0x3ff);
	hp->st.depth = depth;
	if (bpf_map_update_elem(&py_stacks, &hp->key, &hp->st.h.stack, BPF_ANY))
		count_lost(LOST_MAP);
	if (depth > PY_DEPTH)
		return 0;
	if (rb_output(&hp->st, offsetof(struct ev_pystack, frames) + depth * sizeof(struct py_frame),
		      wake_flags())) {
		count_lost(LOST_RING);
		bpf_map_delete_elem(&py_stacks, &hp->key);
		return 0;
	}
	return hp->st.h.stack;
}

/*
 * A process that loads an interpreter file user space has read: its
 * layout is known from where the file is loaded (`base`: its offset 0's
 * address, or the entry point when `exec`), from now on, without asking.
 * A global function: its callers are deep in the exit program.
 */
__noinline int py_adopt(u64 id, u64 ino, u32 dev, u64 base, u32 exec)
{
	u32 zero = 0, tgid = id >> 32;
	struct py_bin_key k = { .ino = ino, .dev = dev };
	struct py_heap *hp = bpf_map_lookup_elem(&py_heap, &zero);
	struct py_bin *b = bpf_map_lookup_elem(&py_bins, &k);
	struct py_layout *l = bpf_map_lookup_elem(&py_procs, &tgid);
	struct ev_pyprobe *e;

	if (!hp || !b || (l && l->state != PY_PENDING) || (exec != 0) != (b->in_exe != 0))
		return 0;
	hp->fresh = b->layout;
	hp->fresh.runtime = base + (exec ? b->entry_delta : b->map_delta);
	hp->fresh.state = PY_READY;
	hp->fresh.gen = l ? l->gen : bpf_get_prandom_u32();
	if (bpf_map_update_elem(&py_procs, &tgid, &hp->fresh, BPF_ANY))
		return 0;
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_PYPROBE, PYP_ADOPTED, id, bpf_ktime_get_boot_ns());
	e->h.stack = hp->fresh.gen;
	e->ino = ino;
	e->dev = dev;
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}

/* An exec: a Python executable user space has read is walked from the
 * first call (its load address from the entry point the kernel put in
 * the auxiliary vector). */
static __always_inline void py_exec(struct task_struct *task, u64 id)
{
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	struct inode *ino = BPF_CORE_READ(mm, exe_file, f_inode);
	struct py_bin_key k = {};
	unsigned long *auxv;

	if (!ino)
		return;
	k.ino = BPF_CORE_READ(ino, i_ino);
	k.dev = BPF_CORE_READ(ino, i_sb, s_dev);
	if (!bpf_map_lookup_elem(&py_bins, &k))
		return;
	auxv = __builtin_preserve_access_index(&mm->saved_auxv[0]);
	for (int i = 0; i < 32; i++) {
		unsigned long kv[2] = {};

		if (bpf_probe_read_kernel(kv, sizeof(kv), auxv + 2 * i) || !kv[0])
			break;
		if (kv[0] == AT_ENTRY) {
			py_adopt(id, k.ino, k.dev, kv[1], 1);
			break;
		}
	}
}

/* A forked child runs the same interpreter at the same addresses. */
static __always_inline void py_fork(u32 ptgid, u32 ctgid)
{
	struct py_layout *l = bpf_map_lookup_elem(&py_procs, &ptgid);

	if (l && l->state != PY_PENDING)
		bpf_map_update_elem(&py_procs, &ctgid, l, BPF_ANY);
}

/* After an exec, or once the process is gone: user space decides anew. */
static __always_inline void py_forget(u32 tgid)
{
	__sync_fetch_and_add(&py_forgets, 1);
	bpf_map_delete_elem(&py_procs, &tgid);
}
