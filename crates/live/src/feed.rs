//! The live reader: decodes each tapped frame into the live stats, and
//! every second takes a snapshot; every interval hands it to the pusher.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mltrace_log::tap::Tapped;
use mltrace_log::{PayloadReader, Record};
use mltrace_stats::Stats;

use crate::snapshot::{self, Carry, Snapshot, Window};
use crate::{otlp, LiveOptions, Shared};

/// The live timeline's bins (the windows are whole bins when the
/// interval is whole seconds).
pub const BIN_NS: u64 = 1_000_000_000;
/// How far behind now the windows end: a frame is written each second,
/// and a state is recorded when it ends.
const SETTLE_NS: u64 = 2_000_000_000;
const TICK: Duration = Duration::from_secs(1);
/// How long the end waits for the last push.
const LAST_PUSH: Duration = Duration::from_secs(3);

#[derive(Default)]
pub struct Outcome {
    /// Records read live, and the reader's own CPU time (ns): its cost.
    pub records: u64,
    pub cpu_ns: u64,
    pub frames_missed: u64,
    pub problems: Vec<String>,
}

/// The interval window ending at the last whole interval `SETTLE_NS`
/// ago (or, once the recording is over, at the end of the bin of `bin`
/// ns holding its last record: a window that cuts a bin counts a share
/// of it, and after the last record there is nothing), and the run so far.
pub fn windows(start: u64, now: u64, interval: u64, over: Option<(u64, u64)>) -> Vec<Window> {
    let end = match over {
        Some((end, bin)) => start + end.saturating_sub(start).div_ceil(bin.max(1)).max(1) * bin.max(1),
        None => {
            let settled = now.saturating_sub(SETTLE_NS).max(start);
            start + (settled - start) / interval * interval
        }
    };
    let from = end.saturating_sub(interval).max(start);
    if end <= start {
        return Vec::new();
    }
    vec![Window { name: "interval", from, to: end }, Window { name: "run", from: start, to: end }]
}

pub fn run(opts: LiveOptions, rx: Receiver<Tapped>, missed: Arc<AtomicU64>, shared: Arc<Shared>) -> Outcome {
    let mut out = Outcome::default();
    let Ok(Tapped::Header(header)) = rx.recv() else { return out };
    let start = header.start.boottime_ns;
    let mut stats = Stats::live(*header, BIN_NS);
    let interval = (opts.interval.as_nanos() as u64).max(BIN_NS);
    let mut reader = PayloadReader::default();
    let mut carry = Carry::default();
    let (push_tx, push_rx) = sync_channel::<Arc<Snapshot>>(1);
    let (done_tx, done_rx) = sync_channel::<()>(1);
    let pusher = opts.otlp.clone().map(|t| {
        let res = otlp::Resources { host: opts.host.clone(), job: opts.job.clone() };
        let sh = shared.clone();
        std::thread::Builder::new()
            .name("mltrace-otlp".into())
            .spawn(move || {
                push_loop(t, res, push_rx, &sh);
                let _ = done_tx.send(());
            })
            .expect("spawning the OTLP pusher's thread")
    });
    let (mut frames, mut rec) = (0u64, Record::Lost(Default::default()));
    let mut next_tick = Instant::now() + TICK;
    let mut next_push = Instant::now() + opts.interval;
    let publish = |snap: Snapshot| {
        let snap = Arc::new(snap);
        *shared.latest.lock().unwrap_or_else(|e| e.into_inner()) = snap.clone();
        snap
    };
    let take = |stats: &mut Stats, carry: &mut Carry, over: Option<(u64, u64)>| {
        // Workers and loader threads as the trace would name them so far.
        stats.name_as_the_trace_so_far();
        let w = windows(start, mltrace_sample::boottime_ns(), interval, over);
        let dropped = shared.pushes_dropped.load(Ordering::Relaxed);
        snapshot::take(stats, &w, carry, missed.load(Ordering::Relaxed), dropped)
    };
    let push = |snap: Arc<Snapshot>| {
        if pusher.is_some() {
            shared.pushes.fetch_add(1, Ordering::Relaxed);
            if let Err(TrySendError::Full(_)) = push_tx.try_send(snap) {
                // The last push is still going: this one is dropped.
                shared.pushes_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    loop {
        let wait = next_tick.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(Tapped::Frame { payload, first_ts, last_ts }) => {
                frames += 1;
                match reader.frame(&payload, frames, first_ts, last_ts) {
                    Ok(mut f) => {
                        while f.next_into(&mut rec) {
                            stats.add(&f, &rec);
                        }
                    }
                    Err(e) => out.problems.push(e),
                }
            }
            Ok(Tapped::Header(_)) => {}
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if Instant::now() >= next_tick {
            next_tick += TICK;
            let snap = publish(take(&mut stats, &mut carry, None));
            if Instant::now() >= next_push {
                next_push += opts.interval;
                push(snap);
            }
        }
    }
    // The end: every record is in; the windows end at the last one.
    let end = stats.last_ts.unwrap_or(start);
    let bin = stats.sched.timeline.as_ref().map_or(BIN_NS, |t| t.width());
    let snap = publish(take(&mut stats, &mut carry, Some((end, bin))));
    push(snap);
    drop(push_tx);
    // The last push gets a few seconds; a collector that holds it longer
    // does not hold `record` (the push is counted as dropped).
    if pusher.is_some() && done_rx.recv_timeout(LAST_PUSH).is_err() {
        shared.pushes_dropped.fetch_add(1, Ordering::Relaxed);
        let mut e = shared.last_push_error.lock().unwrap_or_else(|e| e.into_inner());
        e.get_or_insert_with(|| format!("the last push took over {} s", LAST_PUSH.as_secs()));
    }
    out.problems.extend(reader.take_diagnostics().iter().map(|d| d.to_string()));
    out.frames_missed = missed.load(Ordering::Relaxed);
    out.records = stats.records;
    out.cpu_ns = mltrace_sample::thread_cpu_ns();
    out
}

fn push_loop(t: otlp::Target, res: otlp::Resources, rx: Receiver<Arc<Snapshot>>, shared: &Shared) {
    for snap in rx {
        if let Err(e) = otlp::post(&t, &otlp::encode(&snap, &res)) {
            shared.pushes_dropped.fetch_add(1, Ordering::Relaxed);
            *shared.last_push_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    }
}
