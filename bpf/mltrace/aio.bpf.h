/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Part of mltrace.bpf.c (after meta.bpf.h). libaio: io_submit's iocbs and
 * io_getevents' events, summed per call (on_aio). io_uring, which runs
 * outside the syscalls, is in uring.bpf.h.
 */

EV_KIND(EV_AIO, 19);  /* mltrace_log::Aio */

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
	u32 stk = hp->stack;
	e = rb_reserve(sizeof(*e));
	if (!e) {
		count_lost(LOST_RING);
		return 0;
	}
	fill_hdr(&e->h, EV_AIO, v->op, id, v->ts);
	e->h.stack = stk;
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
