/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after proc.bpf.h). Page-cache insertions by traced
 * threads (mm_filemap_add_to_page_cache), a run of consecutive pages sent as
 * one record; flush_pcache is declared ahead in syscalls.bpf.h.
 */

EV_KIND(EV_PCACHE, 15);  /* mltrace_log::PageCache */

/* Page-cache insertions (see on_pcache): one record for a run of pages. */
/* The most pages one record holds (256 MiB of 4 KiB pages). */
#define PCACHE_RUN_MAX 65536

static __always_inline void send_pcache(u8 op, u64 id, u64 ts, u64 ino, u64 index, u32 dev, u32 pages)
{
	struct ev_pcache *e = rb_reserve(sizeof(*e));

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
