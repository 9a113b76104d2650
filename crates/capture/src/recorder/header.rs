//! The log's header: what was recorded, where, and by which probes.

use mltrace_log::*;

use super::RecordOptions;
use crate::attach;
use crate::bpf;
use crate::system;

pub(super) fn header(
    opts: &RecordOptions,
    plan: &bpf::Plan,
    root_pid: u32,
    start: ClockAnchor,
    phases: Option<Probe>,
    uprobes: Vec<Probe>,
) -> Header {
    let command = match &opts.attach {
        // One process attached: its command line names it, like a command's.
        Some(a) if a.pids.len() == 1 => attach::cmdline(a.pids[0]),
        Some(_) => Vec::new(),
        None => opts.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
    };
    let attach = opts.attach.as_ref().map(|a| mltrace_log::Attach {
        pids: a.pids.clone(),
        all: a.all,
        comm: a.comm.clone(),
        cgroup: a.cgroup.as_ref().map(|p| p.display().to_string()),
        path: a.path.clone(),
        duration_ns: a.duration.map(|d| d.as_nanos() as u64),
    });
    Header {
        mltrace_version: VERSION.into(),
        source: "record".into(),
        host: system::hostname(),
        kernel: system::kernel_release(),
        cpu_count: system::cpu_count(),
        boot_id: system::boot_id(),
        command,
        cwd: std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default(),
        root_pid,
        recorder_pid: std::process::id(),
        probes: {
            let mut p = bpf::probes(plan);
            if let Some(iv) = opts.sample_interval {
                p.push(Probe {
                    subsystem: mltrace_log::subsystem::COUNTERS.into(),
                    mechanism: "/proc".into(),
                    detail: format!(
                        "every {} ms: /proc/stat, /proc/meminfo, /proc/pressure, /proc/diskstats, /proc/net/dev, /sys/class/infiniband, /proc/PID/stat+statm",
                        iv.as_millis()
                    ),
                });
            }
            if opts.gpu.is_some() {
                p.push(Probe {
                    subsystem: mltrace_log::subsystem::GPU.into(),
                    mechanism: "NVML".into(),
                    detail: opts.gpu_devices.join("; "),
                });
            }
            p.extend(uprobes);
            p.extend(phases);
            p
        },
        clock: "boottime".into(),
        start,
        diskstats: if plan.block.is_some() { system::disk_snapshot() } else { None },
        // One host: `mltrace merge` fills this in.
        hosts: Vec::new(),
        attach,
        summary_slow_ns: opts.bpf.summary_slow_ns,
        time_resolution_ns: (opts.time_resolution_ns > 1).then_some(opts.time_resolution_ns),
    }
}
