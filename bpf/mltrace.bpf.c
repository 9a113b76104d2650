// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * mltrace's syscall and process capture.
 *
 * - Processes: a task is traced when its tgid is in `traced`. User space adds
 *   the command it starts (before exec); sched_process_fork adds every child
 *   of a traced process, so descendants are followed from their first
 *   syscall, in the kernel, without polling /proc.
 * - Syscalls: an entry and an exit program, dispatched by a per-syscall-
 *   number table (`sys_op`) that user space fills from its own arch's
 *   numbers. Enter stores the start time per thread; exit builds the
 *   record, reading the arguments back from the saved user registers.
 *   Three routes: per-call (attached to each recorded call's own
 *   tracepoints: other calls run nothing), fast (tp_btf on every call),
 *   compat (raw_tp on every call, state in hash maps; before 5.11).
 * - Files: hot records carry only a file identity (the struct file address).
 *   The first time an identity is seen (or its inode changed, i.e. the
 *   address was reused), an EV_FILE record names it with the kernel's own
 *   absolute path, so inherited fds, dup'd fds and fds passed over sockets
 *   all get their path without user space tracking fd tables. User space
 *   keeps a bounded table of names: what it forgets it deletes from
 *   files_seen (and bumps files_epoch), so it is named again if used again.
 * - Mappings: mmap, munmap and mremap go through the same syscall programs;
 *   anonymous memory is only counted (anon_maps). Major faults come from a
 *   perf_event program on perf's PAGE_FAULTS_MAJ (see major_fault).
 * - Nothing is dropped silently: every failure to record bumps a per-CPU
 *   counter in `lost`, which user space reads and logs with timestamps.
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AT_FDCWD -100
#define MAX_DEPTH 64
#define MAX_IOV 64
#define MAP_FIXED 0x10
#define MAP_ANONYMOUS 0x20

/* Set by user space before load. */
const volatile u8 sys_op[MAX_SYSCALL_NR] = {};
/* Wake the consumer only when this much is waiting; it also polls. */
const volatile u64 wakeup_bytes = 1 << 20;

/* tgid -> TRACED_LIVE, or TRACED_EXITED once its last thread passed
 * sched_process_exit (user space lists only the live ones). */
#define TRACED_LIVE 1
#define TRACED_EXITED 2

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, u32);
} traced SEC(".maps");

/*
 * Per-thread state. On kernels with task storage (5.11+: the "fast" route,
 * tp_btf programs) it lives with the task and is found without hashing;
 * elsewhere (the "compat" route, raw_tp programs) it is an entry of the
 * inflight hash, made at syscall entry and removed at exit.
 */
struct inflight {
	u64 ts;         /* entry time of the recorded syscall in progress */
	u64 file;       /* close: the file, identified at entry */
	u64 last_file;  /* the last file identity this thread named, and its */
	u64 last_ino;   /* inode: repeated I/O on it skips the files_seen lookup */
	u64 last_epoch; /* ... unless user space forgot files since (files_epoch) */
	u64 prev_file;  /* the one before (same epoch): a read-then-write loop */
	u64 prev_ino;   /* alternates between two files */
	u32 nblk;       /* block requests started during the call so far */
	u8 op;          /* OP_NONE outside recorded syscalls */
	u8 _pad[3];
	/* Page-cache insertions of the call in progress not yet sent: a run
	 * of consecutive pages of one file (see on_pcache); pc_pages 0: none. */
	u64 pc_ino;
	u64 pc_index;
	u64 pc_ts;
	u32 pc_dev;
	u32 pc_pages;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct inflight);
} inflight SEC(".maps");

/*
 * Attaching (record -p, record -a). A thread that existed before user space
 * added its process (or, under -a, any process passing the filters) gets its
 * state at its first recorded syscall: `adopt` turns that on, and is
 * constant, so the check costs nothing when a command is started.
 */
const volatile bool adopt = false;
/* -a: every process passing the filters below, not only `traced` ones. */
const volatile bool adopt_all = false;
/* The recorder itself, never traced. */
const volatile u32 self_tgid = 0;
/* --comm: the process's name (its leader's comm), NUL-padded; "" = any. */
const volatile char want_comm[16] = {};
/* --cgroup: only tasks in cgroup_filter[0] or below it. */
const volatile bool want_cgroup = false;
/* --path: the prefix (no trailing slash; "" for "/") and its length.
 * want_path_on false: no filter. A read or write on a file not under it is
 * dropped here; user space filters the other file events. */
#define WANT_PATH 256
const volatile char want_path[WANT_PATH] = {};
const volatile u32 want_path_len = 0;
const volatile bool want_path_on = false;

/* file identity -> 1: named, and not under --path. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, u8);
} path_excluded SEC(".maps");

/* Not root: a traced process whose user or group becomes another than the
 * recording user's (a setuid or setgid exec, setuid() and its kin) stops
 * being traced, with what it starts. (u32)-1: no such rule (root). */
const volatile u32 only_uid = (u32)-1;
const volatile u32 only_gid = (u32)-1;

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} cgroup_filter SEC(".maps");

/* record --detail summary: a thread's scheduling being summed (ev_span). */
enum span_st {
	SP_NONE = 0,   /* not seen switching or woken yet */
	SP_RUNNING,
	SP_RUNNABLE,
	SP_ASLEEP,     /* `sleep` says how, since `since` */
	SP_OTHER,      /* stopped, idle kernel waits */
	SP_GONE,       /* exited: its last span is sent */
};

struct sched_acc {
	u64 from;      /* the span's start */
	u64 since;     /* when the thread entered `st` */
	u64 cpu;
	u64 runnable;
	u64 other;
	u64 timed;     /* short timed sleeps (see ev_span) */
	s16 call;      /* asleep: the call it sleeps in */
	u8 st;         /* enum span_st */
	u8 sleep;      /* asleep: SS_SLEEPING or SS_UNINTERRUPTIBLE */
	u32 _pad;
};

/* A thread's state on the fast and per-call routes: its call in progress
 * first (state_of hands out a pointer to it), then its summary slots and
 * its scheduling sums. */
struct tstate {
	struct inflight io;
	struct sum_slot sums[SUM_SLOTS];
	struct sched_acc sa;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct tstate);
} tstore SEC(".maps");

/* file identity -> inode number it had when its path was sent */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, u64);
} files_seen SEC(".maps");

/* Bumped by user space after it deletes identities it forgot from
 * files_seen, so threads check their remembered last file again. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} files_epoch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LOST__COUNT);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

/* Per-CPU scratch for records with strings (too big for the 512-byte stack). */
struct heap {
	u32 off;
	u32 flags;
	u64 args[6];  /* the syscall's arguments, read by the (inlined) exit
		       * program for the handlers it calls (see save_args) */
	char walk[2 * PATHBUF];
	struct ev_file file;
	struct ev_open open;
	struct ev_exec exec;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct heap);
} heap SEC(".maps");

/* The metadata calls' record, built like heap's (a per-CPU array's value
 * holds at most 32 KiB: heap's is full). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct ev_meta);
} meta_heap SEC(".maps");

/* Anonymous mmaps of each traced process (tgid): counted, not recorded
 * one by one (Python and PyTorch make many). Sent at the process's exit;
 * user space reads what is left when recording ends. */
struct anon_count {
	u64 calls;
	u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct anon_count);
} anon_maps SEC(".maps");

/* Where each traced thread's last filemap_fault began (tid -> start), for
 * the major fault that ends it. */
struct fault_start {
	u64 ts;
	u64 ino;
	u64 index;
	u64 faults;  /* the thread's min_flt + maj_flt then: one more when it ends */
	u32 dev;
	u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct fault_start);
} fault_starts SEC(".maps");

/* Referenced so the skeleton generates Rust types with these exact layouts. */
struct ev_io keep_io = {};
struct ev_close keep_close = {};
struct ev_xfer keep_xfer = {};
struct ev_file keep_file = {};
struct ev_open keep_open = {};
struct ev_fork keep_fork = {};
struct ev_exec keep_exec = {};
struct ev_exit keep_exit = {};
struct ev_comm keep_comm = {};
struct ev_block keep_block = {};
struct ev_ioac keep_ioac = {};
struct ev_pcache keep_pcache = {};
struct ev_uring keep_uring = {};
struct ev_aio keep_aio = {};
struct ev_sched keep_sched = {};
struct ev_span keep_span = {};
struct ev_map keep_map = {};
struct ev_fault keep_fault = {};
struct ev_net keep_net = {};
struct ev_gpu keep_gpu = {};
struct ev_nccl keep_nccl = {};
struct ev_untraced keep_untraced = {};
struct ev_meta keep_meta = {};
enum ev_kind keep_kind = 0;
enum op keep_op = 0;
enum lost keep_lost = 0;
enum str_bits keep_str_bits = 0;
enum io_bits keep_io_bits = 0;
enum ioac_bits keep_ioac_bits = 0;
enum map_bits keep_map_bits = 0;
enum blk_bits keep_blk_bits = 0;
enum rq_bits keep_rq_bits = 0;
enum uring_bits keep_uring_bits = 0;
enum sched_op keep_sched_op = 0;
enum sched_state keep_sched_state = 0;
enum sched_traced keep_sched_traced = 0;
enum wake_by keep_wake_by = 0;
enum span_bits keep_span_bits = 0;
enum net_bits keep_net_bits = 0;
enum gpu_api keep_gpu_api = 0;
enum nccl_api keep_nccl_api = 0;

static __always_inline void count_lost(u32 kind)
{
	u64 *c = bpf_map_lookup_elem(&lost, &kind);
	if (c)
		*c += 1;
}

static __always_inline u64 wake_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									     : BPF_RB_NO_WAKEUP;
}

static __always_inline void fill_hdr(struct ev_hdr *h, u8 kind, u8 op, u64 id, u64 ts)
{
	h->kind = kind;
	h->op = op;
	h->flags = 0;
	h->pid = id >> 32;
	h->tid = (u32)id;
	h->ts = ts;
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

/*
 * record --detail summary (summary true): every read, write, sync and close
 * is summed per thread, file, operation and second: in the thread's own
 * state on the fast and per-call routes (struct sum_slot), in io_sums on
 * the compat route. Only a call that failed or took summary_slow_ns or
 * more is also recorded on its own. io_sums is not LRU: an evicted sum
 * would be lost without a word; a call that finds the map full is recorded
 * on its own instead.
 */
const volatile bool summary = false;
const volatile u64 summary_slow_ns = 1000000;

/* Preallocated: an insert on every new (thread, file) pair must not
 * allocate (with BPF_F_NO_PREALLOC the exit program took 620 ns a call on
 * a small-file loader). Still the dearest part of a summed call: about
 * 140 ns of the exit program's 404-440 on make bench's (b), against
 * 272-282 recording every call (docs/performance.md). About 11 MB of
 * kernel memory; user space sizes it to 1 entry when summaries are off. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1 << 16);
	__type(key, struct io_sum_key);
	__type(value, struct io_sum);
} io_sums SEC(".maps");

const struct io_sum io_sum_zero = {};

/* The histogram slot of a latency (see struct io_sum). */
static __always_inline u32 sum_bucket(u64 dur)
{
	u64 d = dur >> 10;
	u32 b = 1;

	if (!d)
		return 0;
	if (d >> 32) {
		d >>= 32;
		b += 32;
	}
	if (d >> 16) {
		d >>= 16;
		b += 16;
	}
	if (d >> 8) {
		d >>= 8;
		b += 8;
	}
	if (d >> 4) {
		d >>= 4;
		b += 4;
	}
	if (d >> 2) {
		d >>= 2;
		b += 2;
	}
	if (d >> 1)
		b += 1;
	return b < SUM_BUCKETS ? b : SUM_BUCKETS - 1;
}

/* `dev_op` of sum_call: the file's device, the low 24 bits of the second
 * the call ended in (user space knows which 194 days), the operation. By
 * its end: user space takes a second's sums once it has ended, and a call
 * that started in it may still be running then. */
#define SUM_DEV_OP(dev, end, op) (((u64)(dev) << 32) | ((((end) / 1000000000) & 0xffffff) << 8) | (op))

/* The compat route (no task storage): sums a call in io_sums; 0 when the
 * map is full. Its thread is the only writer of its sums (a key holds the
 * thread, which runs on one CPU at a time, and programs are not preempted
 * by others of the same thread): plain adds, no atomics. User space reads
 * a second's sums after it has ended. */
static __noinline int sum_compat(u64 file, u64 ino, u64 dev_op, s64 ret, u64 dur)
{
	struct io_sum_key k = {
		.op = dev_op & 0xff,
		.sec = (dev_op >> 8) & 0xffffff,
		.file = file,
		.ino = ino,
		.dev = dev_op >> 32,
	};
	u64 id = bpf_get_current_pid_tgid();
	struct io_sum *s;
	u32 b;

	k.tgid = id >> 32;
	k.tid = (u32)id;
	k.exec = BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), self_exec_id);
	s = bpf_map_lookup_elem(&io_sums, &k);
	if (!s) {
		bpf_map_update_elem(&io_sums, &k, &io_sum_zero, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&io_sums, &k);
		if (!s)
			return 0;
	}
	s->calls++;
	if (ret >= 0)
		s->bytes += ret;
	else
		s->failed++;
	s->ns += dur;
	b = sum_bucket(dur);
	if (b < SUM_BUCKETS)
		s->hist[b]++;
	return 1;
}

/* The slot of an operation in a thread's state. */
static __always_inline u32 sum_slot_of(u32 op)
{
	if (op <= OP_PREADV2)
		return 0;
	if (op <= OP_PWRITEV2)
		return 1;
	if (op == OP_CLOSE)
		return 3;
	return 2;
}

/* Sends a slot's sums; the ring full: a record lost, counted. */
static __always_inline void send_slot(struct sum_slot *s)
{
	if (s->sum.calls && bpf_ringbuf_output(&events, s, sizeof(*s), wake_flags()))
		count_lost(LOST_RING);
}

/* The fast and per-call routes: the call added to its thread's slot, which
 * is sent first when it holds another file's, operation's or second's. */
static __always_inline int sum_fast(struct tstate *ts, u64 file, u64 ino, u64 dev_op, s64 ret, u64 dur)
{
	struct task_struct *t = bpf_get_current_task_btf();
	u32 op = dev_op & 0xff, i = sum_slot_of(op), b;
	u64 sec = (dev_op >> 8) & 0xffffff;
	struct sum_slot *s;

	if (!ts || i >= SUM_SLOTS)
		return 0;
	s = &ts->sums[i];
	if (s->key.file != file || s->key.ino != ino || s->key.sec != sec || s->key.op != op ||
	    s->key.dev != dev_op >> 32 || s->key.exec != t->self_exec_id || s->key.tid != t->pid || !s->sum.calls) {
		send_slot(s);
		/* Odd while the key changes: the iterator skips the slot. */
		s->seq++;
		asm volatile("" ::: "memory");
		__builtin_memset(&s->sum, 0, sizeof(s->sum));
		s->h.kind = EV_SUM;
		s->slot = i;
		s->key.tgid = t->tgid;
		s->key.tid = t->pid;
		s->key.exec = t->self_exec_id;
		s->key.op = op;
		s->key.sec = sec;
		s->key.file = file;
		s->key.ino = ino;
		s->key.dev = dev_op >> 32;
		asm volatile("" ::: "memory");
		s->seq++;
	}
	s->sum.calls++;
	if (ret >= 0)
		s->sum.bytes += ret;
	else
		s->sum.failed++;
	s->sum.ns += dur;
	b = sum_bucket(dur);
	if (b < SUM_BUCKETS)
		s->sum.hist[b]++;
	return 1;
}

/* An exiting thread's sums, all sent: its state goes with it. */
static __always_inline void send_slots(struct inflight *st)
{
	struct tstate *ts = (struct tstate *)st;

	if (!summary)
		return;
	for (int i = 0; i < SUM_SLOTS; i++) {
		struct sum_slot *s = &ts->sums[i];

		if (!s->sum.calls)
			continue;
		send_slot(s);
		/* Emptied, the iterator's way (the task outlives this). */
		s->seq++;
		asm volatile("" ::: "memory");
		s->sum.calls = 0;
		asm volatile("" ::: "memory");
		s->seq++;
	}
}

/*
 * User space's read of the threads' slots (every round, and at the end):
 * each filled slot whose key is not changing, with its seq; user space
 * keeps those of seconds that have ended (their threads will not add to
 * them) and takes each filling of a slot once, whether read here or sent.
 */
SEC("iter/task")
int sum_slots(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct seq_file *seq = ctx->meta->seq;
	struct tstate *ts;

	if (!t)
		return 0;
	ts = bpf_task_storage_get(&tstore, t, 0, 0);
	if (!ts)
		return 0;
	for (int i = 0; i < SUM_SLOTS; i++) {
		struct sum_slot *s = &ts->sums[i], copy;
		u32 before = s->seq;

		if ((before & 1) || !s->sum.calls)
			continue;
		asm volatile("" ::: "memory");
		__builtin_memcpy(&copy, s, sizeof(copy));
		asm volatile("" ::: "memory");
		/* Changed while copied: the thread sent it. */
		if (s->seq != before)
			continue;
		bpf_seq_write(seq, &copy, sizeof(copy));
	}
	return 0;
}

#define SUM_CALL(st, ...) (fast ? sum_fast((struct tstate *)(st), __VA_ARGS__) : sum_compat(__VA_ARGS__))

/* Syscall arguments: direct loads from the typed pt_regs of tp_btf, CO-RE
 * reads from the raw pointer of raw_tp. `fast` is always a constant. */
/* `x &= mask` that the compiler can neither drop nor move: for verifiers
 * that lose a bound the source has already checked. */
#define BOUND(x, mask) asm volatile("%0 &= " #mask : "+r"(x))

#define ARG(n) (fast ? PT_REGS_PARM##n##_SYSCALL(regs) : PT_REGS_PARM##n##_CORE_SYSCALL(regs))
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
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
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
	if (bpf_ringbuf_output(&events, e, offsetof(struct ev_file, path) + (len & (PATHBUF - 1)), 0)) {
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
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
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
static __always_inline void remember_file(struct inflight *st, u64 key, u64 ino, u64 epoch)
{
	if (st->last_epoch == epoch) {
		st->prev_file = st->last_file;
		st->prev_ino = st->last_ino;
	} else {
		st->prev_file = 0;
	}
	st->last_file = key;
	st->last_ino = ino;
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
	u64 ino, epoch = 0;
	u64 *seen;
	u32 zero = 0;

	if (!f)
		return 0;
	/* Only the fast route keeps `st`: it may also cast. */
	ino = file_ino(f, st != NULL);
	if (st) {
		u64 *e = bpf_map_lookup_elem(&files_epoch, &zero);
		if (e)
			epoch = *e;
		if (st->last_epoch == epoch) {
			if (st->last_file == key && st->last_ino == ino)
				return key;
			if (st->prev_file == key && st->prev_ino == ino) {
				st->prev_file = st->last_file;
				st->prev_ino = st->last_ino;
				st->last_file = key;
				st->last_ino = ino;
				return key;
			}
		}
	}
	seen = bpf_map_lookup_elem(&files_seen, &key);
	if (!(seen && *seen == ino)) {
		if (emit_path(key, (u64)__builtin_preserve_access_index(&f->f_path), (u64)BPF_CORE_READ(f, f_inode), 0, id))
			return key;
		bpf_map_update_elem(&files_seen, &key, &ino, BPF_ANY);
	}
	if (st)
		remember_file(st, key, ino, epoch);
	return key;
}

/* The identity of the current working directory (tagged so it never equals a file's). */
static __always_inline u64 cwd_key(u64 id)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	struct dentry *d = BPF_CORE_READ(fs, pwd.dentry);
	u64 key = (u64)d | 1;
	u64 ino = BPF_CORE_READ(d, d_inode, i_ino);
	u64 *seen = bpf_map_lookup_elem(&files_seen, &key);

	if (seen && *seen == ino)
		return key;
	if (emit_path(key, (u64)__builtin_preserve_access_index(&fs->pwd), (u64)BPF_CORE_READ(d, d_inode), F_BASE, id) == 0)
		bpf_map_update_elem(&files_seen, &key, &ino, BPF_ANY);
	return key;
}

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
		if (SUM_CALL(v, sum_file, ino, dev_op, ret, now - v->ts)) {
			if (ret >= 0 && now - v->ts < summary_slow_ns)
				return;
			flags |= IOF_SUMMED;
		}
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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
	e->h.flags = flags;
	e->dur = now - v->ts;
	e->file = key;
	e->offset = pos;
	e->ret = ret;
	e->fd = fd;
	e->nblk = v->nblk;
	bpf_ringbuf_submit(e, wake_flags());
}

static __always_inline void on_close(struct inflight *v, struct pt_regs *regs, s64 ret, u64 now, u64 id, bool fast)
{
	struct ev_close *e;
	u16 flags = 0;

	/* Summed without its file: the file is gone, and its struct file
	 * is the next open's. */
	if (summary && SUM_CALL(v, 0, 0, SUM_DEV_OP(0, now, v->op), ret, now - v->ts)) {
		if (ret >= 0 && now - v->ts < summary_slow_ns)
			return;
		flags = IOF_SUMMED;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_CLOSE, v->op, id, v->ts);
	e->h.flags = flags;
	e->dur = now - v->ts;
	e->file = v->file;
	e->ret = ret;
	e->fd = ARG(1);
	bpf_ringbuf_submit(e, wake_flags());
}

static __noinline int on_xfer(struct inflight *v, s64 ret, u64 now, u64 id)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
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

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_XFER, v->op, id, v->ts);
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

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

/* A sockaddr in user memory (the call's own address argument) into the
 * record; false when it is none of the families we name. */
static __always_inline bool net_user_addr(struct ev_net *e, const void *sa, u32 len)
{
	u16 family = 0;
	u16 port = 0;

	if (!sa || len < 2 || bpf_probe_read_user(&family, sizeof(family), sa))
		return false;
	if (family == AF_INET && len >= 8) {
		bpf_probe_read_user(&port, sizeof(port), sa + 2);
		bpf_probe_read_user(e->addr, 4, sa + 4);
	} else if (family == AF_INET6 && len >= 24) {
		bpf_probe_read_user(&port, sizeof(port), sa + 2);
		bpf_probe_read_user(e->addr, 16, sa + 8);
	} else if (family == AF_UNIX) {
		bpf_probe_read_user_str(e->path, sizeof(e->path), sa + 2);
	} else {
		return false;
	}
	e->family = family;
	e->port = bpf_ntohs(port);
	return true;
}

/* The socket's own idea of its peer: the remote address and port of a
 * connected inet socket, the path a unix socket's peer is bound to (or
 * its own, for a server's accepted socket). */
static __always_inline bool net_sock_addr(struct ev_net *e, struct file *f)
{
	struct socket *sock = BPF_CORE_READ(f, private_data);
	struct sock *sk = BPF_CORE_READ(sock, sk);
	u16 family;

	if (!sk)
		return false;
	family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (family == AF_INET) {
		u32 a = BPF_CORE_READ(sk, __sk_common.skc_daddr);

		if (!a)
			return false;
		__builtin_memcpy(e->addr, &a, 4);
		e->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (family == AF_INET6 && bpf_core_field_exists(sk->__sk_common.skc_v6_daddr)) {
		/* (A kernel without IPv6 has no v6 address to relocate against.) */
		bpf_probe_read_kernel(e->addr, 16, &sk->__sk_common.skc_v6_daddr);
		e->port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		if (!e->port)
			return false;
	} else if (family == AF_UNIX && bpf_core_type_exists(struct unix_sock)) {
		/* (Unix sockets built as a module have no type in vmlinux's BTF.) */
		struct unix_sock *u = (void *)sk;
		struct unix_sock *peer = (void *)BPF_CORE_READ(u, peer);
		struct unix_address *a = peer ? BPF_CORE_READ(peer, addr) : NULL;

		if (!a)
			a = BPF_CORE_READ(u, addr);
		if (!a)
			return false;
		/* name (a sockaddr_un) follows the int len; its path after the family. */
		bpf_probe_read_kernel_str(e->path, sizeof(e->path),
					  (void *)a + bpf_core_field_offset(struct unix_address, len) + 4 + 2);
	} else {
		return false;
	}
	e->family = family;
	return true;
}

static __noinline int on_net(struct inflight *v, s64 ret, u64 now, u64 id)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
	struct ev_net *e;
	struct file *f;
	const void *sa = NULL;
	u32 salen = 0;
	u16 flags = 0;
	int fd;

	if (!hp)
		return 0;
	fd = hp->args[0];
	f = fd_file(fd);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	__builtin_memset(e->addr, 0, sizeof(e->addr));
	e->path[0] = 0;
	e->family = 0;
	e->port = 0;
	e->bytes = ret > 0 ? ret : 0;
	switch (v->op) {
	case OP_SENDTO:
	case OP_RECVFROM: {
		/* sendto(fd, buf, len, flags, dest_addr, addrlen);
		 * recvfrom(fd, buf, len, flags, src_addr, *addrlen) */
		e->requested = hp->args[2];
		sa = (const void *)hp->args[4];
		if (v->op == OP_SENDTO) {
			salen = hp->args[5];
		} else if (sa && ret >= 0) {
			bpf_probe_read_user(&salen, sizeof(salen), (const void *)hp->args[5]);
		}
		break;
	}
	case OP_SENDMSG:
	case OP_RECVMSG:
	case OP_SENDMMSG:
	case OP_RECVMMSG: {
		/* struct msghdr (user): msg_name @0, msg_namelen @8, msg_iov @16,
		 * msg_iovlen @24; struct mmsghdr: a msghdr, then msg_len @56, 64 bytes. */
		const void *msg = (const void *)hp->args[1];
		u64 iov = 0, iovlen = 0;

		bpf_probe_read_user(&sa, sizeof(sa), msg);
		bpf_probe_read_user(&salen, sizeof(salen), msg + 8);
		bpf_probe_read_user(&iov, sizeof(iov), msg + 16);
		bpf_probe_read_user(&iovlen, sizeof(iovlen), msg + 24);
		e->requested = iov_sum((const struct iovec *)iov, iovlen, &flags);
		if (flags)
			flags = NETF_PARTIAL;
		if (v->op == OP_SENDMMSG || v->op == OP_RECVMMSG) {
			u64 sum = 0;
			u32 n = ret > 0 ? ret : 0;

			for (u32 i = 0; i < NET_MMSG; i++) {
				u32 len = 0;

				if (i >= n)
					break;
				bpf_probe_read_user(&len, sizeof(len), msg + i * 64 + 56);
				sum += len;
			}
			if (n > NET_MMSG)
				flags |= NETF_PARTIAL;
			e->bytes = sum;
		}
		break;
	}
	default:
		e->requested = 0;
	}
	/* A received address is only there when the call succeeded. */
	if ((v->op == OP_RECVFROM || v->op == OP_RECVMSG || v->op == OP_RECVMMSG) && ret < 0)
		sa = NULL;
	if (net_user_addr(e, sa, salen))
		flags |= NETF_PEER_USER;
	else if (ret >= 0 && f && net_sock_addr(e, f))
		flags |= NETF_PEER_SOCK;
	fill_hdr(&e->h, EV_NET, v->op, id, v->ts);
	e->h.flags = flags;
	e->dur = now - v->ts;
	e->file = file_key(f, id, NULL);
	e->ret = ret;
	e->fd = fd;
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}

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
	u64 flags = 0;
	s32 fd = -1;

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

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_MAP, v->op, id, v->ts);
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
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}

/* A process's anonymous mmaps, counted since it was traced. */
static __always_inline void emit_anon(u32 tgid, u64 id)
{
	struct anon_count *c = bpf_map_lookup_elem(&anon_maps, &tgid);
	struct ev_map *e;

	if (!c)
		return;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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

static __noinline int on_open(struct inflight *v, s64 ret, u64 now, u64 id)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
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
		u64 ino = 0, *seen, *epoch = bpf_map_lookup_elem(&files_epoch, &zero);

		e->file = key;
		if (f)
			ino = load_word((void *)load_word(f, bpf_core_field_offset(struct file, f_inode)),
					bpf_core_field_offset(struct inode, i_ino));
		/* The thread's last file (fast route), else files_seen. */
		if (f && epoch && v->last_epoch == *epoch &&
		    ((v->last_file == key && v->last_ino == ino) || (v->prev_file == key && v->prev_ino == ino)))
			seen = &ino;
		else
			seen = bpf_map_lookup_elem(&files_seen, &key);
		if (!(seen && f && *seen == ino)) {
			/* --path judges the kernel's own path: walk then. */
			e->named = name_in_open(key, len, !want_path_on && passed_names_it(e->path, len));
			alen = e->named ? e->abs_len : 0;
		}
	} else if (len == 0 || e->path[0] != '/') {
		/* Failed relative open: name the directory it was relative to. */
		e->base = dirfd == AT_FDCWD ? cwd_key(id) : file_key(fd_file(dirfd), id, NULL);
	}
	fill_hdr(&e->h, EV_OPEN, op, id, start);
	e->dur = now - start;
	e->ret = ret;
	e->flags = flags;
	e->mode = mode;
	e->dirfd = dirfd;
	e->path_len = len;
	e->trunc = trunc;
	e->nblk = v->nblk;
	if (bpf_ringbuf_output(&events, e, offsetof(struct ev_open, path) + (len & (PATHBUF - 1)) + (alen & (PATHBUF - 1)),
			       wake_flags())) {
		count_lost(LOST_RING);
		return 0;
	}
	return e->named;
}

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
	e->dur = now - v->ts;
	e->ret = ret;
	e->flags = flags;
	e->dirfd = dirfd;
	e->dirfd2 = dirfd2;
	e->nblk = v->nblk;
	e->path_len = len;
	e->path2_len = len2;
	e->trunc = trunc;
	if (bpf_ringbuf_output(&events, e, offsetof(struct ev_meta, path) + (len & (PATHBUF - 1)) + (len2 & (PATHBUF - 1)),
			       wake_flags()))
		count_lost(LOST_RING);
	return 0;
}

/* libaio: the iocbs summed per io_submit, the events per io_getevents. */
#define MAX_AIO 16
#define IOCB_CMD_PREAD 0
#define IOCB_CMD_PWRITE 1
#define IOCB_CMD_PREADV 7
#define IOCB_CMD_PWRITEV 8

/* The first iocb's file, opcode and offset. */
static __always_inline void aio_first(struct ev_aio *e, const struct iocb *cb, u64 id)
{
	struct iocb c;

	if (bpf_probe_read_user(&c, sizeof(c), cb)) {
		/* Freed already: a detail missing, not an event lost. */
		e->h.flags |= IOF_REQ_PARTIAL;
		return;
	}
	e->fd = c.aio_fildes;
	e->aio_op = c.aio_lio_opcode;
	e->offset = c.aio_offset;
	e->file = file_key(fd_file((s32)c.aio_fildes), id, NULL);
}

static __always_inline void aio_submit(struct ev_aio *e, u64 *args, u64 id)
{
	/* io_submit(ctx, nr, iocbpp): the iocbs passed, whether or not all went in. */
	struct iocb **cbs = (struct iocb **)args[2];
	s64 nr = args[1];
	u64 n = nr > 0 ? nr : 0;

	e->nr = nr;
	if (n > MAX_AIO) {
		e->h.flags |= IOF_REQ_PARTIAL;
		n = MAX_AIO;
	}
	for (int i = 0; i < MAX_AIO; i++) {
		struct iocb *cb = NULL;
		struct iocb c;

		if (i >= n)
			break;
		if (bpf_probe_read_user(&cb, sizeof(cb), &cbs[i]) || bpf_probe_read_user(&c, sizeof(c), cb)) {
			e->h.flags |= IOF_REQ_PARTIAL;
			break;
		}
		if (i == 0) {
			e->fd = c.aio_fildes;
			e->aio_op = c.aio_lio_opcode;
			e->offset = c.aio_offset;
		}
		if (c.aio_lio_opcode == IOCB_CMD_PREAD)
			e->read_bytes += c.aio_nbytes;
		else if (c.aio_lio_opcode == IOCB_CMD_PWRITE)
			e->write_bytes += c.aio_nbytes;
		else if (c.aio_lio_opcode == IOCB_CMD_PREADV || c.aio_lio_opcode == IOCB_CMD_PWRITEV)
			/* aio_nbytes counts iovecs there: not summed. */
			e->h.flags |= IOF_REQ_PARTIAL;
		e->counted = i + 1;
	}
	if (e->counted)
		e->file = file_key(fd_file(e->fd), id, NULL);
}

static __always_inline void aio_events(struct ev_aio *e, u64 *args, s64 ret, u64 id)
{
	/* io_getevents(ctx, min_nr, nr, events, timeout): the events returned. */
	struct io_event *ev = (struct io_event *)args[3];
	u64 n = ret > 0 ? ret : 0;

	e->min_nr = args[1];
	e->nr = args[2];
	if (n > MAX_AIO) {
		e->h.flags |= IOF_REQ_PARTIAL;
		n = MAX_AIO;
	}
	for (int i = 0; i < MAX_AIO; i++) {
		struct io_event x;
		u16 cmd;

		if (i >= n)
			break;
		if (bpf_probe_read_user(&x, sizeof(x), &ev[i])) {
			e->h.flags |= IOF_REQ_PARTIAL;
			break;
		}
		if (i == 0)
			/* The iocb it completes, if the program still has it. */
			aio_first(e, (const struct iocb *)x.obj, id);
		if (x.res < 0) {
			e->errors += 1;
		} else if (bpf_probe_read_user(&cmd, sizeof(cmd), &((const struct iocb *)x.obj)->aio_lio_opcode)) {
			/* Its iocb is gone: a read or a write, not known. */
			e->h.flags |= IOF_REQ_PARTIAL;
		} else if (cmd == IOCB_CMD_PWRITE || cmd == IOCB_CMD_PWRITEV) {
			e->write_bytes += x.res;
		} else if (cmd == IOCB_CMD_PREAD || cmd == IOCB_CMD_PREADV) {
			e->read_bytes += x.res;
		}
		e->counted = i + 1;
	}
}

static __noinline int on_aio(struct inflight *v, s64 ret, u64 now, u64 id)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);
	struct ev_aio *e;

	if (!hp)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_AIO, v->op, id, v->ts);
	e->dur = now - v->ts;
	e->ctx = hp->args[0];
	e->file = 0;
	e->offset = 0;
	e->read_bytes = 0;
	e->write_bytes = 0;
	e->ret = ret;
	e->nr = 0;
	e->min_nr = 0;
	e->fd = -1;
	e->counted = 0;
	e->errors = 0;
	e->aio_op = 0;
	e->_pad = 0;
	e->nblk = v->nblk;
	if (v->op == OP_IO_SUBMIT)
		aio_submit(e, hp->args, id);
	else
		aio_events(e, hp->args, ret, id);
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}

/* The syscall's arguments for the handlers that are subprograms (opens,
 * transfers, libaio, mappings), read here where `fast` is known: plain
 * loads from tp_btf's typed registers instead of probe reads. Kept out of
 * the exit program's own frame: the verifier before 6.14 limits a program
 * and the subprograms it calls to 512 bytes of stack together. */
static __always_inline bool save_args(struct pt_regs *regs, bool fast)
{
	u32 zero = 0;
	struct heap *hp = bpf_map_lookup_elem(&heap, &zero);

	if (!hp)
		return false;
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
	u64 key, ino;

	if (!hp)
		return;
	key = hp->open.file;
	ino = hp->open.ino;
	if (st) {
		u64 *epoch = bpf_map_lookup_elem(&files_epoch, &zero);

		remember_file(st, key, ino, epoch ? *epoch : 0);
		return;
	}
	bpf_map_update_elem(&files_seen, &key, &ino, BPF_ANY);
}

/* Syscall exit: `v` is the entry state; on the fast route `st` is the
 * thread's own state (the same memory; it outlives the call) and `t` the
 * thread. The caller marks the call handled after this returns. */
static __always_inline void leave(struct inflight *v, struct inflight *st, struct task_struct *t,
				  struct pt_regs *regs, s64 ret, u64 id, bool fast)
{
	u64 now = bpf_ktime_get_boot_ns();

	switch (v->op) {
	case OP_READ ... OP_PWRITEV2:
	case OP_FSYNC ... OP_SYNC_FILE_RANGE:
		on_io(v, st, t, regs, ret, now, id, fast);
		break;
	case OP_OPEN ... OP_CREAT:
		if (save_args(regs, fast) && on_open(v, ret, now, id))
			opened_named(st);
		break;
	case OP_CLOSE:
		on_close(v, regs, ret, now, id, fast);
		break;
	case OP_SENDFILE:
	case OP_COPY_FILE_RANGE:
		if (save_args(regs, fast))
			on_xfer(v, ret, now, id);
		break;
	case OP_IO_SUBMIT ... OP_IO_PGETEVENTS:
		if (save_args(regs, fast))
			on_aio(v, ret, now, id);
		break;
	case OP_MMAP ... OP_MREMAP:
		if (save_args(regs, fast))
			on_map(v, ret, now, id);
		break;
	case OP_SENDTO ... OP_RECVMMSG:
		if (save_args(regs, fast))
			on_net(v, ret, now, id);
		break;
	case OP_GETDENTS64 ... OP_RENAMEAT2:
		if (save_args(regs, fast))
			on_meta(v, ret, now, id);
		break;
	}
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
		leader = BPF_CORE_READ(t, group_leader);
		on_rename(leader, leader->comm);
	}
	return true;
}

/* Page-cache insertions (see on_pcache): one record for a run of pages. */
/* The most pages one record holds (256 MiB of 4 KiB pages). */
#define PCACHE_RUN_MAX 65536

static __always_inline void send_pcache(u8 op, u64 id, u64 ts, u64 ino, u64 index, u32 dev, u32 pages)
{
	struct ev_pcache *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		count_lost(LOST_RING);
		return;
	}
	fill_hdr(&e->h, EV_PCACHE, op, id, ts);
	e->ino = ino;
	e->index = index;
	e->dev = dev;
	e->pages = pages;
	bpf_ringbuf_submit(e, wake_flags());
}

/* Sends the call's pending run of insertions, if any. */
static __always_inline void flush_pcache(struct inflight *st, u64 id)
{
	if (!st->pc_pages)
		return;
	send_pcache(st->op, id, st->pc_ts, st->pc_ino, st->pc_index, st->pc_dev, st->pc_pages);
	st->pc_pages = 0;
}

/* The compat route: raw_tp programs, state in hash maps. */
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
	/* Its anonymous mmaps so far: counted while it was the user's. */
	emit_anon(tgid, bpf_get_current_pid_tgid());
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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
		u32 nr = BPF_CORE_READ((struct pt_regs *)ctx->args[0], orig_ax);

		setid_escapes((void *)bpf_get_current_task(), id >> 32, nr);
		bpf_map_delete_elem(&inflight, &tid);
		return 0;
	}
	/* No copy of the state (stack is short, see save_args): only this
	 * thread touches its entry, which goes once the call is handled. */
	flush_pcache(vp, id);
	leave(vp, NULL, NULL, (void *)ctx->args[0], ctx->args[1], id, false);
	bpf_map_delete_elem(&inflight, &tid);
	return 0;
}

/* The fast route: tp_btf programs, state in task storage. */
static __always_inline struct inflight *state_of(struct task_struct *t)
{
	return bpf_task_storage_get(&tstore, t, 0, 0);
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

/* The fast route's work at a syscall's entry and exit, given the user's
 * registers (typed: plain loads) and the call's number. */
static __always_inline int fast_enter(struct pt_regs *regs, u64 nr)
{
	struct inflight *st;
	u8 op;

	if (nr >= MAX_SYSCALL_NR)
		return 0;
	op = sys_op[nr];
	if (op == OP_NONE)
		return 0;
	st = state_of(bpf_get_current_task_btf());
	if (!st && adopt)
		st = adopt_task(bpf_get_current_task_btf());
	if (!st)
		return 0;
	if (op >= OP_MMAP && op <= OP_MREMAP && !record_map(op, regs, true))
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
	leave(st, st, t, regs, ret, ((u64)t->tgid << 32) | (u32)t->pid, true);
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
	return fast_exit(regs, regs->orig_ax, ret);
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

/* A traced task forked: trace the child (its tgid too when it is a new
 * process, for user space's list) and say so. */
static __always_inline void on_fork(struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	u32 cpid, ctid, one = 1;
	struct ev_fork *e;

	cpid = BPF_CORE_READ(child, tgid);
	ctid = BPF_CORE_READ(child, pid);
	if (cpid != ptgid && bpf_map_update_elem(&traced, &cpid, &one, BPF_ANY))
		count_lost(LOST_MAP);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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
	if (bpf_ringbuf_output(&events, e, offsetof(struct ev_exec, data) + ((flen + alen) & (PATHBUF + ARGVBUF - 1)),
			       wake_flags()))
		count_lost(LOST_RING);
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

		bpf_map_update_elem(&traced, &tgid, &exited, BPF_EXIST);
		emit_anon(tgid, id);
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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

/*
 * Page-cache insertions caused by traced threads: what they read from
 * storage (or, inside a write, the pages the write filled). Inside a
 * recorded call, consecutive insertions of one file (readahead adds a
 * folio at a time, a 32 MiB read thousands of them) are one record:
 * the run is kept in the thread's state and sent when the next insertion
 * does not continue it, when the call ends, or when the thread exits.
 * Outside calls (faults, exec) each insertion is a record of its own
 * (a page, or a large folio of 1 << order pages).
 */
static __always_inline void on_pcache(struct trace_event_raw_mm_filemap_op_page_cache *ctx, struct inflight *st)
{
	u64 id = bpf_get_current_pid_tgid(), ino, index;
	u32 order = 0, dev, pages;

	/* The tracepoint's record is the program's context: plain loads. */
	if (bpf_core_field_exists(ctx->order))
		order = ctx->order & 31;
	pages = 1U << order;
	ino = ctx->i_ino;
	index = ctx->index;
	dev = ctx->s_dev;
	if (!st || st->op == OP_NONE) {
		send_pcache(OP_NONE, id, bpf_ktime_get_boot_ns(), ino, index, dev, pages);
		return;
	}
	if (st->pc_pages && st->pc_ino == ino && st->pc_dev == dev && st->pc_index + st->pc_pages == index &&
	    st->pc_pages + pages <= PCACHE_RUN_MAX) {
		st->pc_pages += pages;
		return;
	}
	flush_pcache(st, id);
	st->pc_ino = ino;
	st->pc_index = index;
	st->pc_dev = dev;
	st->pc_pages = pages;
	st->pc_ts = bpf_ktime_get_boot_ns();
}

SEC("tp/filemap/mm_filemap_add_to_page_cache")
int pcache_add(struct trace_event_raw_mm_filemap_op_page_cache *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	on_pcache(ctx, bpf_map_lookup_elem(&inflight, &tid));
	return 0;
}

SEC("tp/filemap/mm_filemap_add_to_page_cache")
int fast_pcache_add(struct trace_event_raw_mm_filemap_op_page_cache *ctx)
{
	struct inflight *st = state_of(bpf_get_current_task_btf());

	if (st)
		on_pcache(ctx, st);
	return 0;
}

/*
 * io_uring reads and writes of traced processes. A request is submitted in
 * the thread that called io_uring_enter (or the ring's SQPOLL thread, a
 * thread of the same process) and completes wherever the kernel finishes
 * it: in that thread's task work, an io-wq worker (iou-wrk-*), or an
 * interrupt. So the submission is kept by request pointer until its
 * completion, which is attributed to the submitter. Classic tracepoints:
 * their records have the same fields on every kernel with a request
 * pointer (5.18+), and they work on both routes.
 */
#define IORING_OP_READV 1
#define IORING_OP_WRITEV 2
#define IORING_OP_READ_FIXED 4
#define IORING_OP_WRITE_FIXED 5
#define IORING_OP_READ 22
#define IORING_OP_WRITE 23
#define IOSQE_FIXED_FILE 1
#define IOSQE_BUFFER_SELECT 32

struct uring_req {
	u64 ts;
	u64 offset;
	u64 requested;
	u32 pid;
	u32 tid;
	s32 fd;
	u16 flags;
	u8 opcode;
	u8 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct uring_req);
} uring_reqs SEC(".maps");

/* Submissions of traced processes by opcode (all opcodes, drawn or not). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, u32);
	__type(value, u64);
} uring_ops SEC(".maps");

static __always_inline void uring_submit(void *req, u8 opcode, u64 sqe_flags, bool sq_thread)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, op = opcode;
	struct io_kiocb *k = req;
	struct io_rw *rw = req;
	struct uring_req v = {};
	u64 key = (u64)req, *n;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return;
	n = bpf_map_lookup_elem(&uring_ops, &op);
	if (n)
		*n += 1;
	switch (opcode) {
	case IORING_OP_READV:
	case IORING_OP_WRITEV:
	case IORING_OP_READ_FIXED:
	case IORING_OP_WRITE_FIXED:
	case IORING_OP_READ:
	case IORING_OP_WRITE:
		break;
	default:
		return;
	}
	v.ts = bpf_ktime_get_boot_ns();
	v.pid = tgid;
	v.tid = (u32)id;
	v.opcode = opcode;
	v.fd = -1;
	if (bpf_core_field_exists(k->cqe.fd))
		v.fd = BPF_CORE_READ(k, cqe.fd);
	if (sqe_flags & IOSQE_FIXED_FILE)
		v.flags |= URF_FIXED_FILE;
	if (sq_thread)
		v.flags |= URF_SQPOLL;
	/* The request was prepared before this tracepoint: its io_rw holds
	 * the sqe's offset, buffer and length. */
	v.offset = BPF_CORE_READ(rw, kiocb.ki_pos);
	if (v.offset == (u64)-1)
		v.flags |= URF_FILEPOS;
	if (sqe_flags & IOSQE_BUFFER_SELECT)
		v.flags |= URF_BUF_SELECT;
	if (opcode == IORING_OP_READV || opcode == IORING_OP_WRITEV) {
		u16 f = 0;

		if (!(sqe_flags & IOSQE_BUFFER_SELECT))
			v.requested = iov_sum((const struct iovec *)BPF_CORE_READ(rw, addr), BPF_CORE_READ(rw, len), &f);
		if (f & IOF_REQ_PARTIAL)
			v.flags |= URF_REQ_PARTIAL;
	} else {
		v.requested = BPF_CORE_READ(rw, len);
	}
	if (bpf_map_update_elem(&uring_reqs, &key, &v, BPF_ANY))
		count_lost(LOST_MAP);
}

SEC("tp/io_uring/io_uring_submit_req")
int uring_submit_req(struct trace_event_raw_io_uring_submit_req *ctx)
{
	uring_submit(ctx->req, ctx->opcode, ctx->flags, ctx->sq_thread);
	return 0;
}

/* 5.18 and 5.19 call it io_uring_submit_sqe. */
SEC("tp/io_uring/io_uring_submit_sqe")
int uring_submit_sqe(struct trace_event_raw_io_uring_submit_sqe *ctx)
{
	uring_submit(ctx->req, ctx->opcode, ctx->flags, ctx->sq_thread);
	return 0;
}

SEC("tp/io_uring/io_uring_complete")
int uring_complete(struct trace_event_raw_io_uring_complete *ctx)
{
	u64 key = (u64)ctx->req;
	struct uring_req *p = bpf_map_lookup_elem(&uring_reqs, &key);
	struct io_kiocb *k = (void *)key;
	struct io_rw *rw = (void *)key;
	struct uring_req v;
	struct ev_uring *e;
	u64 now, pos;
	s64 res;

	if (!p)
		return 0;
	v = *p;
	bpf_map_delete_elem(&uring_reqs, &key);
	now = bpf_ktime_get_boot_ns();
	res = ctx->res;
	pos = v.offset;
	if (v.flags & URF_FILEPOS) {
		/* The request read the file position and moved it past what it did. */
		pos = BPF_CORE_READ(rw, kiocb.ki_pos);
		if (pos == (u64)-1)
			v.flags |= URF_NO_OFFSET;
		else if (res > 0)
			pos -= res;
	}
	/* The file is named in the submitter's name: the id only labels EV_FILE. */
	u64 fkey = file_key(BPF_CORE_READ(k, file), ((u64)v.pid << 32) | v.tid, NULL);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_URING, v.opcode, ((u64)v.pid << 32) | v.tid, v.ts);
	e->h.flags = v.flags;
	e->dur = now - v.ts;
	e->file = fkey;
	e->offset = pos;
	e->requested = v.requested;
	e->user_data = ctx->user_data;
	e->ret = res;
	e->fd = v.fd;
	e->complete_tid = (u32)bpf_get_current_pid_tgid();
	bpf_ringbuf_submit(e, wake_flags());
	return 0;
}

/*
 * Major faults. perf's PAGE_FAULTS_MAJ software event fires (in the
 * faulting thread) when a fault that had to read its page is done; it costs
 * nothing on minor faults. filemap_fault, where a file page is read in,
 * may run twice for one fault (the first pass drops the mmap lock to wait
 * for the read and asks for a retry): the first start is kept while no
 * fault of the thread completed in between.
 */
static __always_inline u64 faults_done(void)
{
	struct task_struct *t = (void *)bpf_get_current_task();

	return BPF_CORE_READ(t, min_flt) + BPF_CORE_READ(t, maj_flt);
}

SEC("tp/filemap/mm_filemap_fault")
int fault_begin(struct trace_event_raw_mm_filemap_fault *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct fault_start *s, n = {};

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	n.faults = faults_done();
	n.ino = ctx->i_ino;
	n.index = ctx->index;
	n.dev = ctx->s_dev;
	s = bpf_map_lookup_elem(&fault_starts, &tid);
	if (s && s->faults == n.faults && s->ino == n.ino && s->index == n.index && s->dev == n.dev)
		return 0;
	n.ts = bpf_ktime_get_boot_ns();
	if (bpf_map_update_elem(&fault_starts, &tid, &n, BPF_ANY))
		count_lost(LOST_MAP);
	return 0;
}

SEC("perf_event")
int major_fault(struct bpf_perf_event_data *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct fault_start *s;
	struct ev_fault *e;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_FAULT, 0, id, bpf_ktime_get_boot_ns());
	e->addr = ctx->addr;
	e->start = 0;
	e->ino = 0;
	e->index = 0;
	e->dev = 0;
	e->_pad = 0;
	s = bpf_map_lookup_elem(&fault_starts, &tid);
	if (s) {
		/* Began this very fault: none completed since but this one. */
		if (s->faults + 1 == faults_done()) {
			e->start = s->ts;
			e->ino = s->ino;
			e->index = s->index;
			e->dev = s->dev;
		}
		bpf_map_delete_elem(&fault_starts, &tid);
	}
	bpf_ringbuf_submit(e, wake_flags());
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
	if (v && *v == TRACED_EXITED)
		bpf_map_delete_elem(&traced, &tgid);
	return 0;
}

static __always_inline void on_rename(struct task_struct *task, const char *comm)
{
	u32 tgid = BPF_CORE_READ(task, tgid);
	struct ev_comm *e;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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

/*
 * Block I/O, system-wide: writeback and readahead often run in kworkers or
 * other tasks, so filtering by traced pid here would lose them. A request is
 * attributed where it starts (block_io_start on 6.5+, else block_rq_insert,
 * else block_rq_issue for directly issued requests): that is the only point
 * in the submitter's context. Completion runs in interrupt context, so the
 * submitter travels with the request in blk_reqs.
 */
#define BLK_REQ_OF_STARTED 1

struct blk_req {
	u64 start;
	u64 issue;
	u64 cause_ts;
	u32 cause_idx;
	u32 pid;
	u32 tid;
	u16 flags;
	u16 _pad;
	char comm[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct blk_req);
} blk_reqs SEC(".maps");

/* True when requests are started by block_io_start (set by user space):
 * then a request first seen at issue was in flight before tracing. */
const volatile bool blk_have_io_start = false;

static __always_inline struct blk_req *blk_start(struct request *rq, u64 now, u16 extra, bool fast)
{
	u64 key = (u64)rq;
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct task_struct *task = (void *)bpf_get_current_task();
	struct blk_req v = {};
	struct inflight *inf;

	v.start = now;
	v.pid = tgid;
	v.tid = tid;
	v.flags = extra;
	bpf_get_current_comm(&v.comm, sizeof(v.comm));
	if (BPF_CORE_READ(task, flags) & PF_KTHREAD)
		v.flags |= BLK_KTHREAD;
	if (fast) {
		inf = state_of(bpf_get_current_task_btf());
		if (inf)
			v.flags |= BLK_TRACED;
		if (inf && inf->op == OP_NONE)
			inf = NULL;
	} else {
		inf = NULL;
		if (bpf_map_lookup_elem(&traced, &tgid)) {
			v.flags |= BLK_TRACED;
			inf = bpf_map_lookup_elem(&inflight, &tid);
		}
	}
	{
		/* Started inside a recorded syscall of this thread: link them. */
		if (inf) {
			v.cause_ts = inf->ts;
			v.cause_idx = inf->nblk;
			inf->nblk += 1;
		}
	}
	if (bpf_map_update_elem(&blk_reqs, &key, &v, BPF_ANY)) {
		count_lost(LOST_MAP);
		return NULL;
	}
	return bpf_map_lookup_elem(&blk_reqs, &key);
}

static __always_inline void blk_insert(struct request *rq, bool fast)
{
	u64 key = (u64)rq;

	if (!bpf_map_lookup_elem(&blk_reqs, &key))
		blk_start(rq, bpf_ktime_get_boot_ns(), 0, fast);
}

static __always_inline void blk_issue(struct request *rq, bool fast)
{
	u64 key = (u64)rq;
	u64 now = bpf_ktime_get_boot_ns();
	struct blk_req *v = bpf_map_lookup_elem(&blk_reqs, &key);

	if (!v)
		v = blk_start(rq, now, blk_have_io_start ? BLK_START_UNKNOWN : 0, fast);
	if (v)
		v->issue = now;
}

SEC("raw_tp/block_io_start")
int block_io_start(struct bpf_raw_tracepoint_args *ctx)
{
	blk_start((void *)ctx->args[0], bpf_ktime_get_boot_ns(), 0, false);
	return 0;
}

SEC("raw_tp/block_rq_insert")
int block_rq_insert(struct bpf_raw_tracepoint_args *ctx)
{
	blk_insert((void *)ctx->args[0], false);
	return 0;
}

SEC("raw_tp/block_rq_issue")
int block_rq_issue(struct bpf_raw_tracepoint_args *ctx)
{
	blk_issue((void *)ctx->args[0], false);
	return 0;
}

SEC("tp_btf/block_io_start")
int BPF_PROG(fast_block_io_start, struct request *rq)
{
	blk_start(rq, bpf_ktime_get_boot_ns(), 0, true);
	return 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(fast_block_rq_insert, struct request *rq)
{
	blk_insert(rq, true);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(fast_block_rq_issue, struct request *rq)
{
	blk_issue(rq, true);
	return 0;
}

static __always_inline u16 rq_flags(u32 f)
{
	u16 out = 0;

	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_SYNC) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_SYNC))))
		out |= RQF_SYNC;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_META) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_META))))
		out |= RQF_META;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_PRIO) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PRIO))))
		out |= RQF_PRIO;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_FUA) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_FUA))))
		out |= RQF_FUA;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_PREFLUSH) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH))))
		out |= RQF_PREFLUSH;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_RAHEAD) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_RAHEAD))))
		out |= RQF_RAHEAD;
	if (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_BACKGROUND) &&
	    (f & (1U << bpf_core_enum_value(enum req_flag_bits, __REQ_BACKGROUND))))
		out |= RQF_BACKGROUND;
	return out;
}

SEC("raw_tp/block_rq_complete")
int block_rq_complete(struct bpf_raw_tracepoint_args *ctx)
{
	struct request *rq = (void *)ctx->args[0];
	u64 key = (u64)rq;
	u32 nr_bytes = ctx->args[2];
	u64 now = bpf_ktime_get_boot_ns();
	struct blk_req *v = bpf_map_lookup_elem(&blk_reqs, &key);
	struct gendisk *disk;
	struct ev_block *e;
	u32 remaining = BPF_CORE_READ(rq, __data_len);
	u32 cmd = BPF_CORE_READ(rq, cmd_flags);
	bool final = nr_bytes >= remaining;

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
		if (final && v)
			bpf_map_delete_elem(&blk_reqs, &key);
		return 0;
	}
	if (bpf_core_field_exists(rq->rq_disk))
		disk = BPF_CORE_READ(rq, rq_disk);
	else
		disk = BPF_CORE_READ(rq, q, disk);
	e->h.kind = EV_BLOCK;
	e->h.op = 0;
	e->h._pad1 = 0;
	if (v) {
		e->h.ts = v->start;
		e->h.pid = v->pid;
		e->h.tid = v->tid;
		e->h.flags = v->flags;
		e->issue = v->issue;
		e->cause_ts = v->cause_ts;
		e->cause_idx = v->cause_idx;
		__builtin_memcpy(e->comm, v->comm, sizeof(e->comm));
		if (!v->issue)
			e->h.flags |= BLK_ISSUE_UNKNOWN;
	} else {
		e->h.ts = 0;
		e->h.pid = 0;
		e->h.tid = 0;
		e->h.flags = BLK_START_UNKNOWN | BLK_ISSUE_UNKNOWN;
		e->issue = 0;
		e->cause_ts = 0;
		e->cause_idx = 0;
		e->comm[0] = 0;
	}
	if (!final)
		e->h.flags |= BLK_PARTIAL;
	e->complete = now;
	e->sector = BPF_CORE_READ(rq, __sector);
	e->bytes = nr_bytes;
	e->dev = ((u32)BPF_CORE_READ(disk, major) << 20) | (u32)BPF_CORE_READ(disk, first_minor);
	e->error = (s32)(u8)ctx->args[1];
	e->op = cmd & 0xff;
	e->rq_flags = rq_flags(cmd);
	e->_pad = 0;
	e->_pad2 = 0;
	BPF_CORE_READ_STR_INTO(&e->disk, disk, disk_name);
	bpf_ringbuf_submit(e, wake_flags());
	if (final && v)
		bpf_map_delete_elem(&blk_reqs, &key);
	return 0;
}

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
 * The system call a thread going to sleep is in (its x86_64 number), or -1:
 * read from the registers saved at the top of its kernel stack. orig_ax is
 * the call's number, and ax still holds the -ENOSYS that the entry code
 * put there until the call returns; an exception (a page fault) saves an
 * error code in orig_ax and the user's ax instead, so it names no call.
 * Kernels with FRED (6.9+, when enabled) leave 16 bytes above the
 * registers: both places are tried. KASAN kernels (32 KiB stacks) match
 * neither and name no call.
 */
#define THREAD_SIZE (16 << 10)
#define ENOSYS 38

static __always_inline s16 regs_call(void *top)
{
	struct pt_regs *regs = top - bpf_core_type_size(struct pt_regs);
	unsigned long nr;

	if (BPF_CORE_READ(regs, ax) != (unsigned long)-ENOSYS)
		return -1;
	nr = BPF_CORE_READ(regs, orig_ax);
	return nr < MAX_SYSCALL_NR ? nr : -1;
}

static __always_inline s16 sleeping_call(struct task_struct *t)
{
	void *stack = BPF_CORE_READ(t, stack);
	s16 nr;

	if (!stack)
		return -1;
	nr = regs_call(stack + THREAD_SIZE);
	return nr >= 0 ? nr : regs_call(stack + THREAD_SIZE - 16);
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
	if (!rq || bpf_probe_read_kernel(&pc, sizeof(pc), rq + pc_delta))
		return WB_UNKNOWN;
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

static __always_inline void on_switch(bool preempt, struct task_struct *prev, struct task_struct *next, u8 traced)
{
	struct ev_sched *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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
	BPF_CORE_READ_STR_INTO(&e->comm, prev, comm);
	BPF_CORE_READ_STR_INTO(&e->other_comm, next, comm);
	bpf_ringbuf_submit(e, wake_flags());
}

/* A traced thread `p` woken by the running task (op SCHED_WAKING, to run on
 * p's CPU as the kernel has it then, as ftrace reports it), or moved to
 * `dest` (SCHED_MIGRATE). */
static __always_inline void on_wake(struct task_struct *p, u8 op, s32 dest, u8 traced)
{
	struct ev_sched *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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
#define NR_NANOSLEEP 35         /* x86_64, as sleeping_call reads them */
#define NR_CLOCK_NANOSLEEP 230

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
	struct ev_span *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

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
		if (a->st == SP_NONE)
			span_start(a, now, SP_RUNNING);
		else
			span_close(a, now);
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

/*
 * CUDA driver calls that make the host wait for the GPU (see ev_gpu), from
 * uprobes on libcuda that user space attaches to every copy of the library
 * it finds (for all processes: only traced ones are recorded here). One
 * small entry program per call, so that the call is known without an
 * attach cookie (bpf_get_attach_cookie is 5.15+); one return program for
 * all. A call the driver makes from inside another traced call (nested)
 * is part of the outer one: only the outermost is recorded.
 */
struct gpu_call {
	u64 ts;
	u64 stream;
	u64 bytes;
	u32 depth;  /* traced calls entered inside this one, not yet returned */
	u8 call;
	u8 _pad[3];
};

/* tid -> the call in progress. LRU: a thread killed inside a call never
 * returns from it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct gpu_call);
} gpu_calls SEC(".maps");

static __always_inline int gpu_enter(u8 call, u64 stream, u64 bytes)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct gpu_call v = {}, *cur;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	cur = bpf_map_lookup_elem(&gpu_calls, &tid);
	if (cur) {
		cur->depth++;
		return 0;
	}
	v.ts = bpf_ktime_get_boot_ns();
	v.stream = stream;
	v.bytes = bytes;
	v.call = call;
	if (bpf_map_update_elem(&gpu_calls, &tid, &v, BPF_ANY))
		count_lost(LOST_MAP);
	return 0;
}

/* A copy described by a struct (CUDA_MEMCPY2D_v2, CUDA_MEMCPY3D_v2): its
 * WidthInBytes, Height (and Depth) multiplied; 0 when unreadable. */
static __always_inline u64 copy_extent(const void *desc, u32 off, u32 n)
{
	u64 d[3] = {1, 1, 1};

	if (!desc || bpf_probe_read_user(d, n * sizeof(u64), (const char *)desc + off))
		return 0;
	return d[0] * d[1] * d[2];
}

SEC("uprobe")
int BPF_KPROBE(cu_stream_sync, u64 stream)
{
	return gpu_enter(GPU_STREAM_SYNC, stream, 0);
}

SEC("uprobe")
int BPF_KPROBE(cu_ctx_sync)
{
	return gpu_enter(GPU_CTX_SYNC, 0, 0);
}

SEC("uprobe")
int BPF_KPROBE(cu_event_sync, u64 event)
{
	return gpu_enter(GPU_EVENT_SYNC, event, 0);
}

/* The copies that take (dst, src, size): the _v2 entry points' size_t,
 * and the legacy (pre-CUDA 3.2) ones' unsigned int. */
#define GPU_COPY(name, call)							\
	SEC("uprobe")								\
	int BPF_KPROBE(name, u64 dst, u64 src, u64 n)				\
	{									\
		return gpu_enter(call, 0, n);					\
	}
#define GPU_COPY_V1(name, call)							\
	SEC("uprobe")								\
	int BPF_KPROBE(name, u64 dst, u64 src, u64 n)				\
	{									\
		return gpu_enter(call, 0, (u32)n);				\
	}

GPU_COPY(cu_memcpy, GPU_MEMCPY)
GPU_COPY(cu_memcpy_dtoh, GPU_MEMCPY_DTOH)
GPU_COPY(cu_memcpy_htod, GPU_MEMCPY_HTOD)
GPU_COPY(cu_memcpy_dtod, GPU_MEMCPY_DTOD)
GPU_COPY_V1(cu_memcpy_dtoh_v1, GPU_MEMCPY_DTOH)
GPU_COPY_V1(cu_memcpy_htod_v1, GPU_MEMCPY_HTOD)
GPU_COPY_V1(cu_memcpy_dtod_v1, GPU_MEMCPY_DTOD)

SEC("uprobe")
int BPF_KPROBE(cu_memcpy_peer, u64 dst, u64 dst_ctx, u64 src, u64 src_ctx, u64 n)
{
	return gpu_enter(GPU_MEMCPY_PEER, 0, n);
}

/* CUDA_MEMCPY2D_v2: WidthInBytes and Height at 112. */
SEC("uprobe")
int BPF_KPROBE(cu_memcpy_2d, const void *desc)
{
	return gpu_enter(GPU_MEMCPY_2D, 0, copy_extent(desc, 112, 2));
}

/* CUDA_MEMCPY3D_v2: WidthInBytes, Height and Depth at 176. */
SEC("uprobe")
int BPF_KPROBE(cu_memcpy_3d, const void *desc)
{
	return gpu_enter(GPU_MEMCPY_3D, 0, copy_extent(desc, 176, 3));
}

/* The legacy cuMemcpy2D and cuMemcpy3D (32-bit fields): size not read. */
SEC("uprobe")
int BPF_KPROBE(cu_memcpy_2d_v1)
{
	return gpu_enter(GPU_MEMCPY_2D, 0, 0);
}

SEC("uprobe")
int BPF_KPROBE(cu_memcpy_3d_v1)
{
	return gpu_enter(GPU_MEMCPY_3D, 0, 0);
}

SEC("uretprobe")
int BPF_KRETPROBE(cu_return, long rc)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	struct gpu_call *v = bpf_map_lookup_elem(&gpu_calls, &tid);
	struct ev_gpu *e;

	if (!v)
		return 0;
	if (v->depth) {
		v->depth--;
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
	} else {
		fill_hdr(&e->h, EV_GPU, v->call, id, v->ts);
		e->dur = bpf_ktime_get_boot_ns() - v->ts;
		e->stream = v->stream;
		e->bytes = v->bytes;
		e->ret = (s32)rc;
		e->_pad = 0;
		bpf_ringbuf_submit(e, wake_flags());
	}
	bpf_map_delete_elem(&gpu_calls, &tid);
	return 0;
}

/*
 * CUDA driver calls only counted (mltrace_log::GpuCounted's codes): the
 * queries, which return at once and come in polling loops, and kernel and
 * graph launches (10k-100k a second in launch-bound jobs; attached only
 * when asked for). Per process and call; user space reads the sums about
 * once a second. A call the driver makes inside a recorded one is part of
 * that one, as for gpu_enter.
 *
 * Not LRU: a sum evicted would be lost without a word; a full map counts
 * as lost (user space removes the processes that have exited). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct gpu_count_key);
	__type(value, u64);
} gpu_counts SEC(".maps");

static __always_inline int gpu_count(enum gpu_counted call)
{
	u64 id = bpf_get_current_pid_tgid(), one = 1, *n;
	struct gpu_count_key k = { .tgid = id >> 32, .call = call };
	u32 tid = (u32)id;

	if (!bpf_map_lookup_elem(&traced, &k.tgid) || bpf_map_lookup_elem(&gpu_calls, &tid))
		return 0;
	n = bpf_map_lookup_elem(&gpu_counts, &k);
	if (n) {
		__sync_fetch_and_add(n, 1);
		return 0;
	}
	if (!bpf_map_update_elem(&gpu_counts, &k, &one, BPF_NOEXIST))
		return 0;
	/* Another thread made it first, or the map is full. */
	n = bpf_map_lookup_elem(&gpu_counts, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		count_lost(LOST_MAP);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(cu_stream_query)
{
	return gpu_count(GPU_STREAM_QUERY);
}

SEC("uprobe")
int BPF_KPROBE(cu_event_query)
{
	return gpu_count(GPU_EVENT_QUERY);
}

SEC("uprobe")
int BPF_KPROBE(cu_launch_kernel)
{
	return gpu_count(GPU_LAUNCH_KERNEL);
}

SEC("uprobe")
int BPF_KPROBE(cu_graph_launch)
{
	return gpu_count(GPU_GRAPH_LAUNCH);
}

/*
 * NCCL calls (see ev_nccl), from uprobes on libnccl that user space
 * attaches like libcuda's: one entry program per call (no attach cookies),
 * one return program for all. The communicator's rank and size come from
 * the ncclCommInitRank* / ncclCommInitAll calls that created it, when they
 * were seen. Nested calls (NCCL calling its own exported entry points) are
 * part of the outer one.
 */
struct nccl_call {
	u64 ts;
	u64 count;
	u64 comm;
	u64 stream;
	s32 peer;
	u32 depth;
	u8 op;
	u8 datatype;
	u8 _pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, u32);
	__type(value, struct nccl_call);
} nccl_calls SEC(".maps");

/* A communicator of a process: comm pointers are per address space. */
struct nccl_comm_key {
	u64 comm;
	u32 tgid;
	u32 _pad;
};

struct nccl_rank {
	s32 rank;
	s32 nranks;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct nccl_comm_key);
	__type(value, struct nccl_rank);
} nccl_comms SEC(".maps");

/* A communicator being created: where its handle will be written. For
 * ncclCommInitAll `rank` is -1 and `nranks` the number of handles. */
struct nccl_init {
	u64 newcomm;
	s32 rank;
	s32 nranks;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct nccl_init);
} nccl_inits SEC(".maps");

static __always_inline int nccl_enter(u8 op, u64 count, u64 dt, u64 comm, u64 stream, s32 peer)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct nccl_call v = {}, *cur;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	cur = bpf_map_lookup_elem(&nccl_calls, &tid);
	if (cur) {
		cur->depth++;
		return 0;
	}
	v.ts = bpf_ktime_get_boot_ns();
	v.count = count;
	v.comm = comm;
	v.stream = stream;
	v.peer = peer;
	v.op = op;
	v.datatype = (u8)dt;
	if (bpf_map_update_elem(&nccl_calls, &tid, &v, BPF_ANY))
		count_lost(LOST_MAP);
	return 0;
}

/* The n-th (7 or more) argument of a call, at its entry: on the stack above
 * the return address (x86-64 SysV). 0 when unreadable. */
static __always_inline u64 stack_arg(struct pt_regs *ctx, u32 n)
{
	u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)(PT_REGS_SP(ctx) + 8 * (n - 6)));
	return v;
}

/* ncclAllReduce(send, recv, count, datatype, op, comm, stream) */
SEC("uprobe")
int nccl_all_reduce(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_ALL_REDUCE, PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx), PT_REGS_PARM6(ctx),
			  stack_arg(ctx, 7), -1);
}

/* ncclAllGather(send, recv, sendcount, datatype, comm, stream) */
SEC("uprobe")
int nccl_all_gather(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_ALL_GATHER, PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx),
			  PT_REGS_PARM6(ctx), -1);
}

/* ncclReduceScatter(send, recv, recvcount, datatype, op, comm, stream) */
SEC("uprobe")
int nccl_reduce_scatter(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_REDUCE_SCATTER, PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx), PT_REGS_PARM6(ctx),
			  stack_arg(ctx, 7), -1);
}

/* ncclBroadcast(send, recv, count, datatype, root, comm, stream) */
SEC("uprobe")
int nccl_broadcast(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_BROADCAST, PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx), PT_REGS_PARM6(ctx),
			  stack_arg(ctx, 7), (s32)PT_REGS_PARM5(ctx));
}

/* ncclReduce(send, recv, count, datatype, op, root, comm, stream) */
SEC("uprobe")
int nccl_reduce(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_REDUCE, PT_REGS_PARM3(ctx), PT_REGS_PARM4(ctx), stack_arg(ctx, 7),
			  stack_arg(ctx, 8), (s32)PT_REGS_PARM6(ctx));
}

/* ncclSend(send, count, datatype, peer, comm, stream); ncclRecv the same */
SEC("uprobe")
int nccl_send(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_SEND, PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx), PT_REGS_PARM5(ctx),
			  PT_REGS_PARM6(ctx), (s32)PT_REGS_PARM4(ctx));
}

SEC("uprobe")
int nccl_recv(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_RECV, PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx), PT_REGS_PARM5(ctx),
			  PT_REGS_PARM6(ctx), (s32)PT_REGS_PARM4(ctx));
}

SEC("uprobe")
int nccl_group_start(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_GROUP_START, 0, 0, 0, 0, -1);
}

SEC("uprobe")
int nccl_group_end(struct pt_regs *ctx)
{
	return nccl_enter(NCCL_GROUP_END, 0, 0, 0, 0, -1);
}

SEC("uretprobe")
int BPF_KRETPROBE(nccl_return, long rc)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	struct nccl_call *v = bpf_map_lookup_elem(&nccl_calls, &tid);
	struct nccl_comm_key k = {};
	struct nccl_rank *r;
	struct ev_nccl *e;

	if (!v)
		return 0;
	if (v->depth) {
		v->depth--;
		return 0;
	}
	k.comm = v->comm;
	k.tgid = id >> 32;
	r = v->comm ? bpf_map_lookup_elem(&nccl_comms, &k) : NULL;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_RING);
	} else {
		fill_hdr(&e->h, EV_NCCL, v->op, id, v->ts);
		e->dur = bpf_ktime_get_boot_ns() - v->ts;
		e->count = v->count;
		e->comm = v->comm;
		e->stream = v->stream;
		e->rank = r ? r->rank : -1;
		e->nranks = r ? r->nranks : 0;
		e->peer = v->peer;
		e->ret = (s32)rc;
		e->datatype = v->datatype;
		__builtin_memset(e->_pad, 0, sizeof(e->_pad));
		bpf_ringbuf_submit(e, wake_flags());
	}
	bpf_map_delete_elem(&nccl_calls, &tid);
	return 0;
}

static __always_inline int nccl_init_enter(u64 newcomm, s32 nranks, s32 rank)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct nccl_init v = {};

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	v.newcomm = newcomm;
	v.nranks = nranks;
	v.rank = rank;
	bpf_map_update_elem(&nccl_inits, &tid, &v, BPF_ANY);
	return 0;
}

/* ncclCommInitRank(ncclComm_t *newcomm, int nranks, ncclUniqueId id, int rank)
 * and ncclCommInitRankConfig(..., rank, ncclConfig_t *config): the 128-byte
 * ncclUniqueId goes on the stack, so rank is the third register argument. */
SEC("uprobe")
int nccl_comm_init_rank(struct pt_regs *ctx)
{
	return nccl_init_enter(PT_REGS_PARM1(ctx), (s32)PT_REGS_PARM2(ctx), (s32)PT_REGS_PARM3(ctx));
}

/* ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist): comms[i]
 * is rank i of ndev. */
SEC("uprobe")
int nccl_comm_init_all(struct pt_regs *ctx)
{
	return nccl_init_enter(PT_REGS_PARM1(ctx), (s32)PT_REGS_PARM2(ctx), -1);
}

#define NCCL_INIT_ALL_MAX 16

SEC("uretprobe")
int BPF_KRETPROBE(nccl_init_return, long rc)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = (u32)id;
	struct nccl_init *v = bpf_map_lookup_elem(&nccl_inits, &tid);
	struct nccl_comm_key k = {};
	struct nccl_rank r = {};
	u64 comm = 0;

	if (!v)
		return 0;
	k.tgid = id >> 32;
	if ((s32)rc == 0 && v->newcomm) {
		if (v->rank >= 0) {
			if (!bpf_probe_read_user(&comm, sizeof(comm), (const void *)v->newcomm) && comm) {
				k.comm = comm;
				r.rank = v->rank;
				r.nranks = v->nranks;
				bpf_map_update_elem(&nccl_comms, &k, &r, BPF_ANY);
			}
		} else {
			for (int i = 0; i < NCCL_INIT_ALL_MAX; i++) {
				if (i >= v->nranks)
					break;
				comm = 0;
				if (bpf_probe_read_user(&comm, sizeof(comm), (const void *)(v->newcomm + 8 * i)) || !comm)
					continue;
				k.comm = comm;
				r.rank = i;
				r.nranks = v->nranks;
				bpf_map_update_elem(&nccl_comms, &k, &r, BPF_ANY);
			}
		}
	}
	bpf_map_delete_elem(&nccl_inits, &tid);
	return 0;
}
