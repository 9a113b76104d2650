//! The writer thread, and the end of the log.

use std::fs::File;
use std::sync::atomic::Ordering;

use crossbeam_channel::{Receiver, Sender};
use mltrace_log::*;

use mltrace_log::tap::{FrameTap, Tapped};

use super::Shared;
use crate::output::OutputFile;
use crate::system;

pub(super) fn writer_loop(
    mut writer: LogWriter<File>,
    frames: Receiver<EncodedFrame>,
    free: Sender<EncodedFrame>,
    tap: Option<FrameTap>,
    shared: &Shared,
) -> (LogWriter<File>, Option<String>) {
    let mut error = None;
    for f in frames {
        if error.is_none() {
            if let Err(e) = writer.write_frame(&f) {
                error = Some(e.to_string());
                *shared.write_error.lock().unwrap() = error.clone();
            }
            shared.log_bytes.store(writer.bytes_written(), Ordering::Relaxed);
            // What was written, to the live reader: a copy (the buffer goes
            // back to the consumer), dropped and counted when it lags.
            if let Some(t) = tap.as_ref().filter(|_| f.records > 0 && error.is_none()) {
                let copy = Tapped::Frame { payload: f.payload.clone(), first_ts: f.first_ts, last_ts: f.last_ts };
                if t.tx.try_send(copy).is_err() {
                    t.skipped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        let _ = free.try_send(f);
    }
    (writer, error)
}

/// The log's trailer: how the run ended and what was lost.
pub(super) fn trailer(
    wait_status: Option<i32>,
    stopped: bool,
    lost: &[(LostKind, u64)],
    diskstats: Option<DiskSnapshot>,
    sampler_cpu_ns: u64,
    warnings: Vec<String>,
    uring_ops: Vec<UringOpCount>,
) -> Trailer {
    Trailer {
        end: system::clock_anchor(),
        exit_status: wait_status,
        lost: lost.iter().map(|(k, n)| LostTotal { kind: k.name().into(), count: *n }).collect(),
        stopped_early: if wait_status.is_none() && !stopped {
            Some("interrupted twice: stopped before the command ended".into())
        } else {
            None
        },
        diskstats,
        sampler_cpu_ns,
        warnings,
        uring_ops,
        ..Default::default()
    }
}

/// Writes the trailer (unless writing already failed) and syncs the
/// file; the log's size.
pub(super) fn finish(
    writer: LogWriter<File>,
    trailer: &Trailer,
    write_error: &mut Option<String>,
    out: &mut OutputFile,
) -> u64 {
    let mut log_bytes = writer.bytes_written();
    if write_error.is_none() {
        match writer.finish(trailer) {
            Ok(f) => log_bytes = f.metadata().map(|m| m.len()).unwrap_or(log_bytes),
            Err(e) => *write_error = Some(e.to_string()),
        }
    }
    if let Err(e) = out.sync() {
        write_error.get_or_insert(e.to_string());
    }
    log_bytes
}
