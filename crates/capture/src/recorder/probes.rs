//! The probes: what their plan fell back to, the CUDA and NCCL probes,
//! and what they say at the end of a run.

use crossbeam_channel::Sender;
use mltrace_log::*;

use crate::attach::AttachOptions;
use crate::bpf::{self, BpfConfig, Skeleton};
use crate::cuda::{self, LibProbes};
use crate::system;

/// Says what the loaded plan could not do as asked (once each).
pub(super) fn tell_plan(plan: &bpf::Plan) {
    if let Some(why) = &plan.fallback {
        // Slower, but everything is still recorded: say so, once.
        eprintln!(
            "mltrace: the {} probes did not load here ({why}); using the {} route ({})",
            match why.split(' ').next() {
                Some("per-call") => "per-call",
                _ => "fast (tp_btf)",
            },
            bpf::route_name(plan.route),
            plan.route.describe()
        );
    }
    if let Some(at) = plan.tracefs_mounted {
        eprintln!(
            "mltrace: tracefs was not mounted; mounted it at {at} (the page-cache, io_uring and fault probes need it)"
        );
    }
    if let Some(why) = &plan.tracefs_unusable {
        eprintln!(
            "mltrace: {why}: page-cache attribution, io_uring requests and major faults' start times are not \
             recorded"
        );
    }
    if let Err(why) = &plan.uring {
        // Absent tracepoints are for `doctor` to explain; a load failure is news.
        if why.starts_with("its programs") {
            eprintln!("mltrace: io_uring requests are not recorded: {why}");
        }
    }
}

/// The CUDA and NCCL probes, one per library, attached to the libraries
/// found now (installed, or mapped by attached processes); none when off.
pub(super) fn lib_probes(
    skel: &Skeleton<'_>,
    plan: &bpf::Plan,
    attaching: Option<&AttachOptions>,
    cfg: &BpfConfig,
) -> Vec<LibProbes> {
    if plan.cuda {
        let mapped: Vec<_> = attaching.iter().flat_map(|a| a.pids.iter().flat_map(|&p| cuda::mapped_by(p))).collect();
        cuda::LIBRARIES
            .iter()
            .map(|&lib| {
                let mut c = LibProbes::new(lib, plan.uprobe_multi, cfg.cuda_launches);
                let here = mapped.iter().filter(|p| lib.matches(p.as_os_str().as_encoded_bytes())).cloned();
                for path in lib.candidates().into_iter().chain(here) {
                    c.attach(skel, &path);
                }
                if let Some(w) = c.warning() {
                    eprintln!("mltrace: {w}");
                }
                c
            })
            .collect()
    } else {
        Vec::new()
    }
}

/// What is read at the end of a run while the probes are still attached:
/// the counts of processes that outlive the command (sent to the
/// consumer), the disks' counters and io_uring's ops; the programs' own
/// statistics are written out.
pub(super) fn read_at_end(
    skel: &Skeleton<'_>,
    plan: &bpf::Plan,
    accounting: &Sender<Vec<IoAccounting>>,
    loaded_since: u64,
    startup_cpu: u64,
) -> (Option<DiskSnapshot>, Vec<UringOpCount>) {
    // The kernel's counts of processes that outlive the command,
    // read while the probes still trace them.
    let _ = accounting.send(system::live_accounting(&bpf::traced_pids(skel)));
    // While the probes are still attached, so the two compare.
    let disks = if plan.block.is_some() { system::disk_snapshot() } else { None };
    let uring_ops = if plan.uring.is_ok() { crate::decode::read_uring_ops(skel) } else { Vec::new() };
    bpf::write_prog_stats(skel, loaded_since, startup_cpu);
    (disks, uring_ops)
}
