/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (one compilation unit: this file is included there,
 * after kernel.h, the libbpf headers and events.h, and before every other
 * header of mltrace/). What several of the programs share: the constants and
 * settings user space fills before load, every map defined before the
 * subsystems (the per-thread state and its struct tstate, the ring buffer,
 * the loss counters, the per-CPU scratch `heap`, the process and path
 * filters; anon_maps and fault_starts too, kept here so that the maps keep
 * their order in the object), and the keep_* variables that make the
 * skeleton generate the record types.
 */

#define AT_FDCWD -100
#define MAX_DEPTH 64
#define MAX_IOV 64
#define MAP_FIXED 0x10
#define MAP_ANONYMOUS 0x20

/* Set by user space before load. */
const volatile u8 sys_op[MAX_SYSCALL_NR] = {};

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

/* Added to after every change to `traced`: user space walks the map (all
 * of its 65,536 buckets) only when this moved since its last walk. */
u64 traced_changes = 0;

static __always_inline void traced_changed(void)
{
	__sync_fetch_and_add(&traced_changes, 1);
}

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
	u64 last_ident; /* inode (inode_ident): repeated I/O on it skips files_seen */
	u64 last_epoch; /* ... unless user space forgot files since (files_epoch) */
	u64 prev_file;  /* the one before (same epoch): a read-then-write loop */
	u64 prev_ident; /* alternates between two files */
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

/* record --detail summary: a thread's scheduling being summed (sched.bpf.h's spans). */
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
	u64 timed;     /* short timed sleeps (see sched.bpf.h) */
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

/* file identity -> its inode's inode_ident when its path was sent */
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

/* Records go to the ring of the CPU their program runs on: no lock shared
 * between CPUs on the hot path. User space creates the rings (sized from
 * --ring-size), puts them in place before attaching, and reads them merged
 * in the order of each record's key (crates/capture/src/ring.rs). */
struct cpu_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* set to the possible CPUs at load */
	__type(key, u32);
	__array(values, struct cpu_ring);
} cpu_rings SEC(".maps");

/* Non-zero while the consumer sleeps in epoll_wait after a first quiet
 * while (user space sets it through a mapping; the program that wakes the
 * consumer clears it): one wake-up a sleep. Asking for one on every record
 * once a ring held a bound made every record pay an interrupt while the
 * consumer ran behind (1.1 us a call on (b) with 64 KiB rings), and
 * querying the ring on every record kept one more value live in
 * fast_sys_exit, over 6.1's stack bound (docs/performance.md). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, u32);
} consumer_asleep SEC(".maps");

/* The key of one-value maps, kept off the programs' stacks: 6.1's
 * verifier counts each frame in 32-byte steps, and fast_sys_exit's (224
 * bytes) with the calls under it is at the 512 allowed. */
const volatile u32 key_zero = 0;

/* Each CPU's own index (user space fills it): the key of its ring's
 * look-up, without a slot on the stack (see key_zero). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} cpu_index SEC(".maps");

/* Each CPU's batch of records not yet sent (common.bpf.h, batch_room):
 * one reservation of its ring for up to BATCH_BYTES of records. Mapped by
 * user space, which reads each CPU's `oldest` to hold back what the batch
 * could precede, and runs flush_batch on a CPU whose batch goes stale. */
struct batch {
	u64 oldest; /* the merge key of its first record; 0 while empty */
	u32 len;    /* bytes in data, the batch_hdr included; 0 while empty */
	u32 busy;   /* who is adding to it or sending it (rec_room), 0: none */
	u32 count;  /* records in it */
	u32 _line[11]; /* user space reads `oldest` of every CPU: a line each */
	u8 data[BATCH_BYTES + BATCHED_MAX + 8]; /* used up to BATCH_BYTES; the
						 * rest lets the verifier see a
						 * bounded offset plus a bounded
						 * size fit */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* set to the possible CPUs at load */
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, u32);
	__type(value, struct batch);
} batches SEC(".maps");

/* Set by user space once flush_batch has run: records go into batches. */
u32 batch_on = 0;

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
	u32 stack;    /* the call's Python stack, for those handlers: found
		       * there, it would take them past 512 bytes of stack */
	u32 _pad_stack;
	char walk[2 * PATHBUF];
	struct ev_file file;
	struct ev_open open;
	struct ev_exec exec;
	u64 rec[32];  /* a call's record (or a summary's slot) when its CPU's
		       * batch cannot take it (common.bpf.h, rec_room) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct heap);
} heap SEC(".maps");

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
struct ev_map keep_map = {};
struct ev_fault keep_fault = {};
struct ev_untraced keep_untraced = {};
struct ev_pyprobe keep_pyprobe = {};
struct ev_pystack keep_pystack = {};
struct ev_pycode keep_pycode = {};
struct py_layout keep_py_layout = {};
struct py_bin keep_py_bin = {};
struct py_bin_key keep_py_bin_key = {};
enum py_probe_op keep_py_probe_op = 0;
enum py_state keep_py_state = 0;
enum py_model keep_py_model = 0;
enum py_bits keep_py_bits = 0;
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
