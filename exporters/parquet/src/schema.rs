//! The tables and their columns, in order. Integers are int64, times and
//! durations in nanoseconds (`ts` on the log's clock, `wall` timestamp[ns,
//! UTC] where the log's header anchors that clock, else null); a value the
//! log does not have is null. docs/parquet.md documents each column.

use crate::table::{Col, Ty::*};

/// Who a row is about: the process as the trace names it.
macro_rules! who {
    () => {
        [
            ("pid", I64, false),
            ("tid", I64, false),
            // As the trace names it: `DataLoader worker 2`, `python3 train.py`.
            ("process", Str, true),
            // main, worker, helper or other.
            ("role", Str, true),
            // A worker's slot among its live siblings (the 2 of `worker 2`).
            ("worker", I64, true),
        ]
    };
}

fn cat(parts: &[&[Col]]) -> Vec<Col> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

/// Every syscall, io_uring request and libaio call, one row each.
pub fn syscalls() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("dur", I64, false), ("wall", Wall, true), ("epoch", I64, true)],
        &who!(),
        &[
            // syscall, io_uring or aio.
            ("kind", Str, false),
            // The call (pread64, openat, io_submit) or io_uring opcode (read, readv).
            ("syscall", Str, false),
            // As the trace names the call: `pread64 4 KiB`, `openat x.bin ENOENT`.
            ("name", Str, false),
            ("fd", I64, true),
            ("path", Str, true),
            ("file_kind", Str, true),
            ("offset", I64, true),
            ("requested", I64, true),
            // Bytes moved (reads, writes, transfers, io_uring, aio events).
            ("bytes", I64, true),
            // What the call returned when it succeeded (bytes, the new fd, 0).
            ("result", I64, true),
            // When it failed: ENOENT, EIO...
            ("errno", Str, true),
            // sendfile, copy_file_range: the destination.
            ("out_fd", I64, true),
            ("out_path", Str, true),
            // Block requests the call started (rows of `block` with cause_ts = ts, cause_tid = tid).
            ("block_reqs", I64, false),
            // The Python stack it was made from: rows of `py_stacks` with this `stack` and `pid`.
            ("stack", I64, true),
        ],
    ])
}

/// Block requests.
pub fn block() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("wall", Wall, true), ("queue_ns", I64, false), ("device_ns", I64, false)],
        &who!(),
        &[
            ("comm", Str, true),
            // Issued by a thread of a traced process.
            ("traced", Bool, false),
            ("kthread", Bool, false),
            ("disk", Str, true),
            ("major", I64, false),
            ("minor", I64, false),
            ("sector", I64, false),
            ("bytes", I64, false),
            ("op", Str, false),
            // sync|meta|readahead..., and the trace's own: start unknown, issue unknown, partial.
            ("flags", Str, false),
            // The kernel's blk_status_t (0 = success).
            ("error", I64, false),
            // The syscall that started it (a `syscalls` row: tid = cause_tid, ts = cause_ts).
            ("cause_tid", I64, true),
            ("cause_ts", I64, true),
            ("cause_idx", I64, true),
        ],
    ])
}

/// Counter samples, long format.
pub fn counters() -> Vec<Col> {
    vec![
        ("ts", I64, false),
        ("wall", Wall, true),
        ("group", Str, false),
        ("name", Str, false),
        // 0 for machine-wide counters.
        ("pid", I64, false),
        ("process", Str, true),
        ("value", F64, false),
        ("unit", Str, false),
    ]
}

/// One row per process incarnation (a reused pid is a new row).
pub fn processes() -> Vec<Col> {
    vec![
        ("pid", I64, false),
        ("parent", I64, true),
        ("process", Str, false),
        ("role", Str, false),
        ("worker", I64, true),
        // How many workers held the slot before this one.
        ("generation", I64, true),
        ("comm", Str, true),
        ("command", Str, true),
        ("forked", Bool, false),
        ("start", I64, false),
        ("end", I64, false),
        ("start_wall", Wall, true),
        ("exit_ts", I64, true),
        // wait(2) status; exit_code or signal from it; `exit 0`, `killed by SIGKILL`.
        ("exit_status", I64, true),
        ("exit_code", I64, true),
        ("signal", I64, true),
        ("exit", Str, true),
        ("threads", I64, false),
        ("syscalls", I64, false),
        ("bytes", I64, false),
    ]
}

/// Training phases (INIT, EPOCH 3, EVAL...).
pub fn phases() -> Vec<Col> {
    vec![
        ("ts", I64, false),
        ("dur", I64, false),
        ("wall", Wall, true),
        ("kind", Str, false),
        ("name", Str, false),
        // The epoch number for EPOCH phases, as in the `epoch` columns.
        ("epoch", I64, true),
        ("rank", I64, true),
        ("pid", I64, false),
        ("unfinished", Bool, false),
    ]
}

/// Pages a traced thread brought into the page cache.
pub fn page_cache() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("wall", Wall, true)],
        &who!(),
        &[
            ("major", I64, false),
            ("minor", I64, false),
            ("ino", I64, false),
            ("path", Str, true),
            ("offset", I64, false),
            ("bytes", I64, false),
            // read, write, transfer, other call, fault or untraced call.
            ("during", Str, false),
        ],
    ])
}

/// mmap, munmap, mremap, and each process's count of anonymous mmaps.
pub fn mappings() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("dur", I64, false), ("wall", Wall, true)],
        &who!(),
        &[
            ("op", Str, false),
            ("fd", I64, true),
            ("path", Str, true),
            ("file_kind", Str, true),
            ("major", I64, true),
            ("minor", I64, true),
            ("ino", I64, true),
            ("memory_fs", Bool, false),
            ("offset", I64, true),
            ("addr", I64, false),
            ("len", I64, false),
            ("new_len", I64, true),
            ("prot", I64, true),
            ("flags", I64, true),
            ("result", I64, true),
            ("errno", Str, true),
        ],
    ])
}

/// Major page faults.
pub fn faults() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("dur", I64, false), ("wall", Wall, true)],
        &who!(),
        &[
            ("addr", I64, false),
            // The kernel said which file page (else the file columns are null).
            ("file", Bool, false),
            ("major", I64, true),
            ("minor", I64, true),
            ("ino", I64, true),
            ("path", Str, true),
            ("offset", I64, true),
        ],
    ])
}

/// Sends and receives on sockets (sendto, recvfrom, sendmsg, recvmsg,
/// sendmmsg, recvmmsg), one row each.
pub fn net_calls() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("dur", I64, false), ("wall", Wall, true), ("epoch", I64, true)],
        &who!(),
        &[
            ("syscall", Str, false),
            // send or recv.
            ("direction", Str, false),
            ("fd", I64, false),
            // The socket as its file is named: socket:[1234].
            ("path", Str, true),
            // 127.0.0.1:8080, [::1]:8080, a unix socket's path; null when unknown.
            ("peer", Str, true),
            ("requested", I64, false),
            // Bytes moved (the mmsg calls: summed over their first 8 messages).
            ("bytes", I64, true),
            // sendmmsg, recvmmsg: messages moved.
            ("messages", I64, true),
            ("errno", Str, true),
            // Bytes or messages are a lower bound.
            ("partial", Bool, false),
        ],
    ])
}

/// Context switches with a traced side.
pub fn sched() -> Vec<Col> {
    vec![
        ("ts", I64, false),
        ("wall", Wall, true),
        ("cpu", I64, false),
        ("prev_pid", I64, false),
        ("prev_tid", I64, false),
        ("prev_comm", Str, true),
        ("prev_prio", I64, false),
        // R, S, D, T, X, ?
        ("prev_state", Str, false),
        ("prev_traced", Bool, false),
        ("next_pid", I64, false),
        ("next_tid", I64, false),
        ("next_comm", Str, true),
        ("next_prio", I64, false),
        ("next_traced", Bool, false),
        // The traced side's process (the outgoing one when both are).
        ("process", Str, true),
        // The call prev went to sleep in (futex, nanosleep...); null when none.
        ("prev_call", Str, true),
        // µs a traced prev had run since it got the CPU, by the kernel's
        // run time; null when not known (older logs, prev untraced).
        ("prev_ran_us", I64, true),
    ]
}

/// Wakeups and migrations of traced threads.
pub fn wakeups() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("wall", Wall, true)],
        &who!(),
        &[
            // waking or migrate.
            ("op", Str, false),
            ("comm", Str, true),
            ("prio", I64, false),
            ("cpu", I64, false),
            ("target_cpu", I64, false),
            ("waker_pid", I64, false),
            ("waker_tid", I64, false),
            ("waker_traced", Bool, false),
            // task, timer, hardirq, softirq (then no waker), or unknown.
            ("woken_by", Str, false),
        ],
    ])
}

/// Marks (MLLOG keys with values).
pub fn marks() -> Vec<Col> {
    vec![
        ("ts", I64, false),
        ("wall", Wall, true),
        ("name", Str, false),
        // The value as JSON text.
        ("value", Str, false),
        ("rank", I64, true),
        ("pid", I64, false),
    ]
}

/// GPU events: clocks held back, XID errors, ECC errors.
pub fn gpu_events() -> Vec<Col> {
    vec![
        ("ts", I64, false),
        ("wall", Wall, true),
        // The GPU's counter group: `GPU 0 (NVIDIA H100)`.
        ("gpu", Str, false),
        // clocks, XID, ECC corrected, ECC uncorrected.
        ("kind", Str, false),
        // The clock reason mask, the XID number, or the count of errors.
        ("code", I64, false),
        // As the trace names it: `clocks held back: power cap`.
        ("name", Str, false),
    ]
}

/// Per-thread kernel I/O accounting readings.
pub fn io_accounting() -> Vec<Col> {
    cat(&[
        &[("ts", I64, false), ("wall", Wall, true)],
        &who!(),
        &[
            // exec, exit or end.
            ("at", Str, false),
            // Null where the kernel does not keep the counter.
            ("rchar", I64, true),
            ("wchar", I64, true),
            ("syscr", I64, true),
            ("syscw", I64, true),
            ("read_bytes", I64, true),
            ("write_bytes", I64, true),
            ("cancelled_write_bytes", I64, true),
        ],
    ])
}

/// Events the recording lost.
pub fn lost() -> Vec<Col> {
    vec![("ts", I64, false), ("wall", Wall, true), ("kind", Str, false), ("count", I64, false)]
}

/// Checkpoints: a file (or a directory of shards) the job wrote 64 MiB or
/// more of in one burst, one row each.
pub fn checkpoints() -> Vec<Col> {
    vec![
        ("ts", I64, false),
        ("dur", I64, false),
        ("wall", Wall, true),
        // The file, or for shards their directory with a trailing `/`.
        ("path", Str, false),
        // The process that wrote the first of it.
        ("pid", I64, false),
        ("bytes", I64, false),
        ("files", I64, false),
        // Processes that wrote it (ranks writing shards).
        ("writers", I64, false),
        ("mb_per_s", F64, false),
    ]
}

/// A table made from a kind's declaration: `ts`, `dur` (when it has one), `wall`, `epoch`, the
/// process columns (when it has a pid and a tid; `pid` alone when it has
/// no tid), then each other field under its declared name: integers and
/// times as int64, codes and strings as text.
pub fn of_kind(code: u8) -> Vec<Col> {
    use mltrace_log::Value;
    let Some(rec) = mltrace_log::Record::build(code, |_| 0) else { return Vec::new() };
    let (names, _) = rec.fields();
    let mut cols: Vec<Col> = vec![("ts", I64, false)];
    if names.contains(&"dur") {
        cols.push(("dur", I64, false));
    }
    cols.extend([("wall", Wall, true), ("epoch", I64, true)]);
    if names.contains(&"pid") && names.contains(&"tid") {
        cols.extend(who!());
    } else if names.contains(&"pid") {
        cols.push(("pid", I64, false));
    }
    rec.visit(&mut |name, v| {
        if !matches!(name, "ts" | "dur" | "pid" | "tid") {
            let ty = match v {
                Value::U(_) | Value::I(_) | Value::Time(_) => I64,
                Value::Bool(_) => Bool,
                Value::F64(_) => F64,
                Value::Str(_) | Value::Code(_) => Str,
            };
            cols.push((name, ty, ty == Str));
        }
    });
    cols
}
