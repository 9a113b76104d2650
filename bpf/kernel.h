/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The few kernel types mltrace's BPF programs touch, declared by hand with
 * preserve_access_index so that libbpf relocates every field access against
 * the running kernel's BTF (CO-RE). Field order and padding here do not
 * matter; names do. Keeping this small (instead of a generated vmlinux.h)
 * keeps the build independent of bpftool and of the build machine's kernel.
 */
#ifndef MLTRACE_KERNEL_H
#define MLTRACE_KERNEL_H

#if !defined(__TARGET_ARCH_x86) && !defined(__TARGET_ARCH_arm64)
#error "mltrace's BPF programs support x86_64 and arm64 (pt_regs layouts below)"
#endif

/* Make bpf_tracing.h use the kernel's pt_regs field names. */
#define __VMLINUX_H__

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s16 s16;
typedef __s32 s32;
typedef __s64 s64;
typedef int pid_t;
typedef unsigned short umode_t;
typedef __u32 dev_t;
typedef long long loff_t;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_CGROUP_ARRAY = 8,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_ARRAY_OF_MAPS = 12,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
	BPF_F_NO_PREALLOC = 1,
	BPF_F_MMAPABLE = 1024,
};

enum {
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
};

enum {
	BPF_RB_AVAIL_DATA = 0,
};

struct bpf_raw_tracepoint_args {
	__u64 args[0];
};

#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
} __attribute__((preserve_access_index));

/* The number of the syscall a thread's saved registers are in. */
#define PT_REGS_SYSCALL_NR(r) ((r)->orig_ax)
#define PT_REGS_SYSCALL_NR_CORE(r) BPF_CORE_READ(r, orig_ax)
#else
/* arm64: bpf_tracing.h reads the arguments through user_pt_regs (regs[0]
 * is x0; a syscall's first argument is orig_x0, as x0 becomes its return
 * value). The entry code sets syscallno to -1 (NO_SYSCALL) on every entry
 * from user space that is not a syscall. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
} __attribute__((preserve_access_index));

struct pt_regs {
	__u64 orig_x0;
	__s32 syscallno;
} __attribute__((preserve_access_index));

#define PT_REGS_SYSCALL_NR(r) ((r)->syscallno)
#define PT_REGS_SYSCALL_NR_CORE(r) BPF_CORE_READ(r, syscallno)
#endif

typedef struct {
	int counter;
} atomic_t;

struct qstr {
	union {
		struct {
			u32 hash;
			u32 len;
		};
		u64 hash_len;
	};
	const unsigned char *name;
} __attribute__((preserve_access_index));

struct super_block {
	unsigned long s_magic;
	dev_t s_dev;
} __attribute__((preserve_access_index));

struct inode {
	umode_t i_mode;
	struct super_block *i_sb;
	unsigned long i_ino;
	dev_t i_rdev;
} __attribute__((preserve_access_index));

struct dentry {
	struct dentry *d_parent;
	struct qstr d_name;
	struct inode *d_inode;
} __attribute__((preserve_access_index));

struct vfsmount {
	struct dentry *mnt_root;
	struct super_block *mnt_sb;
} __attribute__((preserve_access_index));

struct mount {
	struct mount *mnt_parent;
	struct dentry *mnt_mountpoint;
	struct vfsmount mnt;
} __attribute__((preserve_access_index));

struct path {
	struct vfsmount *mnt;
	struct dentry *dentry;
} __attribute__((preserve_access_index));

struct file {
	struct path f_path;
	struct inode *f_inode;
	loff_t f_pos;
	unsigned int f_flags;
	void *private_data;
} __attribute__((preserve_access_index));

/* Sockets: the peer of a connected socket. */
struct in6_addr {
	__u8 s6_addr[16];
};

struct sock_common {
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct socket {
	struct sock *sk;
} __attribute__((preserve_access_index));

/* Only `len` is declared: `name` is an array in older kernels and a struct
 * in newer ones, so its offset is taken as the int after `len`. */
struct unix_address {
	int len;
} __attribute__((preserve_access_index));

struct unix_sock {
	struct unix_address *addr;
	struct sock *peer;
} __attribute__((preserve_access_index));

struct fdtable {
	unsigned int max_fds;
	struct file **fd;
} __attribute__((preserve_access_index));

/* Only for its first member: a way to load any 8 bytes as a number. */
struct rb_node {
	unsigned long __rb_parent_color;
} __attribute__((preserve_access_index));

struct files_struct {
	struct fdtable *fdt;
} __attribute__((preserve_access_index));

struct fs_struct {
	struct path root;
	struct path pwd;
} __attribute__((preserve_access_index));

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
	unsigned long saved_auxv[2];  /* AT_VECTOR_SIZE of them: (type, value) pairs */
	struct file *exe_file;
} __attribute__((preserve_access_index));

#define AT_ENTRY 9

struct signal_struct {
	atomic_t live;
} __attribute__((preserve_access_index));

/* CONFIG_TASK_XACCT keeps the first four, CONFIG_TASK_IO_ACCOUNTING the
 * struct itself: the programs check both with bpf_core_field_exists(). */
struct task_io_accounting {
	u64 rchar;
	u64 wchar;
	u64 syscr;
	u64 syscw;
	u64 read_bytes;
	u64 write_bytes;
	u64 cancelled_write_bytes;
} __attribute__((preserve_access_index));

/* x86's thread_info holds the task's CPU from 5.16 on (before, task_struct did);
 * arm64's also the task's preempt_count (its low half is the count). */
struct thread_info {
	u32 cpu;
#if defined(__TARGET_ARCH_arm64)
	u64 preempt_count;
#endif
} __attribute__((preserve_access_index));

typedef struct {
	u32 val;
} kuid_t;

typedef struct {
	u32 val;
} kgid_t;

struct cred {
	kuid_t uid;
	kgid_t gid;
	kuid_t suid;
	kgid_t sgid;
	kuid_t euid;
	kgid_t egid;
	kuid_t fsuid;
	kgid_t fsgid;
} __attribute__((preserve_access_index));

struct rq;

struct cfs_rq {
	struct rq *rq;          /* CONFIG_FAIR_GROUP_SCHED */
} __attribute__((preserve_access_index));

struct sched_entity {
	struct cfs_rq *cfs_rq;  /* CONFIG_FAIR_GROUP_SCHED */
	u64 sum_exec_runtime;
	u64 prev_sum_exec_runtime; /* sum_exec_runtime when it last got a CPU */
} __attribute__((preserve_access_index));

/* x86_64: the user's thread pointer, which is pthread_self(). arm64's
 * thread_struct has no fsbase (its thread pointer, uw.tp_value, is not
 * pthread_self()): bpf_core_field_exists() says so to python.bpf.h. */
struct thread_struct {
	unsigned long fsbase;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	struct thread_struct thread;
	void *stack;            /* the kernel stack: its pt_regs sit at the top */
	struct sched_entity se;
	unsigned int __state;   /* 5.14+; `state` before (task_struct___old) */
	unsigned int cpu;       /* before 5.16 */
	int prio;
	unsigned int flags;
	unsigned long min_flt;
	unsigned long maj_flt;
	struct task_io_accounting ioac;
	pid_t pid;
	pid_t tgid;
	int exit_code;
	char comm[16];
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	struct files_struct *files;
	struct fs_struct *fs;
	struct mm_struct *mm;
	struct signal_struct *signal;
	const struct cred *cred;
	u64 self_exec_id;       /* bumped by every exec */
} __attribute__((preserve_access_index));

/* A CPU's hrtimer state: in_hrtirq while hrtimer_interrupt expires timers. */
struct hrtimer_cpu_base___mt {
	unsigned int in_hrtirq : 1;
} __attribute__((preserve_access_index));

struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

struct linux_binprm {
	const char *filename;
} __attribute__((preserve_access_index));

#define PF_KTHREAD 0x00200000

/* Block layer. Enumerator values here are placeholders: the programs read
 * the running kernel's values with bpf_core_enum_value(). */
typedef u32 blk_opf_t;
typedef u64 sector_t;
typedef u8 blk_status_t;

enum req_flag_bits {
	__REQ_SYNC,
	__REQ_META,
	__REQ_PRIO,
	__REQ_FUA,
	__REQ_PREFLUSH,
	__REQ_RAHEAD,
	__REQ_BACKGROUND,
};

struct gendisk {
	int major;
	int first_minor;
	char disk_name[32];
} __attribute__((preserve_access_index));

struct request_queue {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct request {
	struct request_queue *q;
	struct gendisk *rq_disk; /* before 5.18; later via q->disk */
	blk_opf_t cmd_flags;
	unsigned int __data_len;
	sector_t __sector;
} __attribute__((preserve_access_index));

/* The filemap:mm_filemap_add_to_page_cache tracepoint's record (what
 * classic tracepoint programs get): the kernel computes these fields on
 * every version, so no folio internals are read here. `order` exists from
 * the kernels with large folios in the page cache on (5.17+); before, every
 * insertion is one page. */
struct trace_event_raw_mm_filemap_op_page_cache {
	unsigned long i_ino;
	unsigned long index;
	dev_t s_dev;
	unsigned char order;
} __attribute__((preserve_access_index));

/* io_uring (Linux 5.18+ for a request pointer in both tracepoints). Each
 * request's command data (struct io_rw for reads and writes) sits at the
 * start of struct io_kiocb, in a union with the file pointer. */
struct kiocb {
	struct file *ki_filp;
	loff_t ki_pos;
} __attribute__((preserve_access_index));

struct io_rw {
	struct kiocb kiocb;
	u64 addr;
	u32 len;  /* u64 before 5.18: the low half, on little-endian x86_64 */
} __attribute__((preserve_access_index));

struct io_cqe {
	u64 user_data;
	s32 res;
	union {
		u32 flags;
		int fd;  /* before completion: sqe->fd (5.19+) */
	};
} __attribute__((preserve_access_index));

struct io_kiocb {
	struct file *file;
	u8 opcode;
	struct io_cqe cqe;
} __attribute__((preserve_access_index));

/* The tracepoints' records (classic tracepoint programs get these). */
struct trace_event_raw_io_uring_submit_req {
	void *req;
	u8 opcode;
	unsigned long long flags;
	bool sq_thread;
} __attribute__((preserve_access_index));

/* The same tracepoint before 6.0 (5.18, 5.19: with a request pointer). */
struct trace_event_raw_io_uring_submit_sqe {
	void *req;
	u8 opcode;
	u32 flags;
	bool sq_thread;
} __attribute__((preserve_access_index));

struct trace_event_raw_io_uring_complete {
	void *req;
	int res;
	u64 user_data;
} __attribute__((preserve_access_index));

/* The filemap:mm_filemap_fault tracepoint's record (where it exists). */
struct trace_event_raw_mm_filemap_fault {
	unsigned long i_ino;
	dev_t s_dev;
	unsigned long index;
} __attribute__((preserve_access_index));

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
	struct file *vm_file;
} __attribute__((preserve_access_index));

/* Helper ids, only to ask whether the running kernel has one. */
enum bpf_func_id {
	BPF_FUNC_find_vma = 180,
};

/* User-space ABI structs (stable, no relocation needed). */
struct open_how {
	u64 flags;
	u64 mode;
	u64 resolve;
};

struct iovec {
	void *iov_base;
	u64 iov_len;
};

/* linux/aio_abi.h, x86_64 (little-endian: aio_key before aio_rw_flags). */
struct iocb {
	u64 aio_data;
	u32 aio_key;
	u32 aio_rw_flags;
	u16 aio_lio_opcode;
	__s16 aio_reqprio;
	u32 aio_fildes;
	u64 aio_buf;
	u64 aio_nbytes;
	s64 aio_offset;
	u64 aio_reserved2;
	u32 aio_flags;
	u32 aio_resfd;
};

struct io_event {
	u64 data;
	u64 obj;
	s64 res;
	s64 res2;
};

/* A perf_event program's context: the sample's registers (x86_64's 21;
 * arm64's user_pt_regs, 34), period and address. */
struct bpf_perf_event_data {
#if defined(__TARGET_ARCH_x86)
	unsigned long regs[21];
#else
	unsigned long regs[34];
#endif
	u64 sample_period;
	u64 addr;
};

/* A task iterator's context (sum_slots). */
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	u64 session_id;
	u64 seq_num;
} __attribute__((preserve_access_index));

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

#endif
