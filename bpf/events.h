/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Records the BPF programs put in the ring buffer. User space gets these
 * layouts from the generated skeleton (see the `keep_*` globals in
 * bpf/mltrace/maps.bpf.h), so the two sides cannot drift apart.
 *
 * Hot records (io, close, xfer) are fixed-size and reserved directly in the
 * ring; records with strings are built in a per-CPU buffer and copied with
 * their real length.
 */
#ifndef MLTRACE_EVENTS_H
#define MLTRACE_EVENTS_H

#define PATHBUF 4096   /* PATH_MAX: a passed path never needs more */
#define ARGVBUF 4096
#define MAX_SYSCALL_NR 512
/* A sleeping thread's call (ev_sched.prev_call, a span's call) that is no
 * syscall number: a futex on its process's Python GIL. */
#define CALL_GIL 1024

/*
 * A record's kind, one code in the ring and in the log: EV_KIND(EV_X, n)
 * beside its handler, n being the log kind's code (mltrace_log's
 * `Kind::CODE`, the kind's declaration in record.rs). Kinds only the
 * ring has (a file's name, a question to user space) take 64 and up, past
 * every log kind. User space registers a decoder under each code
 * (crates/capture/src/decode/), and a test holds the two sides equal.
 */
#define EV_KIND(name, code) enum { name = code }

/* What a traced syscall is; user space fills sys_op[] from its own
 * syscall numbers, so the BPF code never hard-codes an architecture's table. */
enum op {
	OP_NONE = 0,
	OP_READ, OP_PREAD64, OP_READV, OP_PREADV, OP_PREADV2,
	OP_WRITE, OP_PWRITE64, OP_WRITEV, OP_PWRITEV, OP_PWRITEV2,
	OP_OPEN, OP_OPENAT, OP_OPENAT2, OP_CREAT,
	OP_CLOSE,
	OP_SENDFILE, OP_COPY_FILE_RANGE,
	OP_FSYNC, OP_FDATASYNC, OP_SYNC_FILE_RANGE,
	OP_IO_SUBMIT, OP_IO_GETEVENTS, OP_IO_PGETEVENTS,
	OP_MMAP, OP_MUNMAP, OP_MREMAP,
	OP_SENDTO, OP_RECVFROM, OP_SENDMSG, OP_RECVMSG, OP_SENDMMSG, OP_RECVMMSG,
	/* Metadata calls (meta.bpf.h): getdents64 first, then those taking one
	 * path, then rename and its kin (two). */
	OP_GETDENTS64,
	OP_STAT, OP_LSTAT, OP_NEWFSTATAT, OP_STATX,
	OP_ACCESS, OP_FACCESSAT, OP_FACCESSAT2, OP_READLINK, OP_READLINKAT,
	OP_UNLINK, OP_UNLINKAT, OP_MKDIR, OP_MKDIRAT, OP_RMDIR,
	OP_RENAME, OP_RENAMEAT, OP_RENAMEAT2,
	/* setuid() and its kin: not recorded, but a recorder that is not root
	 * looks at the credentials they leave. */
	OP_SETID,
	OP__COUNT,
};

/*
 * Records batched per CPU (common.bpf.h): one ring record holding several,
 * each behind an 8-byte header like the ring's own (its length, 4 bytes
 * unused) and 8-byte aligned. It starts with a batch_hdr whose kind,
 * RING_BATCH, no record kind takes (crates/capture/src/ring.rs splits it).
 */
enum ring_batch {
	RING_BATCH = 255,
	BATCH_BYTES = 4096, /* a batch sends less at once, its header included */
	BATCHED_MAX = 1024, /* a larger record (an open with long paths) goes straight */
};

struct batch_hdr {
	u8 kind;
	u8 _pad[3];
	u32 count;
};

/* Drop counters, indexed like mltrace_log::LostKind. */
enum lost {
	LOST_RING = 1,
	LOST_MAP = 2,
	LOST_STR = 3,
	LOST__COUNT = 8,
};

/* ev_open.trunc / ev_file.flags / ev_exec.trunc bits; an enum so that the skeleton carries it to user space */
enum str_bits {
	TR_ARG = 1, /* passed string / argv cut */
	TR_ABS = 2, /* resolved path cut (too long or too deep) */
	TR_UNREADABLE = 4, /* string could not be read */
	F_DISCONNECTED = 8, /* path is a lone dentry name (pipe, socket, memfd...) */
	F_BASE = 16, /* ev_file describes a directory used as a base */
	F_PASSED = 32, /* ev_open: the passed absolute path names the file (no walk) */
};

/* ev_hdr.flags; an enum so that the skeleton carries it to user space */
enum io_bits {
	IOF_FILEPOS = 1, /* offset is the file position, not an argument */
	IOF_REQ_PARTIAL = 2, /* more iovecs than summed: requested is a lower bound */
	IOF_NO_OFFSET = 4, /* the call has no offset (fsync) */
	IOF_SUMMED = 8, /* record --detail summary: also counted in io_sums */
};

struct ev_hdr {
	u8 kind;
	u8 op;
	u16 flags;
	u32 pid;
	u32 tid;
	u32 stack; /* a call's Python stack (ev_pystack.id), 0 when none */
	u64 ts;    /* CLOCK_BOOTTIME ns at syscall entry */
};

struct ev_io {
	struct ev_hdr h;
	u64 dur;
	u64 file;  /* identity of the struct file, see ev_file */
	u64 offset;
	u64 requested;
	s64 ret;
	s32 fd;
	u32 nblk;  /* block requests this call started (see ev_block.cause_*) */
};

struct ev_close {
	struct ev_hdr h;
	u64 dur;
	u64 file;
	s64 ret;
	s32 fd;
	u32 _pad;
};

struct ev_xfer {
	struct ev_hdr h;
	u64 dur;
	u64 in_file;
	u64 out_file;
	u64 requested;
	s64 ret;
	s32 in_fd;
	s32 out_fd;
	u32 nblk;
	u32 _pad;
};

/* Names a file identity (a struct file, or a cwd directory) the first time
 * it is used, so hot records carry only the 8-byte key. */
struct ev_file {
	struct ev_hdr h;
	u64 key;
	u64 ino;
	u64 magic;   /* super_block s_magic: tells pipefs, sockfs, anon inodes... */
	u32 dev;
	u32 rdev;
	u16 mode;
	u16 path_len;
	u8 flags;
	u8 _pad[3];
	char path[PATHBUF];
};

/* An open. When `named`, it also names the file it opened, as an ev_file
 * would (ino...fflags, and the resolved path after the passed one): one
 * record per open instead of two. */
struct ev_open {
	struct ev_hdr h;
	u64 dur;
	u64 file;    /* key of the opened file (0 on failure) */
	u64 base;    /* key of the dirfd/cwd directory, for failed relative opens */
	s64 ret;
	u64 flags;
	u32 mode;
	s32 dirfd;
	u16 path_len;
	u8 trunc;
	u8 named;
	u32 nblk;
	u64 ino;
	u64 magic;
	u32 dev;
	u32 rdev;
	u16 fmode;
	u16 abs_len;
	u8 fflags;
	u8 _pad[3];
	char path[2 * PATHBUF];  /* passed path, then (named) the resolved one */
};

/* ev_ioac.have; an enum so that the skeleton carries it to user space */
enum ioac_bits {
	IOAC_CHARS = 1, /* rchar, wchar, syscr, syscw */
	IOAC_BYTES = 2, /* read_bytes, write_bytes, cancelled_write_bytes */
};

/* A thread's task_struct->ioac (what /proc/PID/task/TID/io shows). */
struct ev_ioac {
	u64 rchar;
	u64 wchar;
	u64 syscr;
	u64 syscw;
	u64 read_bytes;
	u64 write_bytes;
	u64 cancelled_write_bytes;
	u8 have;
	u8 _pad[7];
};

struct ev_fork {
	struct ev_hdr h;     /* pid/tid: the new task */
	u32 parent_pid;
	u32 parent_tid;
	u8 thread;
	u8 _pad[7];
};

struct ev_exec {
	struct ev_hdr h;
	struct ev_ioac ioac;  /* after the new program was loaded */
	u16 filename_len;
	u16 argv_len;
	u8 trunc;
	u8 _pad[3];
	char data[PATHBUF + ARGVBUF];  /* filename, then argv (NUL-separated) */
};

struct ev_exit {
	struct ev_hdr h;
	s32 status;
	u8 group_dead;
	u8 _pad[3];
	struct ev_ioac ioac;  /* the thread's final counts */
};

struct ev_comm {
	struct ev_hdr h;
	char comm[16];
};

/* Pages a traced thread brought into the page cache (filemap:
 * mm_filemap_add_to_page_cache fires in the task that caused it: a read,
 * a fault on a mapping, readahead). h.op: the recorded syscall in
 * progress (OP_NONE outside one: a page fault, an untraced call). */
struct ev_pcache {
	struct ev_hdr h;
	u64 ino;
	u64 index;  /* first page */
	u32 dev;    /* the superblock's s_dev: major << 20 | minor */
	u32 pages;  /* 1 << order */
};

/* ev_map.h.flags; an enum so that the skeleton carries it to user space */
enum map_bits {
	MAPF_ANON_SUMMARY = 1, /* not a call: the process's anonymous mmaps so far (ret calls, len bytes) */
};

/* mmap (of a file, or anonymous with MAP_FIXED: it replaces what was
 * there), munmap, mremap; h.op says which. Anonymous mmaps are only
 * counted (anon_maps), and sent as one summary at the process's exit. */
struct ev_map {
	struct ev_hdr h;
	u64 dur;
	u64 file;    /* mmap: identity of the mapped file (see ev_file), 0 for none */
	u64 ino;
	u64 magic;   /* the file's super_block s_magic: tells tmpfs and shmem */
	u64 addr;    /* mmap: the address asked for; munmap, mremap: the (old) address */
	u64 len;     /* mmap, munmap: length; mremap: old length */
	u64 new_len; /* mremap */
	u64 offset;  /* mmap: offset in the file */
	s64 ret;
	u32 dev;     /* the file's super_block s_dev */
	u32 prot;
	u32 flags;   /* MAP_* or MREMAP_* */
	s32 fd;
};

/* A major page fault of a traced thread (perf's PAGE_FAULTS_MAJ software
 * event, which fires when the fault is done). When filemap:mm_filemap_fault
 * saw this fault begin, start/dev/ino/index say when and which page. */
struct ev_fault {
	struct ev_hdr h;  /* h.ts: when the fault ended */
	u64 addr;
	u64 start;        /* 0: not known */
	u64 ino;
	u64 index;        /* page index in the file */
	u32 dev;
	u32 _pad;
};

/* ev_block.h.flags; an enum so that the skeleton carries it to user space */
enum blk_bits {
	BLK_TRACED = 1, /* started in a traced process */
	BLK_KTHREAD = 2, /* started in a kernel thread */
	BLK_START_UNKNOWN = 4, /* in flight before tracing began */
	BLK_ISSUE_UNKNOWN = 8,
	BLK_PARTIAL = 16, /* a partial completion; more follow */
};
/* ev_block.rq_flags: the kernel's REQ_* bits, normalised; an enum so that the skeleton carries it to user space */
enum rq_bits {
	RQF_SYNC = 1,
	RQF_META = 2,
	RQF_PRIO = 4,
	RQF_FUA = 8,
	RQF_PREFLUSH = 16,
	RQF_RAHEAD = 32,
	RQF_BACKGROUND = 64,
};

/* One block request completion. h.ts: when the request started (in the
 * submitter's context: h.pid/h.tid/comm are the submitter). */
struct ev_block {
	struct ev_hdr h;
	u64 issue;
	u64 complete;
	u64 sector;
	u64 cause_ts;   /* entry time of the traced syscall that started it, 0 if none */
	u32 cause_idx;  /* which of that syscall's requests */
	u32 bytes;      /* bytes this completion covers */
	u32 dev;        /* disk major << 20 | first minor */
	s32 error;      /* blk_status_t */
	u8 op;          /* REQ_OP_* */
	u8 _pad;
	u16 rq_flags;   /* RQF_* */
	u32 _pad2;
	char comm[16];
	char disk[32];
};

/* ev_uring.h.flags; an enum so that the skeleton carries it to user space */
enum uring_bits {
	URF_FIXED_FILE = 1, /* IOSQE_FIXED_FILE: fd is an index into the registered files */
	URF_SQPOLL = 2, /* submitted by the ring's SQPOLL thread */
	URF_FILEPOS = 4, /* offset -1: the file position (read back at completion) */
	URF_NO_OFFSET = 8, /* no offset known (a stream, or position unreadable) */
	URF_REQ_PARTIAL = 16, /* more iovecs than summed: requested is a lower bound */
	URF_BUF_SELECT = 32, /* the kernel picks a provided buffer: requested is its limit */
};

/* One io_uring read/write request of a traced process, from submission
 * (io_uring_submit_req, in the submitting thread) to completion
 * (io_uring_complete, in whatever task completes it). h.op: IORING_OP_*;
 * h.pid/h.tid: the submitter; h.ts: submission. */
struct ev_uring {
	struct ev_hdr h;
	u64 dur;
	u64 file;
	u64 offset;
	u64 requested;
	u64 user_data;
	s64 ret;            /* the completion's res: bytes or -errno */
	s32 fd;             /* sqe->fd (a registered-file index with URF_FIXED_FILE) */
	u32 complete_tid;   /* the thread the completion ran in */
};

/* libaio: io_submit / io_getevents / io_pgetevents. h.op: OP_IO_*;
 * h.flags: IOF_REQ_PARTIAL when more iocbs or events than summed. */
struct ev_aio {
	struct ev_hdr h;
	u64 dur;
	u64 ctx;        /* aio_context_t */
	u64 file;       /* the first iocb's file */
	u64 offset;     /* the first iocb's aio_offset */
	u64 read_bytes; /* submit: aio_nbytes of the pread iocbs; getevents: res > 0 of their events */
	u64 write_bytes; /* the same for pwrite iocbs */
	s64 ret;
	s64 nr;         /* iocbs passed / most events wanted */
	s64 min_nr;     /* getevents: fewest events wanted */
	s32 fd;         /* the first iocb's aio_fildes, -1 if unread */
	u16 counted;    /* iocbs or events summed */
	u16 errors;     /* getevents: summed events with res < 0 */
	u16 aio_op;     /* the first iocb's aio_lio_opcode */
	u16 _pad;
	u32 nblk;
};

/* ev_sched.h.op; an enum so that the skeleton carries it to user space */
enum sched_op {
	SCHED_SWITCH = 1,
	SCHED_WAKING = 2,
	SCHED_MIGRATE = 3,
};
/* ev_sched.state: how prev left the CPU (mltrace_log::SchedState); an enum so that the skeleton carries it to user space */
enum sched_state {
	SS_RUNNABLE = 0,
	SS_SLEEPING = 1,
	SS_UNINTERRUPTIBLE = 2,
	SS_STOPPED = 3,
	SS_DEAD = 4,
	SS_OTHER = 5,
};
/* ev_sched.state of a SCHED_WAKING: what raised the wake-up
 * (mltrace_log::WakeBy); an enum so that the skeleton carries it to user space */
enum wake_by {
	WB_TASK = 0,     /* the running task (other_*) */
	WB_TIMER = 1,    /* a timer expiring in hardirq (hrtimer_interrupt) */
	WB_HARDIRQ = 2,  /* another hard interrupt: a device */
	WB_SOFTIRQ = 3,  /* a softirq: network, block completions, timer wheel */
	WB_UNKNOWN = 4,  /* preempt_count could not be found or read */
};
/* ev_sched.traced (mltrace_log::sched bits); an enum so that the skeleton carries it to user space */
enum sched_traced {
	ST_SELF = 1, /* h.pid/h.tid is traced (always, except a switch in) */
	ST_OTHER = 2, /* other_* is traced */
};

/*
 * Scheduling of traced threads, fixed-size (these are frequent).
 * SCHED_SWITCH: h = prev, other = next, on CPU `cpu`; prev_call = the
 *   system call prev sleeps in (x86_64 number), -1 when none or not asleep.
 * SCHED_WAKING: h = the woken thread, other = the waker (the running task;
 *   0 when state, a wake_by, says an interrupt raised it), cpu = the
 *   waker's CPU, target_cpu = where the woken thread is queued.
 * SCHED_MIGRATE: h = the moved thread, other = the task moving it,
 *   cpu -> target_cpu.
 */
struct ev_sched {
	struct ev_hdr h;
	u32 other_pid;
	u32 other_tid;
	u32 cpu;
	u32 target_cpu;
	s32 prio;
	s32 other_prio;
	u8 state;
	u8 traced;
	s16 prev_call;
	u32 ran_us; /* switch: µs the traced prev ran since it got this CPU, or 0 */
	char comm[16];
	char other_comm[16];
};

/*
 * record --detail summary: the io_sums map's key and value. Calls are
 * summed per thread, operation (enum op), second of boot time they ended
 * in, and file: a regular file by its inode alone (`file` 0), because a
 * loader that opens, reads and closes one file after another gets the
 * same struct file address back for each, and every open of a file is
 * the same file; anything else (pipes, sockets) by its struct file too.
 */
#define SUM_BUCKETS 21
struct io_sum_key {
	u32 tgid;
	u32 op;
	u64 sec;   /* the second of boot time the call ended in, its low 24 bits */
	u64 file;
	u64 ino;
	u32 dev;
	u32 exec;  /* the task's self_exec_id: calls before and after an exec apart */
	u32 tid;   /* per thread: the verdict tells loader threads by their reads */
	u32 stack; /* record --py-stacks on: the Python stack's id (0: none) */
};

struct io_sum {
	u64 calls;
	u64 bytes;   /* moved by the successful ones */
	u64 ns;      /* their latencies summed */
	u64 failed;
	/* Latencies, log2: [0] under 1,024 ns, [i] 2^(i+9) to 2^(i+10) ns,
	 * [20] 2^29 ns (0.54 s) and over (mltrace_log::IoSummary's h0-h20). */
	u32 hist[SUM_BUCKETS];
};

/*
 * On the fast and per-call routes each thread sums in its own state, one
 * slot per kind of operation (reads, writes, syncs, closes): no map update
 * per call. A slot is sent (as an EV_SUM record, this very struct) when its
 * thread's next call of that kind is on another file or in another second,
 * and when the thread exits; user space reads the slots of idle threads
 * with the sum_slots iterator once their second has ended. `seq` tells one
 * filling of a slot from the next (user space takes each once): odd while
 * the thread replaces the slot's key.
 */
#define SUM_SLOTS 4
struct sum_slot {
	struct ev_hdr h;
	u32 slot;
	u32 seq;
	struct io_sum_key key;
	struct io_sum sum;
};

/* A traced process became another user or group (the recorder is not
 * root): it is no longer traced from h.ts, nor what it starts. h.op:
 * OP_NONE for an exec of a setuid or setgid program (path: the program),
 * OP_SETID for setuid() and its kin (nr: the syscall). */
struct ev_untraced {
	struct ev_hdr h;
	u32 uid, euid, gid, egid;   /* its credentials now */
	u32 nr;
	u16 path_len;
	u8 _pad[2];
	char comm[16];
	char path[256];
};

/*
 * Python stacks (python.bpf.h). User space fills a py_layout per traced
 * Python process, when asked by an ev_pyprobe: where its runtime is and
 * the offsets of the interpreter's structures that the walk reads.
 */
#define PY_DEPTH 32
#define PY_STR 256
#define PY_LINES 8192
/* Bytes of a frame the walk reads at once: f_back, f_code, f_instr and
 * f_owner lie in them (8-byte aligned, the owner a byte), in every version. */
#define PY_FRAME_READ 128

enum py_state {
	PY_PENDING = 0,  /* asked user space; asked again after PY_REASK_NS */
	PY_READY = 1,    /* layout filled: walk */
	PY_NO = 2,       /* not Python, or an interpreter the walk cannot read */
};

enum py_model {
	PYM_FRAMEOBJ = 1,  /* 3.9, 3.10: PyFrameObject chain, f_lasti an int */
	PYM_CFRAME = 2,    /* 3.11, 3.12: tstate->cframe->current_frame */
	PYM_IFRAME = 3,    /* 3.13+: tstate->current_frame, f_executable tagged */
};

enum py_bits {
	PYB_NATIVE_TID = 1,   /* ts_tid is native_thread_id (the kernel tid); else pthread_self */
	PYB_INSTR_PTR = 2,    /* f_instr is a pointer into the code (3.11+); else an int */
	PYB_TRUNCATED = 4,    /* ev_pystack: deeper than PY_DEPTH */
	PYB_QUAL_CUT = 8,     /* ev_pycode: a string or the line table was cut */
};

struct py_layout {
	u64 runtime;        /* address of _PyRuntime */
	u64 asked;          /* PY_PENDING: when user space was last asked */
	u8 state;           /* enum py_state */
	u8 model;           /* enum py_model */
	u16 bits;           /* enum py_bits */
	u32 gen;            /* set per program run (exec): keys its stacks and codes */
	u16 rt_interp;      /* _PyRuntime.interpreters.head */
	u16 is_threads;     /* PyInterpreterState: first thread state */
	u16 ts_next;        /* PyThreadState.next */
	u16 ts_tid;         /* PyThreadState: native_thread_id or thread_id */
	u16 ts_frame;       /* PyThreadState: frame (3.9/3.10), cframe (3.11/3.12), current_frame */
	u16 cf_current;     /* _PyCFrame.current_frame (PYM_CFRAME) */
	u16 f_back;         /* the caller's frame: f_back, previous */
	u16 f_code;         /* f_code, f_executable */
	u16 f_instr;        /* f_lasti, prev_instr, instr_ptr */
	u16 f_owner;        /* owner (a byte); 0xffff: none */
	u16 co_name;        /* co_qualname (3.11+) or co_name */
	u16 co_file;        /* co_filename */
	u16 co_lines;       /* co_linetable or co_lnotab (a bytes object) */
	u16 co_first;       /* co_firstlineno (an int) */
	u16 u_state;        /* PyASCIIObject.state */
	u16 u_length;       /* PyASCIIObject.length */
	u16 u_ascii_size;   /* sizeof(PyASCIIObject): an ASCII string's data */
	u16 u_compact_size; /* sizeof(PyCompactUnicodeObject): a compact one's */
	u16 b_size;         /* PyVarObject.ob_size of a bytes object */
	u16 b_data;         /* PyBytesObject.ob_sval */
	u16 f_globals;      /* the frame's globals (its module's): part of its identity */
	u16 gil_size;       /* sizeof(struct _gil_runtime_state) */
	u32 gil_off;        /* the main interpreter's GIL less runtime */
};

/* An interpreter's file that user space has read once: its layout with
 * `runtime` the distance from where the file is loaded, so that another
 * process running it (an exec'd worker) is walked from its first call
 * after the file is mapped, without waiting for user space. */
struct py_bin_key {
	u64 ino;
	u32 dev;   /* the superblock's s_dev */
	u32 _pad;
};

struct py_bin {
	struct py_layout layout;
	u64 map_delta;    /* _PyRuntime less the address its file's offset 0 is mapped at */
	u64 entry_delta;  /* _PyRuntime less the entry point (AT_ENTRY): the executable's */
	u8 in_exe;        /* _PyRuntime is in the executable, not a library */
	u8 _pad[7];
};

/* h.op of ev_pyprobe: asked (user space decides), or adopted (the kernel
 * side found the process's interpreter in py_bins: `ino`, `dev`). */
enum py_probe_op {
	PYP_ASK = 0,
	PYP_ADOPTED = 1,
};

/* Sent once per process when it first makes a recorded call, and again
 * every PY_REASK_NS while user space has not decided; h.stack is the
 * py_layout's gen (the program run asked about). */
struct ev_pyprobe {
	struct ev_hdr h;
	u64 ino;
	u32 dev;
	u32 _pad;
};

/* One frame as read, raw: user space leaves out the frames that are not
 * the program's (no code object, or owned by the C stack or the
 * interpreter), so that the walk has no branch the verifier must follow. */
struct py_frame {
	u64 code;   /* f_code or f_executable (its low 3 bits cleared: 3.14 tags them) */
	u64 instr;  /* the 8 bytes at f_instr: f_lasti in the low 4, or the instruction pointer */
	u64 ident;  /* the code's line table object, its own, read for a new stack: a
		     * code object freed and another made at its address (a module's,
		     * after its import) is told apart by it, not by its name (every
		     * module's is one object) */
	u8 owner;   /* the byte at f_owner (meaningless without one) */
	u8 _pad[7];
};

/* A stack seen for the first time in its process: h.stack is its id,
 * frames innermost first (PY_DEPTH of them at most, skipped ones included). */
struct ev_pystack {
	struct ev_hdr h;
	u16 depth;
	u16 bits;  /* PYB_TRUNCATED */
	u32 _pad;
	struct py_frame frames[PY_DEPTH];
};

/* A code object seen for the first time in its process: its names and
 * line table, read here so that a process that has exited is still named. */
struct ev_pycode {
	struct ev_hdr h;
	u64 code;
	s32 first_line;
	u16 name_len;     /* bytes of the name, at data[0] */
	u16 file_len;     /* of the file name, at data[PY_STR] */
	u16 lines_len;    /* of the line table, at data[2 * PY_STR] */
	u8 name_kind;     /* PyUnicode kind: 1, 2 or 4 bytes a character */
	u8 file_kind;
	u8 bits;          /* PYB_QUAL_CUT */
	u8 _pad[7];
	char data[2 * PY_STR + PY_LINES];
};

#endif
