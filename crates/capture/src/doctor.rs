//! `mltrace doctor`: what this machine can trace, checked for real (by
//! loading and attaching programs), and which probes `record` will use.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::OpenObject;

use crate::bpf::{self, BpfConfig, Plan, SyscallRoute};
use crate::features::{BlockRoute, KernelBtf};
use crate::probe_skel::ProbeSkelBuilder;
use crate::system;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Works.
    Ok,
    /// Missing, but `record` does not need it here.
    Absent,
    /// `record` cannot work without fixing this.
    Fail,
    /// For information.
    Info,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Absent => "absent",
            Status::Fail => "FAIL",
            Status::Info => "info",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
}

fn check(name: &'static str, status: Status, detail: impl Into<String>) -> Check {
    Check { name, status, detail: detail.into() }
}

/// Loads a uprobe program and attaches it to libc's `getpid` (what the
/// CUDA probes do to libcuda).
fn probe_uprobe() -> Result<(), String> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps: {e}"))?;
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.rsplit('/').next().is_some_and(|n| n.starts_with("libc.so") || n.starts_with("libc-")))
        .ok_or("no libc mapped (a static build?)")?
        .to_string();
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let mut open = ProbeSkelBuilder::default().open(&mut storage).map_err(|e| e.to_string())?;
    open.progs.probe_fentry.set_autoload(false);
    open.progs.probe_kprobe.set_autoload(false);
    let skel = open.load().map_err(|e| format!("load: {e}"))?;
    let opts = libbpf_rs::UprobeOpts { func_name: Some("getpid".into()), ..Default::default() };
    let _link = skel
        .progs
        .probe_uprobe
        .attach_uprobe_with_opts(-1, &libc, 0, opts)
        .map_err(|e| format!("attach to {libc}: {e}"))?;
    Ok(())
}

/// The architectures the BPF programs are built for (bpf/kernel.h).
const ARCHES: [&str; 2] = ["x86_64", "aarch64"];

/// What the arm64 build does not do that the x86_64 one does, and why.
#[cfg(target_arch = "aarch64")]
const ARM64_GAPS: &str = "Python 3.9 and 3.10 stacks are not read (their thread ids are pthread_self(), \
     which arm64's thread pointer does not give); the call a sleeping thread is in is not named on kernels \
     with 64 KiB pages or KASAN (kernel stacks other than 16 KiB)";

/// Runs every check. Loading programs needs privileges; without them the
/// privilege check fails and the program checks say why they were skipped.
pub fn run() -> Vec<Check> {
    let mut out = Vec::new();
    let release = system::kernel_release();
    let version = system::kernel_version();
    let arch = std::env::consts::ARCH;
    let new_enough = version.is_some_and(|v| v >= (5, 8));
    out.push(check(
        "kernel",
        if new_enough && ARCHES.contains(&arch) { Status::Ok } else { Status::Fail },
        format!(
            "{release} ({arch}){}",
            if !new_enough {
                "; the BPF ring buffer needs Linux 5.8 or newer"
            } else if !ARCHES.contains(&arch) {
                "; the BPF programs support x86_64 and aarch64 only"
            } else {
                ""
            }
        ),
    ));
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        out.push(check("arm64", Status::Info, format!("{} KiB pages; {ARM64_GAPS}", page / 1024)));
    }
    let missing = system::missing_privileges();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    out.push(if missing.is_empty() {
        check("privileges", Status::Ok, if root { "root" } else { "CAP_BPF and CAP_PERFMON" })
    } else {
        check(
            "privileges",
            Status::Fail,
            format!(
                "missing {}: run with sudo, or `sudo setcap cap_bpf,cap_perfmon+ep $(command -v mltrace)`",
                missing.join(", ")
            ),
        )
    });
    out.push(check("attach", Status::Info, crate::attach::who_may_trace()));
    let kernel = KernelBtf::load();
    out.push(if kernel.available() {
        check("BTF", Status::Ok, "/sys/kernel/btf/vmlinux (CO-RE relocations)")
    } else {
        check("BTF", Status::Fail, "no /sys/kernel/btf/vmlinux: the kernel needs CONFIG_DEBUG_INFO_BTF=y")
    });
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
    out.push(check(
        "perf_event_paranoid",
        Status::Info,
        format!("{} (does not matter with root or CAP_PERFMON)", paranoid.trim()),
    ));
    let tps = [
        "sys_enter",
        "sys_exit",
        "sched_process_fork",
        "sched_process_exec",
        "sched_process_exit",
        "sched_process_free",
        "task_rename",
        "block_io_start",
        "block_rq_insert",
        "block_rq_issue",
        "block_rq_complete",
        "mm_filemap_add_to_page_cache",
        "io_uring_submit_req",
        "io_uring_complete",
        "sched_switch",
        "sched_waking",
        "sched_migrate_task",
        "mm_filemap_fault",
    ];
    let (have, lack): (Vec<&str>, Vec<&str>) = tps.iter().partition(|t| kernel.has_tracepoint(t));
    out.push(check(
        "tracepoints",
        if lack.iter().any(|t| {
            !t.starts_with("block_io")
                && !t.starts_with("block_rq_insert")
                && !t.starts_with("mm_filemap")
                && !t.starts_with("io_uring")
                && !t.starts_with("sched_switch")
                && !t.starts_with("sched_wak")
                && !t.starts_with("sched_migrate")
        }) {
            Status::Fail
        } else {
            Status::Ok
        },
        if lack.is_empty() { format!("all {} found", have.len()) } else { format!("missing: {}", lack.join(", ")) },
    ));
    if !missing.is_empty() {
        out.push(check("programs", Status::Info, "not tried without privileges"));
        return out;
    }
    // Every route this kernel may have, each loaded for real: record falls
    // back from one to the other, and a test of both must see both.
    let mut plan = None;
    let fast = bpf::fast_possible(&kernel);
    for route in [SyscallRoute::Calls, SyscallRoute::Trampoline, SyscallRoute::Fast, SyscallRoute::Compat] {
        let name = match route {
            SyscallRoute::Calls => "per-call route",
            SyscallRoute::Trampoline => "trampoline route",
            SyscallRoute::Fast => "fast route",
            SyscallRoute::Compat => "compat route",
        };
        if route == SyscallRoute::Fast && !fast {
            out.push(check(name, Status::Absent, "needs Linux 5.11+ with BTF (task storage for tracing programs)"));
            continue;
        }
        let cfg = BpfConfig { ring_bytes: 1 << 16, route: Some(route), ..Default::default() };
        let mut p = Plan::new(&cfg, &kernel);
        let possible = match route {
            SyscallRoute::Calls => &p.calls_possible,
            SyscallRoute::Trampoline => &p.trampoline_possible,
            _ => &Ok(()),
        };
        if let Err(why) = possible {
            out.push(check(name, Status::Absent, why.clone()));
            continue;
        }
        let mut storage: [MaybeUninit<_>; 6] = std::array::from_fn(|_| MaybeUninit::uninit());
        match bpf::load(&mut storage, &cfg, &mut p) {
            Ok(bpf::Loaded { skel, call_links, .. }) => {
                let calls = if call_links.is_empty() {
                    String::new()
                } else {
                    format!(", {} per-call tracepoints", call_links.len())
                };
                let n = skel.object().progs().filter(|p| p.autoload()).count();
                let uring = match &p.uring {
                    Err(why) if why.starts_with("its programs") => format!("; io_uring left out: {why}"),
                    _ => String::new(),
                };
                let batched = if bpf::batching(&skel) {
                    "; records sent in batches of up to 4 KiB a CPU"
                } else {
                    "; each record sent alone (a batch could not be sent on a CPU)"
                };
                out.push(check(
                    name,
                    Status::Ok,
                    format!(
                        "{}: {n} programs verified, loaded and attached{calls} (with their maps and {}){batched}{uring}",
                        route.describe(),
                        rings_said()
                    ),
                ));
                // The perf events, for real: the same as `record` does.
                drop(bpf::attach_faults(&skel, &mut p));
                // What record takes by itself: the first that loads of
                // the fast and compat routes (the per-call and trampoline
                // ones are only taken when asked).
                if !matches!(route, SyscallRoute::Calls | SyscallRoute::Trampoline) {
                    plan.get_or_insert(p);
                }
            }
            Err(e) => out.push(check(name, Status::Absent, format!("did not load: {e}"))),
        };
    }
    let Some(plan) = plan else {
        out.push(check("programs", Status::Fail, "no route loaded (see above)"));
        return out;
    };
    out.push(check(
        "programs",
        Status::Ok,
        format!("record uses the {} route ({})", bpf::route_name(plan.route), plan.route.describe()),
    ));
    for p in bpf::probes(&plan) {
        use mltrace_log::subsystem::*;
        let name = match p.subsystem.as_str() {
            SYSCALLS => "syscall probes",
            PROCESSES => "process probes",
            PAGE_CACHE => "page-cache probe",
            IO_URING => "io_uring probes",
            SCHEDULING => "scheduling probes",
            MAPPINGS => "mapping probes",
            MAJOR_FAULTS => "major-fault probe",
            BLOCK => "block probes",
            // One this list does not name yet: named in its line.
            other => {
                out.push(check("probes", Status::Ok, format!("{other}: {}: {}", p.mechanism, p.detail)));
                continue;
            }
        };
        out.push(check(name, Status::Ok, format!("{}: {}", p.mechanism, p.detail)));
    }
    if let Some(at) = plan.tracefs_mounted {
        out.push(check("tracefs", Status::Info, format!("was not mounted: mounted it at {at} (it stays mounted)")));
    }
    if let Some(why) = &plan.tracefs_unusable {
        out.push(check(
            "tracefs",
            Status::Absent,
            format!("{why}: no page cache, no io_uring requests, no fault start times"),
        ));
    } else if plan.page_cache.is_none() {
        out.push(check(
            "page-cache probe",
            Status::Absent,
            "no filemap:mm_filemap_add_to_page_cache: bytes from storage are not attributed to files",
        ));
    }
    if let Err(why) = &plan.uring {
        out.push(check("io_uring probes", Status::Absent, format!("{why}: io_uring requests are not recorded")));
    }
    out.push(check(
        "libaio",
        Status::Ok,
        "io_submit, io_getevents, io_pgetevents through the syscall probes (with the first iocb's file)",
    ));
    if !plan.sched {
        out.push(check(
            "scheduling probes",
            Status::Absent,
            "no sched_switch/sched_waking/sched_migrate_task: no thread states and no data-wait verdict",
        ));
    }
    if let Some(why) = &plan.fault_fallback {
        out.push(check("major-fault probe", Status::Absent, format!("{why}: major faults are not recorded")));
    }
    if plan.block.is_none() {
        out.push(check("block probes", Status::Fail, "block_rq_issue/block_rq_complete missing: no block I/O"));
    } else if plan.block == Some(BlockRoute::RqInsert) {
        out.push(check("block probes", Status::Info, "older route: requests issued directly start at block_rq_issue"));
    }
    let unused = "not used by this mltrace (tracepoints are)";
    out.push(match crate::features::program_loads(true) {
        Ok(()) => check("fentry/fexit", Status::Ok, "available (the trampoline route's, --syscall-probes trampoline)"),
        Err(e) => check("fentry/fexit", Status::Absent, format!("{e}: no trampoline route (tracepoints instead)")),
    });
    let uprobes = probe_uprobe();
    for lib in crate::cuda::LIBRARIES {
        let (name, what) = match lib.subsystem {
            mltrace_log::subsystem::CUDA => ("CUDA probes", "CUDA driver calls"),
            _ => ("NCCL probes", "NCCL calls"),
        };
        // Each copy once (ldconfig lists a library under several names),
        // with the entry points record would attach to in it.
        let mut libs: Vec<std::path::PathBuf> =
            lib.candidates().into_iter().filter_map(|p| std::fs::canonicalize(p).ok()).collect();
        libs.sort();
        libs.dedup();
        let mut none_found = !libs.is_empty();
        let found = if libs.is_empty() {
            format!("no {} found here (one a traced process maps is attached then)", lib.soname())
        } else {
            let each: Vec<String> = libs
                .iter()
                .map(|p| match lib.entry_points(p) {
                    Ok((n, of)) => {
                        none_found &= n == 0;
                        format!("{}: {n} of {of} entry points", p.display())
                    }
                    Err(e) => format!("{}: symbols unreadable ({e})", p.display()),
                })
                .collect();
            each.join(", ")
        };
        out.push(match &uprobes {
            Ok(()) if none_found => check(name, Status::Absent, format!("{found}: {what} in it are not recorded")),
            Ok(()) => check(name, Status::Ok, format!("uprobes attach here ({what}); {found}")),
            Err(e) => check(name, Status::Absent, format!("uprobes: {e}: {what} are not recorded")),
        });
    }
    out.push(python_check());
    let gpu = mltrace_sample::gpu::open(&mltrace_sample::gpu::GpuConfig::default());
    out.push(match gpu {
        Ok(g) if g.sampler.is_some() => check("NVML", Status::Ok, format!("{}: {}", g.library, g.devices.join("; "))),
        Ok(g) => check("NVML", Status::Absent, g.note.unwrap_or_default().replace("no GPU metrics: ", "")),
        Err(e) => check("NVML", Status::Absent, e.to_string()),
    });
    let kprobe_pmu = std::path::Path::new("/sys/bus/event_source/devices/kprobe").exists();
    out.push(match crate::features::program_loads(false) {
        Ok(()) => check("kprobes", Status::Ok, format!("available; {unused}")),
        Err(e) if !kprobe_pmu => {
            check("kprobes", Status::Absent, format!("{e} (no kprobe PMU: CONFIG_KPROBES is off); {unused}"))
        }
        Err(e) => check("kprobes", Status::Absent, format!("{e}; {unused}")),
    });
    out
}

/// Whether the Python stacks of this machine's `python3` can be walked:
/// one is started, and found as `record` finds a traced process's.
fn python_check() -> Check {
    use crate::python::layout::{discover, Discovery};
    use std::process::{Command, Stdio};
    const NAME: &str = "Python stacks";
    let child = Command::new("python3")
        .args(["-c", "import sys; sys.stdin.read()"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return check(NAME, Status::Absent, format!("no python3 to look at here ({e})")),
    };
    let started = std::time::Instant::now();
    let found = loop {
        match discover(child.id()) {
            Discovery::NotYet | Discovery::NotPython if started.elapsed() < std::time::Duration::from_secs(3) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            d => break d,
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    match found {
        Discovery::Ready(i) => check(
            NAME,
            Status::Ok,
            format!(
                "python3 here is CPython {} ({}): its waits for the GIL are told apart, and its stacks walked with \
                 record --py-stacks on (offsets {})",
                i.version_text(),
                i.path.display(),
                if i.debug_offsets { "from its own _Py_DebugOffsets" } else { "from mltrace's table" }
            ),
        ),
        Discovery::Unsupported { version, why } => {
            check(NAME, Status::Absent, format!("python3 here (Python {version}): no stacks: {why}"))
        }
        Discovery::NotYet | Discovery::NotPython => {
            check(NAME, Status::Absent, "python3 here: no interpreter found in it within 3 s")
        }
    }
}

/// Whether `record` can run, given the checks.
pub fn ready(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.status != Status::Fail)
}

/// The ring buffers a recording writes to, said for `doctor`.
fn rings_said() -> String {
    match bpf::ring_sizes(BpfConfig::default().ring_bytes) {
        Ok(sizes) => {
            let each = sizes.iter().copied().max().unwrap_or(0);
            let sharing = sizes.iter().filter(|&&s| s == each).count();
            let offline = sizes.len() - sharing;
            let size = if each >= 1 << 20 { format!("{} MiB", each >> 20) } else { format!("{} KiB", each >> 10) };
            let cpus = |n: usize| if n == 1 { "1 CPU".to_string() } else { format!("{n} CPUs") };
            let mut said =
                format!("a ring buffer of {size} by default (record --ring-size) for each of {} online", cpus(sharing));
            if offline > 0 {
                said.push_str(&format!(", a page for each of {} offline now", cpus(offline)));
            }
            said
        }
        Err(e) => format!("a ring buffer per CPU ({e})"),
    }
}
