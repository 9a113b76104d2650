//! The consumer thread: drains the ring buffer, decodes and encodes
//! frames, and adds what the other threads send (samples, phases, counts).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use libbpf_rs::{MapCore, MapHandle};
use mltrace_log::*;
use mltrace_sample::gpu::GpuEventSample;
use mltrace_sample::SampleSink;

use super::Shared;
use crate::attach::AttachOptions;
use crate::bpf::{self, Skeleton, LOST_SLOTS};
use crate::cuda::{self, LibProbes};
use crate::decode::{DecodeStats, KernelDecoder};
use crate::error::CaptureError;
use crate::mllog::{MllogMsg, PhaseRecorder};
use crate::ring::Merged;
use crate::system;

pub(super) struct Consumer<'s> {
    pub(super) enc: FrameEncoder,
    pub(super) dec: KernelDecoder,
    pub(super) frames: Sender<EncodedFrame>,
    pub(super) free: Receiver<EncodedFrame>,
    pub(super) frame_records: usize,
    pub(super) last_cut: Instant,
    pub(super) lost_seen: [u64; LOST_SLOTS],
    pub(super) shared: &'s Shared,
    pub(super) samples: Receiver<SampleSink>,
    pub(super) gpu_events: Receiver<Vec<GpuEventSample>>,
    pub(super) mllog: Receiver<MllogMsg>,
    /// The last counts of the threads still alive when the command ended.
    pub(super) accounting: Receiver<Vec<IoAccounting>>,
    pub(super) phases: PhaseRecorder,
    /// The CUDA and NCCL probes, one per library (none when off):
    /// libraries traced processes map are attached as their mappings are
    /// decoded.
    pub(super) uprobes: Vec<LibProbes>,
    /// The CUDA calls only counted (with the CUDA probes).
    pub(super) gpu_counts: Option<cuda::GpuCounts>,
    /// `--detail summary`: the calls summed in the kernel.
    pub(super) summaries: Option<crate::summary::Summaries>,
    /// `MLTRACE_RING_DUMP`: every record, as merged, for the bench's
    /// replay of the decoder alone.
    pub(super) dump: Option<crate::dump::Dump>,
    /// Records left in a CPU's batch that it could not send at the end.
    pub(super) unsent_batched: u64,
    /// The programs' skipped runs as last read (see [`Consumer::read_skipped`]).
    pub(super) skipped: u64,
}

/// The decoder of a recording that starts `pid` (or attaches); CUDA and
/// NCCL libraries are watched for when their probes are on.
pub(super) fn decoder(
    attaching: Option<&AttachOptions>,
    pid: u32,
    file_generation: usize,
    watch: bool,
    summary: bool,
) -> KernelDecoder {
    let mut d = match attaching {
        None => KernelDecoder::with_file_generation(pid, file_generation),
        Some(a) => KernelDecoder::attached(file_generation, a.path.as_ref().map(|p| p.as_bytes().to_vec())),
    };
    // SAFETY: getuid has no preconditions.
    d.hide_others_block_io(unsafe { libc::getuid() } != 0);
    d.watch_libraries(watch);
    d.keep_replaced_names(summary);
    d
}

impl Consumer<'_> {
    /// Counter samples from the sampler threads, interned into this frame.
    fn drain_samples(&mut self) {
        while let Ok(batch) = self.samples.try_recv() {
            for s in batch {
                let group = self.enc.intern(s.group.as_bytes());
                let name = self.enc.intern(s.name.as_bytes());
                self.enc.push(&Counter { ts: s.ts, group, name, unit: s.unit, pid: s.pid, value: s.value });
            }
        }
        while let Ok(batch) = self.gpu_events.try_recv() {
            for e in batch {
                let group = self.enc.intern(e.group.as_bytes());
                self.enc.push(&GpuEvent { ts: e.ts, group, kind: e.kind, code: e.code, pid: 0 });
            }
        }
    }

    fn drain_accounting(&mut self) {
        while let Ok(batch) = self.accounting.try_recv() {
            for a in batch {
                self.enc.push(&a);
            }
        }
    }

    /// Attaches the CUDA and NCCL probes to the `libcuda.so*` and
    /// `libnccl.so*` files traced processes mapped since the last round
    /// (calls they make before this are missed).
    fn attach_libraries(&mut self, skel: &Skeleton<'_>) {
        if self.uprobes.is_empty() {
            return;
        }
        for p in self.dec.take_libraries() {
            use std::os::unix::ffi::OsStrExt;
            if let Some(probes) = self.uprobes.iter_mut().find(|u| u.lib.matches(&p)) {
                probes.attach(skel, std::path::Path::new(std::ffi::OsStr::from_bytes(&p)));
            }
        }
    }

    /// Looks at the processes the kernel side asked about for Python
    /// stacks, and tells it how to walk each (or not to).
    fn answer_python(&mut self, skel: &Skeleton<'_>) {
        use crate::python::layout::{discover, Discovery};
        use crate::python::tell_kernel;
        for (pid, gen) in self.dec.py.take_asked() {
            let (c, enc) = (&mut self.dec.py, &mut self.enc);
            // Told only when the kernel side's entry is still the one that
            // asked (Ok(false): the process exec'd since, and asks again).
            match discover(pid) {
                Discovery::Ready(i) if i.unwalkable().is_some() => {
                    if tell_kernel(skel, pid, gen, None).unwrap_or(true) {
                        c.decided(pid, None, &i.version_text(), &i.unwalkable().unwrap_or_default(), enc);
                    }
                }
                Discovery::Ready(i) => match tell_kernel(skel, pid, gen, Some(&i.bpf_layout())) {
                    Ok(true) => {
                        c.decided(pid, Some(i.lines()), &i.version_text(), "", enc);
                        // Its exec'd children are walked without asking (an error: they ask).
                        if !c.knows_file(i.file) && crate::python::tell_kernel_file(skel, &i).is_ok() {
                            c.bin_told(&i);
                        }
                    }
                    Ok(false) => {}
                    Err(e) => {
                        let why = format!("its layout could not be given to the kernel side ({e})");
                        c.decided(pid, None, &i.version_text(), &why, enc);
                    }
                },
                // Gone already: its entry went with it (a pid used again asks anew).
                Discovery::NotPython if !std::path::Path::new(&format!("/proc/{pid}")).exists() => {}
                Discovery::NotPython => {
                    if tell_kernel(skel, pid, gen, None).unwrap_or(true) {
                        c.not_python(pid);
                    }
                }
                // Asked again by the kernel side, until it is too late.
                Discovery::NotYet if !c.gave_up(pid) => {}
                Discovery::NotYet => {
                    if tell_kernel(skel, pid, gen, None).unwrap_or(true) {
                        c.decided(pid, None, "?", "its interpreter was not found running", enc);
                    }
                }
                Discovery::Unsupported { version, why } => {
                    if tell_kernel(skel, pid, gen, None).unwrap_or(true) {
                        c.decided(pid, None, &version, &why, enc);
                    }
                }
            }
        }
    }

    /// The CUDA calls counted since the last round.
    fn count_gpu_calls(&mut self, skel: &Skeleton<'_>) {
        if let Some(c) = &mut self.gpu_counts {
            c.round(skel, system::boottime_ns(), &mut self.enc);
        }
    }

    /// The threads' summary slots, read before the ring is drained.
    fn read_slots(&mut self, skel: &Skeleton<'_>) {
        if let Some(s) = &mut self.summaries {
            s.read_slots(skel);
        }
    }

    /// The sums of the seconds that have ended (all, when `last`).
    fn take_summaries(&mut self, skel: &Skeleton<'_>, last: bool) {
        if let Some(s) = &mut self.summaries {
            s.round(skel, system::boottime_ns(), last, &mut self.dec, &mut self.enc);
        }
    }

    /// Warnings about the training phases and the CUDA and NCCL probes.
    fn warnings(&self) -> Vec<String> {
        let mut w = self.phases.warnings();
        w.extend(self.dec.py.said.iter().cloned());
        if let Some(e) = self.summaries.as_ref().and_then(|s| s.error.as_ref()) {
            w.push(format!("the threads' summary slots could not be read ({e}): sums of threads alive at the end of the recording may be missing"));
        }
        w.extend(self.uprobes.iter().filter_map(LibProbes::warning));
        w
    }

    fn drain_mllog(&mut self) {
        while let Ok(m) = self.mllog.try_recv() {
            self.phases.take(m, &mut self.enc);
        }
    }

    #[inline]
    fn on_event(&mut self, data: &[u8], skel: &Skeleton<'_>) {
        if let Some(d) = &mut self.dump {
            d.write(data);
        }
        self.dec.decode(data, &mut self.enc);
        // Answered at once: the process's calls until then have no stack.
        if self.dec.py.has_asked() {
            self.answer_python(skel);
        }
        if self.enc.len() >= self.frame_records {
            self.cut();
        }
    }

    fn cut(&mut self) {
        self.last_cut = Instant::now();
        if self.enc.is_empty() {
            return;
        }
        let mut f = self.free.try_recv().unwrap_or_default();
        self.enc.finish_into(&mut f);
        self.shared.records.fetch_add(u64::from(f.records), Ordering::Relaxed);
        // The writer only goes away after we do.
        let _ = self.frames.send(f);
    }

    /// The runs the kernel skipped, read again: one syscall a loaded
    /// program (about fifty), so once a second and at the end rather than
    /// with the other drops, which it made most of an idle consumer's CPU.
    fn read_skipped(&mut self, skel: &Skeleton<'_>) {
        self.skipped = bpf::read_skipped(skel);
    }

    /// Turns new drops (kernel counters and our own) into Lost records.
    fn account_losses(&mut self, skel: &Skeleton<'_>) {
        let DecodeStats { malformed, unknown_file, .. } = self.dec.stats;
        // Indexed by LostKind; every kind has a slot (asserted in bpf.rs).
        let mut now = bpf::read_lost(skel);
        now[LostKind::Malformed as usize] += malformed;
        now[LostKind::UnknownFile as usize] += unknown_file;
        now[LostKind::Skipped as usize] += self.skipped;
        now[LostKind::Unsent as usize] += self.unsent_batched;
        let ts = system::boottime_ns();
        for (k, (&n, seen)) in now.iter().zip(self.lost_seen.iter_mut()).enumerate() {
            if n > *seen {
                self.enc.push(&Lost { ts, kind: LostKind::from_u8(k as u8), count: n - *seen });
                self.shared.lost.fetch_add(n - *seen, Ordering::Relaxed);
                *seen = n;
            }
        }
    }
}

/// The merged records, to the consumer.
struct Feed<'a, 'c, 's> {
    c: &'a mut Consumer<'c>,
    skel: &'a Skeleton<'s>,
}

impl crate::ring::Sink for Feed<'_, '_, '_> {
    #[inline]
    fn take(&mut self, rec: &[u8]) {
        self.c.on_event(rec, self.skel);
    }

    #[inline]
    fn ahead(&mut self, rec: &[u8]) {
        self.c.dec.ahead(rec);
    }
}

/// Lost counts by kind, warnings about the training phases, and the file
/// table's (held, forgotten) with the events `--path` left out.
/// Losses, warnings, and (file names held, forgotten, left out by --path; processes untraced).
type ConsumerResult = Result<([u64; LOST_SLOTS], Vec<String>, (usize, u64, u64, Vec<String>)), CaptureError>;

pub(super) fn consumer_loop(
    skel: &Skeleton<'_>,
    rings: &[MapHandle],
    mut c: Consumer<'_>,
    flush: Duration,
) -> ConsumerResult {
    let mapping = |e: std::io::Error| CaptureError::Bpf {
        stage: "mapping the ring buffers".into(),
        source: libbpf_rs::Error::from(e),
    };
    let mut merged = Merged::open(rings, crate::decode::record_key).map_err(mapping)?;
    merged.sleep_flag(&skel.maps.consumer_asleep).map_err(mapping)?;
    let batched = bpf::batching(skel);
    if batched {
        merged.batches(&skel.maps.batches, skel.maps.batches.value_size() as usize).map_err(mapping)?;
    }
    let shared = c.shared;
    let mut last_losses = Instant::now();
    let mut last_counts = Instant::now();
    let mut last_sums = Instant::now();
    // Files the decoder forgot: when the kernel side was told, and how often.
    let mut forgot_at: Option<(Instant, u64)> = None;
    let mut epoch = 0u64;
    let mut kernel_untold = false;
    loop {
        // Nothing more can be written: stop capturing, let the command run.
        if shared.write_error.lock().unwrap().is_some() {
            return Ok((
                c.lost_seen,
                c.warnings(),
                (c.dec.files().len(), c.dec.files().forgotten, c.dec.stats.filtered, c.dec.untraced.clone()),
            ));
        }
        let stopping = shared.stop.load(Ordering::Acquire);
        let round = Instant::now();
        let sums_due = stopping || last_sums.elapsed() >= Duration::from_millis(200);
        if sums_due {
            c.read_slots(skel);
        }
        // Wakeups are batched in the kernel, so poll() may time out with
        // data waiting: always consume afterwards.
        merged.poll(Duration::from_millis(50));
        merged.consume_into(Feed { c: &mut c, skel });
        // A CPU whose batch went unsent since the last round makes no
        // more calls for now: its records hold the others back.
        if batched {
            let stale = merged.stale_batches();
            if !stale.is_empty() {
                send_batches(skel, &mut merged, &stale);
                merged.consume_into(Feed { c: &mut c, skel });
            }
        }
        // Counted as malformed records (each skipped what followed it).
        c.dec.stats.malformed += merged.take_corrupt();
        c.drain_samples();
        c.drain_mllog();
        c.drain_accounting();
        c.attach_libraries(skel);
        c.answer_python(skel);
        // This round drained everything queued since it began (unless the
        // merge held records back): records sent before the kernel side
        // forgot (plus a margin for programs running at that moment) have
        // all been decoded.
        // Batched records wait in their CPU's batch: none from before the forgetting may.
        if forgot_at.is_some_and(|(t, boot)| {
            round >= t + Duration::from_millis(10) && merged.oldest_unsent().is_none_or(|k| k > boot)
        }) && !kernel_untold
            && !merged.held_back()
        {
            c.dec.files_mut().release_retired();
            forgot_at = None;
        }
        let forget = c.dec.files_mut().take_forgotten();
        if !forget.is_empty() {
            epoch += 1;
            match crate::files::forget_files(skel, &forget, epoch) {
                Ok(()) => forgot_at = Some((Instant::now(), system::boottime_ns())),
                // The kernel side may still trust them: keep them all.
                Err(_) => kernel_untold = true,
            }
        }
        if stopping || last_counts.elapsed() >= Duration::from_secs(1) {
            c.read_skipped(skel);
            c.count_gpu_calls(skel);
            last_counts = Instant::now();
        }
        if stopping || last_losses.elapsed() >= Duration::from_millis(100) {
            c.account_losses(skel);
            last_losses = Instant::now();
        }
        if sums_due {
            c.take_summaries(skel, stopping);
            last_sums = Instant::now();
        }
        if stopping {
            // What the merge held back waits only for records being
            // written as it read, and for the CPUs' batches: take it
            // before the end.
            for _ in 0..100 {
                if batched {
                    let unsent = merged.unsent_cpus();
                    if !unsent.is_empty() {
                        send_batches(skel, &mut merged, &unsent);
                        merged.consume_into(Feed { c: &mut c, skel });
                        continue;
                    }
                }
                if !merged.held_back() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
                merged.consume_into(Feed { c: &mut c, skel });
            }
            // A batch its CPU could not send (gone offline) is lost, and
            // the last sends may have found a ring full: count both.
            c.unsent_batched = merged.unsent_records();
            c.read_skipped(skel);
            c.account_losses(skel);
            c.dec.stats.malformed += merged.take_corrupt();
            // The readers have finished: phases still open end here.
            let c = &mut c;
            if let Some(s) = &mut c.summaries {
                s.open_spans(skel, &mut c.enc);
            }
            c.phases.finish(system::boottime_ns(), &mut c.enc);
            c.dec.py.finish(&mut c.enc);
            crate::decode::anon_summaries(skel, &mut c.enc);
            c.cut();
            return Ok((
                c.lost_seen,
                c.warnings(),
                (c.dec.files().len(), c.dec.files().forgotten, c.dec.stats.filtered, c.dec.untraced.clone()),
            ));
        }
        if c.last_cut.elapsed() >= flush {
            c.cut();
        }
    }
}

/// Has `cpus` send their batches of records now. A CPU that cannot (gone
/// offline) no longer holds the merge back; its records are counted lost
/// at the end if they never come.
fn send_batches(skel: &Skeleton<'_>, merged: &mut Merged<impl Fn(&[u8]) -> u64>, cpus: &[usize]) {
    for &cpu in cpus {
        if bpf::send_batch(skel, cpu as u32).is_err() {
            merged.unsendable(cpu);
        }
    }
}
