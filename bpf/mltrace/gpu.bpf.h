/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (included last). The uprobes user space attaches to
 * libcuda (calls that wait for the GPU, copies, counted launches and
 * queries) and to libnccl (collectives, point-to-point, groups, and the
 * communicator inits that give their ranks).
 */

EV_KIND(EV_GPU, 24);  /* mltrace_log::GpuCall */
EV_KIND(EV_NCCL, 25);  /* mltrace_log::Collective */

/* A CUDA driver call of a traced thread, from a uprobe at its entry to a
 * uretprobe at its return. h.op is the call, in mltrace_log::GpuApi's codes;
 * h.ts the entry. */
enum gpu_api {
	GPU_STREAM_SYNC = 0,
	GPU_CTX_SYNC = 1,
	GPU_EVENT_SYNC = 2,
	GPU_MEMCPY = 8,
	GPU_MEMCPY_DTOH = 9,
	GPU_MEMCPY_HTOD = 10,
	GPU_MEMCPY_DTOD = 11,
	GPU_MEMCPY_PEER = 12,
	GPU_MEMCPY_2D = 13,
	GPU_MEMCPY_3D = 14,
};

/* A CUDA driver call only counted, in mltrace_log::GpuCounted's codes. */
enum gpu_counted {
	GPU_STREAM_QUERY = 0,
	GPU_EVENT_QUERY = 1,
	GPU_LAUNCH_KERNEL = 8,
	GPU_GRAPH_LAUNCH = 9,
};

/* The gpu_counts map's key (its value: the calls so far, a u64). */
struct gpu_count_key {
	u32 tgid;
	enum gpu_counted call;
};

struct ev_gpu {
	struct ev_hdr h;
	u64 dur;
	u64 stream;  /* the CUstream waited on; for cuEventSynchronize the CUevent */
	u64 bytes;   /* a copy's size */
	s32 ret;     /* the CUresult */
	u32 _pad;
};

/* An NCCL call of a traced thread, from a uprobe at its entry to a
 * uretprobe at its return (it enqueues on the stream and returns). h.op is
 * the call, in mltrace_log::NcclOp's codes; h.ts the entry. */
enum nccl_api {
	NCCL_ALL_REDUCE = 0,
	NCCL_ALL_GATHER = 1,
	NCCL_REDUCE_SCATTER = 2,
	NCCL_BROADCAST = 3,
	NCCL_REDUCE = 4,
	NCCL_SEND = 5,
	NCCL_RECV = 6,
	NCCL_GROUP_START = 16,
	NCCL_GROUP_END = 17,
};

struct ev_nccl {
	struct ev_hdr h;
	u64 dur;
	u64 count;   /* elements */
	u64 comm;    /* the ncclComm_t */
	u64 stream;  /* the cudaStream_t */
	s32 rank;    /* in comm, -1: its creation was not seen */
	s32 nranks;  /* 0: not known */
	s32 peer;    /* ncclSend/ncclRecv's peer, Broadcast/Reduce's root, else -1 */
	s32 ret;     /* the ncclResult_t */
	u8 datatype; /* ncclDataType_t */
	u8 _pad[7];
};
struct ev_gpu keep_gpu = {};
struct ev_nccl keep_nccl = {};
enum gpu_api keep_gpu_api = 0;
enum nccl_api keep_nccl_api = 0;

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
	u32 stk = py_stack(id);
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
	} else {
		fill_hdr(&e->h, EV_GPU, v->call, id, v->ts);
		e->h.stack = stk;
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
 * the return address (x86-64 SysV). 0 when unreadable. On arm64 (AAPCS64)
 * the 7th and 8th are still in registers (x6, x7). */
static __always_inline u64 stack_arg(struct pt_regs *ctx, u32 n)
{
#if defined(__TARGET_ARCH_x86)
	u64 v = 0;

	bpf_probe_read_user(&v, sizeof(v), (const void *)(PT_REGS_SP(ctx) + 8 * (n - 6)));
	return v;
#else
	return n == 7 ? PT_REGS_PARM7(ctx) : PT_REGS_PARM8(ctx);
#endif
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
	u32 stk = py_stack(id);
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
	} else {
		fill_hdr(&e->h, EV_NCCL, v->op, id, v->ts);
		e->h.stack = stk;
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
 * ncclUniqueId goes on the stack, so rank is the third register argument.
 * On arm64 (AAPCS64) the caller passes a pointer to a copy of it instead:
 * rank is the fourth. */
SEC("uprobe")
int nccl_comm_init_rank(struct pt_regs *ctx)
{
#if defined(__TARGET_ARCH_x86)
	return nccl_init_enter(PT_REGS_PARM1(ctx), (s32)PT_REGS_PARM2(ctx), (s32)PT_REGS_PARM3(ctx));
#else
	return nccl_init_enter(PT_REGS_PARM1(ctx), (s32)PT_REGS_PARM2(ctx), (s32)PT_REGS_PARM4(ctx));
#endif
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
