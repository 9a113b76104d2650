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
 *
 * The programs are in the headers of mltrace/, one subsystem per file, all
 * compiled here as one object (one skeleton, shared maps). The order below
 * is the order of their definitions in the object; each file uses only what
 * those before it define (the few exceptions are declared ahead).
 */
#include "kernel.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#include "mltrace/maps.bpf.h"
#include "mltrace/common.bpf.h"
#include "mltrace/python.bpf.h"
#include "mltrace/summary.bpf.h"
#include "mltrace/files.bpf.h"
#include "mltrace/io.bpf.h"
#include "mltrace/net.bpf.h"
#include "mltrace/mmap.bpf.h"
#include "mltrace/meta.bpf.h"
#include "mltrace/aio.bpf.h"
#include "mltrace/traced.bpf.h"
#include "mltrace/syscalls.bpf.h"
#include "mltrace/proc.bpf.h"
#include "mltrace/page_cache.bpf.h"
#include "mltrace/uring.bpf.h"
#include "mltrace/faults.bpf.h"
#include "mltrace/block.bpf.h"
#include "mltrace/sched.bpf.h"
#include "mltrace/gpu.bpf.h"
