/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after uring.bpf.h). Major page faults of traced
 * threads: where each began (mm_filemap_fault, into fault_starts, which is
 * in maps.bpf.h) and the perf_event program that records it.
 */

EV_KIND(EV_FAULT, 17);  /* mltrace_log::MajorFault */

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
	e = rb_reserve(sizeof(*e));
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
