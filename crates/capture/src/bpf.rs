//! Loading and attaching the BPF programs, the traced set, and what
//! spans every program (the drop counters, the runs the kernel skipped,
//! reading a task iterator). Each subsystem's maps are read by its own
//! module, beside its decoder state: the summary sums in
//! `summary.rs`, the CUDA call counts in [`crate::cuda`], the file
//! identities the kernel should forget in [`crate::files`], io_uring's
//! opcodes, the anonymous mmaps and the open scheduling spans in
//! `decode/` (aio.rs, mem.rs, sched.rs).

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType, OpenObject};

use crate::error::CaptureError;
use crate::features::{BlockRoute, FaultRoute, KernelBtf, PageCacheRoute, UringRoute, WakeContext};
use crate::skel::types::lost;
use crate::skel::{MltraceSkel, MltraceSkelBuilder};
use crate::syscalls;
use crate::system::Tracefs;

pub use crate::skel::MltraceSkel as Skeleton;

/// Number of drop-counter slots (LOST__COUNT).
pub const LOST_SLOTS: usize = lost::LOST__COUNT.0 as usize;

// The kernel's drop counters are LostKind's codes, and the counts user space
// keeps (kernel and its own kinds in one array, see recorder::consumer) have
// a slot for every LostKind. decode's tests check that each LOST_* of
// events.h is the LostKind of its name and none is one of user space's own.
const _: () = {
    use mltrace_log::LostKind;
    assert!(lost::LOST_RING.0 == LostKind::RingFull as u32);
    assert!(lost::LOST_MAP.0 == LostKind::MapFull as u32);
    assert!(lost::LOST_STR.0 == LostKind::StringRead as u32);
    let mut i = 0;
    while i < LostKind::ALL.len() {
        assert!((LostKind::ALL[i] as usize) < LOST_SLOTS, "a LostKind has no slot below LOST__COUNT");
        i += 1;
    }
};

#[derive(Clone, Debug)]
pub struct BpfConfig {
    /// Ring buffer space in bytes, shared out among the online CPUs'
    /// rings (see [`ring_sizes`]); 0: 64 MiB, at most 32 and at least 1
    /// MiB a CPU.
    pub ring_bytes: u32,
    /// Record block I/O (system-wide).
    pub block: bool,
    /// Force a block route instead of the best the kernel has.
    pub block_route: Option<BlockRoute>,
    /// Force a syscall route instead of the best the kernel has.
    pub route: Option<SyscallRoute>,
    /// Record the pages traced processes bring into the page cache.
    pub page_cache: bool,
    /// Record io_uring read/write requests.
    pub uring: bool,
    /// Record context switches, wake-ups and migrations of traced threads.
    pub sched: bool,
    /// Record mmap, munmap, mremap and major page faults.
    pub mappings: bool,
    /// Record the CUDA driver calls that wait for the GPU and the NCCL
    /// calls (uprobes on libcuda and libnccl, see [`crate::cuda`]).
    pub cuda: bool,
    /// Count kernel and graph launches too (an uprobe each: about a
    /// microsecond per launch).
    pub cuda_launches: bool,
    /// Attaching to running processes (`record -p`, `record -a`) instead
    /// of starting a command.
    pub adopt: Option<Adopt>,
    /// `record --detail summary`: the slow threshold (ns). Reads, writes,
    /// syncs and closes are summed in the kernel (see [`io_sums`]); only
    /// those that fail or take this long are recorded one by one.
    pub summary_slow_ns: Option<u64>,
    /// Walk the Python stack of each recorded call of a Python process
    /// (python.bpf.h; Python processes' interpreters are read either way,
    /// for their waits for the GIL).
    pub py_stacks: bool,
    /// Not root: the recording user's (uid, gid). A traced process whose
    /// user or group becomes another (a setuid or setgid exec, setuid()
    /// and its kin) stops being traced there, in the kernel, with what it
    /// starts; `None` (root): everything stays traced.
    pub only_ids: Option<(u32, u32)>,
}

/// How the kernel side takes processes that were running before it was
/// loaded: their threads get their state at their first recorded syscall.
#[derive(Clone, Debug, Default)]
pub struct Adopt {
    /// `record -a`: every process passing the filters (else only those
    /// user space adds, and what they start).
    pub all: bool,
    /// `--comm`: the process's name (its leader's comm, at most 15 bytes).
    pub comm: Option<Vec<u8>>,
    /// `--cgroup`: an open cgroup v2 directory; its tasks and those of the
    /// cgroups below it.
    pub cgroup: Option<std::sync::Arc<std::fs::File>>,
    /// `--path`: reads and writes of files not under this prefix are
    /// dropped in the kernel (at most 255 bytes; the decoder filters the
    /// other file events).
    pub path: Option<Vec<u8>>,
}

impl Default for BpfConfig {
    fn default() -> Self {
        BpfConfig {
            ring_bytes: 0,
            block: true,
            block_route: None,
            route: None,
            page_cache: true,
            uring: true,
            sched: true,
            mappings: true,
            cuda: true,
            cuda_launches: false,
            adopt: None,
            summary_slow_ns: None,
            py_stacks: false,
            only_ids: None,
        }
    }
}

/// How syscalls and processes are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyscallRoute {
    /// Tracepoint programs on each recorded call's own
    /// `syscalls:sys_enter_NAME`/`sys_exit_NAME` (Linux 5.15+, tracefs):
    /// the calls mltrace does not record run no program at all; state in
    /// per-task storage as on the fast route. Only when asked for: each
    /// recorded call costs more than on the fast route.
    Calls,
    /// fentry/fexit programs on each recorded call's own kernel function
    /// (`__x64_sys_NAME`; Linux 5.11+ with BPF trampolines): a call
    /// mltrace does not record runs no program and keeps the kernel's fast
    /// syscall path; state in per-task storage. Only when asked for, until
    /// its cost is measured on a real kernel (docs/performance.md).
    Trampoline,
    /// tp_btf programs with per-task storage (Linux 5.11+): no hashing on
    /// the hot path, BTF pointer loads instead of helper calls.
    Fast,
    /// raw_tp programs with hash maps: kernels without task storage.
    Compat,
}

/// The route's name, as `--syscall-probes` takes it.
pub fn route_name(r: SyscallRoute) -> &'static str {
    match r {
        SyscallRoute::Calls => "per-call",
        SyscallRoute::Trampoline => "trampoline",
        SyscallRoute::Fast => "fast",
        SyscallRoute::Compat => "compat",
    }
}

/// Whether this kernel can have the per-call route: the fast route's
/// needs, the registers of the task (bpf_task_pt_regs, 5.15), and the
/// tracepoint of every call recorded (`calls`) in tracefs; else why not.
pub fn calls_possible(kernel: &KernelBtf, calls: &[&str], tracefs_ok: bool) -> Result<(), String> {
    if crate::system::kernel_version().is_none_or(|v| v < (5, 15)) || !kernel.available() {
        return Err("needs Linux 5.15 or newer with BTF (the task's registers in a tracepoint program)".into());
    }
    if !tracefs_ok {
        return Err("needs tracefs (the per-call tracepoints are named there)".into());
    }
    let missing: Vec<&str> = calls
        .iter()
        .copied()
        .filter(|c| !crate::system::tracepoint_exists("syscalls", &format!("sys_enter_{c}")))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the kernel has no syscalls:sys_enter_* tracepoint for {}", missing.join(", ")))
    }
}

/// The names of the recorded calls, as their tracepoints name them (the
/// kernel's definitions: 64-bit `sendfile` is defined as `sendfile64`).
pub fn call_names(mappings: bool, setid: bool) -> Vec<&'static str> {
    syscalls::traced(mappings, setid).iter().map(|&(nr, o)| syscalls::tracepoint_name(nr, o)).collect()
}

/// The kernel function behind system call `name` (as its tracepoints
/// name it): what the trampoline route's programs attach to.
pub fn syscall_function(name: &str) -> String {
    #[cfg(target_arch = "aarch64")]
    return format!("__arm64_sys_{name}");
    #[cfg(not(target_arch = "aarch64"))]
    format!("__x64_sys_{name}")
}

/// Whether this kernel can have the trampoline route: the fast route's
/// needs, BPF trampolines (an fentry program loads and attaches: that
/// depends on the kernel's configuration, not its version), and a
/// function in its BTF for every call recorded (`calls`); else why not.
pub fn trampoline_possible(kernel: &KernelBtf, calls: &[&str]) -> Result<(), String> {
    if !fast_possible(kernel) {
        return Err("needs Linux 5.11 or newer with BTF (task storage for tracing programs)".into());
    }
    crate::features::program_loads(true).map_err(|e| format!("needs BPF trampolines (fentry here: {e})"))?;
    let missing: Vec<&str> = calls.iter().copied().filter(|c| !kernel.has_function(&syscall_function(c))).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the kernel's BTF has no function for {}", missing.join(", ")))
    }
}

/// Whether this kernel can have the fast route: task storage for tracing
/// programs came in 5.11, and tp_btf needs the kernel's BTF.
pub fn fast_possible(kernel: &KernelBtf) -> bool {
    crate::system::kernel_version().is_some_and(|v| v >= (5, 11)) && kernel.available()
}

impl SyscallRoute {
    pub fn describe(self) -> &'static str {
        match self {
            SyscallRoute::Calls => "per-call tracepoints, per-task storage",
            SyscallRoute::Trampoline => "fentry/fexit on each recorded call's kernel function, per-task storage",
            SyscallRoute::Fast => "tp_btf, per-task storage",
            SyscallRoute::Compat => "raw_tp, hash maps",
        }
    }
}

/// The programs that will be (or were) attached, for the log header.
#[derive(Clone, Debug)]
pub struct Plan {
    pub route: SyscallRoute,
    pub block: Option<BlockRoute>,
    pub page_cache: Option<PageCacheRoute>,
    /// io_uring requests, or why not (the kernel's tracepoints, `--io-uring
    /// off`, or their programs did not load).
    pub uring: Result<UringRoute, String>,
    /// Whether scheduling is recorded (asked for, and the kernel has the tracepoints).
    pub sched: bool,
    /// How a wake-up raised by an interrupt is told from one by a task.
    pub wake_context: WakeContext,
    /// `record --detail summary`: on the task-storage routes, scheduling is
    /// summed per thread between its sleeps.
    pub summary: bool,
    /// mmap, munmap and mremap.
    pub mappings: bool,
    /// The Python stacks of recorded calls.
    pub py_stacks: bool,
    /// CUDA driver and NCCL calls: the programs are loaded (attached by
    /// [`crate::cuda`] to the libraries it finds).
    pub cuda: bool,
    /// Their uprobes go on as uprobe_multi links (6.6+): a library's
    /// probes detach in a few kernel grace periods, not one each.
    pub uprobe_multi: bool,
    /// Major faults; `None` also when their perf event could not be
    /// attached ([`attach_faults`] says why in `fault_fallback`).
    pub faults: Option<FaultRoute>,
    pub fault_fallback: Option<String>,
    /// Why the fast route was not used although the kernel should have it.
    pub fallback: Option<String>,
    /// Whether the kernel can have the fast route at all.
    pub fast_possible: bool,
    /// Whether it can have the per-call route, or why not.
    pub calls_possible: Result<(), String>,
    /// Whether it can have the trampoline route, or why not.
    pub trampoline_possible: Result<(), String>,
    /// Why tracefs cannot be used (not root, not mounted and not
    /// mountable): page cache, io_uring and fault start times are then
    /// left out.
    pub tracefs_unusable: Option<String>,
    /// Where mltrace mounted tracefs, which was not mounted.
    pub tracefs_mounted: Option<&'static str>,
}

impl Plan {
    pub fn new(cfg: &BpfConfig, kernel: &KernelBtf) -> Plan {
        let block = if cfg.block { cfg.block_route.or_else(|| BlockRoute::choose(kernel)) } else { None };
        let fast_ok = fast_possible(kernel);
        let wants_tracefs = cfg.page_cache || cfg.uring || cfg.mappings || cfg.route == Some(SyscallRoute::Calls);
        let state = if wants_tracefs { crate::system::tracefs() } else { Tracefs::Ready };
        let tracefs_mounted = if let Tracefs::MountedNow(at) = state { Some(at) } else { None };
        let tracefs_unusable = if let Tracefs::Unusable(why) = state { Some(why) } else { None };
        let tracefs = tracefs_unusable.is_none();
        let names = call_names(cfg.mappings, cfg.only_ids.is_some());
        let calls_ok = calls_possible(kernel, &names, tracefs);
        let tramp_ok = match cfg.route {
            Some(SyscallRoute::Trampoline) => trampoline_possible(kernel, &names),
            _ => Err("not tried (only taken when asked for)".into()),
        };
        // Neither the per-call route by itself (measured slower where most
        // calls are recorded) nor the trampoline one (its cost, the reason
        // to take it, is not measured on a real kernel yet:
        // docs/performance.md): they are asked for.
        let route = cfg.route.unwrap_or(if fast_ok { SyscallRoute::Fast } else { SyscallRoute::Compat });
        let page_cache = if cfg.page_cache && tracefs { PageCacheRoute::choose(kernel) } else { None };
        let uring = match (&tracefs_unusable, cfg.uring) {
            (_, false) => Err("turned off (--io-uring off)".to_string()),
            (Some(why), true) => Err(why.clone()),
            (None, true) => UringRoute::choose(kernel).map_err(str::to_string),
        };
        let sched = cfg.sched && SCHED_TRACEPOINTS.iter().all(|t| kernel.has_tracepoint(t));
        let wake_context =
            if sched { WakeContext::choose(kernel) } else { WakeContext::Unknown("no scheduling probes".into()) };
        let faults = cfg.mappings.then(|| match FaultRoute::choose(kernel) {
            FaultRoute::PerfAndFilemap if !tracefs => FaultRoute::Perf,
            r => r,
        });
        Plan {
            route,
            block,
            page_cache,
            uring,
            sched,
            wake_context,
            summary: cfg.summary_slow_ns.is_some(),
            mappings: cfg.mappings,
            py_stacks: cfg.py_stacks,
            cuda: cfg.cuda,
            uprobe_multi: cfg.cuda && crate::cuda::uprobe_multi_works(),
            faults,
            fault_fallback: None,
            fallback: None,
            fast_possible: fast_ok,
            calls_possible: calls_ok,
            trampoline_possible: tramp_ok,
            tracefs_unusable,
            tracefs_mounted,
        }
    }
}

/// The tracepoints scheduling capture attaches to.
pub const SCHED_TRACEPOINTS: [&str; 3] = ["sched_switch", "sched_waking", "sched_migrate_task"];

pub(crate) fn bpf_err(stage: &str) -> impl FnOnce(libbpf_rs::Error) -> CaptureError + '_ {
    move |source| CaptureError::Bpf { stage: stage.to_string(), source }
}

/// Loads and attaches the programs of `plan`. If the fast route fails to
/// load (a kernel that lacks a piece of it), falls back to the compat
/// route and says so in `plan`. io_uring's programs read kernel types
/// that change between versions: when they alone keep the rest from
/// loading, recording goes on without them and `plan.uring` says why.
pub fn load<'obj>(
    storage: &'obj mut [MaybeUninit<OpenObject>; 6],
    cfg: &BpfConfig,
    plan: &mut Plan,
) -> Result<Loaded<'obj>, CaptureError> {
    if cfg.route == Some(SyscallRoute::Fast) && !plan.fast_possible {
        return Err(CaptureError::Unsupported(format!(
            "the fast syscall route needs Linux 5.11 or newer with BTF (task storage for tracing programs); \
             this is {}: use --syscall-probes compat (or auto)",
            crate::system::kernel_release()
        )));
    }
    if let (Some(SyscallRoute::Trampoline), Err(why)) = (cfg.route, &plan.trampoline_possible) {
        return Err(CaptureError::Unsupported(format!(
            "the trampoline syscall route {why}; this is {}: use --syscall-probes fast, compat or auto",
            crate::system::kernel_release()
        )));
    }
    if let (Some(SyscallRoute::Calls), Err(why)) = (cfg.route, &plan.calls_possible) {
        return Err(CaptureError::Unsupported(format!(
            "the per-call syscall route {why}; this is {}: use --syscall-probes fast, compat or auto",
            crate::system::kernel_release()
        )));
    }
    let with_uring = plan.uring.is_ok();
    let mut tries = Vec::new();
    // Without a route asked for: the chosen one, then those below it.
    let order = [SyscallRoute::Calls, SyscallRoute::Trampoline, SyscallRoute::Fast, SyscallRoute::Compat];
    let first = order.iter().position(|&r| r == plan.route).unwrap_or(0);
    for (i, &route) in order.iter().enumerate() {
        let possible = match route {
            SyscallRoute::Fast => plan.fast_possible,
            SyscallRoute::Trampoline => plan.trampoline_possible.is_ok(),
            _ => true,
        };
        let below = i > first && possible;
        let wanted = route == plan.route || (cfg.route.is_none() && below);
        if wanted {
            tries.push((route, with_uring));
            if with_uring {
                tries.push((route, false));
            }
        }
    }
    let first_line = |e: &CaptureError| e.to_string().lines().next().unwrap_or_default().to_string();
    let (mut route_error, mut uring_error, mut last) = (None::<String>, None, None);
    for (slot, (route, uring)) in storage.iter_mut().zip(tries) {
        let mut p = plan.clone();
        p.route = route;
        if !uring {
            p.uring = Err(String::new());
        }
        match load_route(slot, cfg, &p) {
            Ok(loaded) => {
                if route != plan.route {
                    plan.fallback = route_error;
                    plan.route = route;
                }
                if with_uring && !uring {
                    plan.uring = Err(format!("its programs did not load ({})", uring_error.unwrap_or_default()));
                }
                return Ok(loaded);
            }
            Err(e) => {
                if uring {
                    uring_error = Some(first_line(&e));
                }
                if route != SyscallRoute::Compat && route_error.is_none() {
                    route_error = Some(format!("{} route: {}", route_name(route), first_line(&e)));
                }
                last = Some(e);
            }
        }
    }
    Err(last.expect("at least one route is tried"))
}

fn load_route<'obj>(
    storage: &'obj mut MaybeUninit<OpenObject>,
    cfg: &BpfConfig,
    plan: &Plan,
) -> Result<Loaded<'obj>, CaptureError> {
    let builder = MltraceSkelBuilder::default();
    let mut open = builder.open(storage).map_err(bpf_err("opening the BPF object"))?;
    let rings = cpu_rings(cfg.ring_bytes)?;
    let rodata = open.maps.rodata_data.as_deref_mut().expect("rodata is mmapped");
    rodata.sys_op = syscalls::table(plan.mappings, cfg.only_ids.is_some());
    if let Some((uid, gid)) = cfg.only_ids {
        rodata.only_uid = uid;
        rodata.only_gid = gid;
    }
    rodata.blk_have_io_start = plan.block == Some(BlockRoute::IoStart);
    rodata.py_stacks_on = cfg.py_stacks;
    if let Some(slow) = cfg.summary_slow_ns {
        rodata.summary = true;
        rodata.summary_slow_ns = slow;
    }
    if let WakeContext::Known { preempt_count, hrtimer_bases, .. } = plan.wake_context {
        rodata.pc_known = true;
        rodata.pc_delta = preempt_count;
        rodata.hb_known = hrtimer_bases.is_some();
        rodata.hb_delta = hrtimer_bases.unwrap_or(0);
    }
    if let Some(a) = &cfg.adopt {
        rodata.adopt = true;
        rodata.adopt_all = a.all;
        rodata.self_tgid = std::process::id();
        if let Some(c) = &a.comm {
            for (d, &b) in rodata.want_comm.iter_mut().zip(c.iter().take(15)) {
                *d = b as i8;
            }
        }
        rodata.want_cgroup = a.cgroup.is_some();
        if let Some(p) = &a.path {
            // Whole components: "/data/" is "/data", "/" is "".
            let p = p.strip_suffix(b"/").unwrap_or(p);
            rodata.want_path_on = true;
            rodata.want_path_len = p.len() as u32;
            for (d, &b) in rodata.want_path.iter_mut().zip(p.iter()) {
                *d = b as i8;
            }
        }
    }
    // The per-call route is the fast one with other syscall programs.
    let fast = plan.route != SyscallRoute::Compat;
    let calls = plan.route == SyscallRoute::Calls;
    let tramp = plan.route == SyscallRoute::Trampoline;
    let progs = &mut open.progs;
    for (p, on) in [
        (&mut progs.sys_enter, !fast),
        (&mut progs.sys_exit, !fast),
        (&mut progs.sched_fork, !fast),
        (&mut progs.sched_exec, !fast),
        (&mut progs.sched_exit, !fast),
        (&mut progs.task_rename, !fast),
        (&mut progs.fast_sys_enter, fast && !calls && !tramp),
        (&mut progs.fast_sys_exit, fast && !calls && !tramp),
        (&mut progs.call_enter, calls),
        (&mut progs.call_exit, calls),
        (&mut progs.fast_sched_fork, fast),
        (&mut progs.fast_sched_exec, fast),
        (&mut progs.fast_sched_exit, fast),
        (&mut progs.fast_task_rename, fast),
        (&mut progs.sched_free, true),
        (&mut progs.pcache_add, !fast && plan.page_cache.is_some()),
        (&mut progs.fast_pcache_add, fast && plan.page_cache.is_some()),
        (&mut progs.block_io_start, !fast && plan.block == Some(BlockRoute::IoStart)),
        (&mut progs.block_rq_insert, !fast && plan.block == Some(BlockRoute::RqInsert)),
        (&mut progs.block_rq_issue, !fast && plan.block.is_some()),
        (&mut progs.fast_block_io_start, fast && plan.block == Some(BlockRoute::IoStart)),
        (&mut progs.fast_block_rq_insert, fast && plan.block == Some(BlockRoute::RqInsert)),
        (&mut progs.fast_block_rq_issue, fast && plan.block.is_some()),
        (&mut progs.block_rq_complete, plan.block.is_some()),
        (&mut progs.uring_submit_req, plan.uring == Ok(UringRoute::SubmitReq)),
        (&mut progs.uring_submit_sqe, plan.uring == Ok(UringRoute::SubmitSqe)),
        (&mut progs.uring_complete, plan.uring.is_ok()),
        (&mut progs.sched_switch, !fast && plan.sched),
        (&mut progs.sched_waking, !fast && plan.sched),
        (&mut progs.sched_migrate, !fast && plan.sched),
        (&mut progs.fast_sched_switch, fast && plan.sched),
        (&mut progs.fast_sched_waking, fast && plan.sched),
        (&mut progs.fast_sched_migrate, fast && plan.sched),
        (&mut progs.major_fault, plan.faults.is_some()),
        (&mut progs.fault_begin, plan.faults == Some(FaultRoute::PerfAndFilemap)),
    ] {
        p.set_autoload(on);
    }
    // Attached below, once per recorded call.
    open.progs.call_enter.set_autoattach(false);
    open.progs.call_exit.set_autoattach(false);
    // The trampoline route: the pair of each recorded call.
    let names = call_names(plan.mappings, cfg.only_ids.is_some());
    for mut p in open.open_object_mut().progs_mut() {
        if let Some(call) = trampoline_call(&p.name().to_string_lossy()) {
            p.set_autoload(tramp && names.contains(&call.as_str()));
        }
    }
    // The uprobes (CUDA driver and NCCL calls): loaded when asked for, as
    // uprobe_multi links where the kernel has them.
    let progs = &mut open.progs;
    for p in [
        &mut progs.cu_stream_sync,
        &mut progs.cu_ctx_sync,
        &mut progs.cu_event_sync,
        &mut progs.cu_memcpy,
        &mut progs.cu_memcpy_dtoh,
        &mut progs.cu_memcpy_dtoh_v1,
        &mut progs.cu_memcpy_htod,
        &mut progs.cu_memcpy_htod_v1,
        &mut progs.cu_memcpy_dtod,
        &mut progs.cu_memcpy_dtod_v1,
        &mut progs.cu_memcpy_peer,
        &mut progs.cu_memcpy_2d,
        &mut progs.cu_memcpy_3d,
        &mut progs.cu_memcpy_2d_v1,
        &mut progs.cu_memcpy_3d_v1,
        &mut progs.cu_return,
        &mut progs.cu_stream_query,
        &mut progs.cu_event_query,
        &mut progs.cu_launch_kernel,
        &mut progs.cu_graph_launch,
        &mut progs.nccl_all_reduce,
        &mut progs.nccl_all_gather,
        &mut progs.nccl_reduce_scatter,
        &mut progs.nccl_broadcast,
        &mut progs.nccl_reduce,
        &mut progs.nccl_send,
        &mut progs.nccl_recv,
        &mut progs.nccl_group_start,
        &mut progs.nccl_group_end,
        &mut progs.nccl_return,
        &mut progs.nccl_comm_init_rank,
        &mut progs.nccl_comm_init_all,
        &mut progs.nccl_init_return,
    ] {
        p.set_autoload(plan.cuda);
        if plan.cuda && plan.uprobe_multi {
            p.set_attach_type(libbpf_rs::ProgramAttachType::TraceUprobeMulti);
        }
    }
    // Kernels before 5.11 cannot even create a task-storage map.
    open.maps.tstore.set_autocreate(fast).map_err(bpf_err("configuring the task storage"))?;
    open.maps.cpu_rings.set_max_entries(rings.len() as u32).map_err(bpf_err("sizing the ring table"))?;
    open.maps.batches.set_max_entries(rings.len() as u32).map_err(bpf_err("sizing the batches"))?;
    open.progs.flush_batch.set_autoattach(false);
    open.maps.cpu_rings.set_inner_map_fd(rings[0].as_fd()).map_err(bpf_err("declaring the rings"))?;
    // Preallocated (LRU): only as big as needed when --path is given.
    if cfg.adopt.as_ref().is_none_or(|a| a.path.is_none()) {
        open.maps.path_excluded.set_max_entries(1).map_err(bpf_err("sizing the --path map"))?;
    }
    // The fast routes sum in each thread's state, read by this iterator.
    open.progs.sum_slots.set_autoload(fast && cfg.summary_slow_ns.is_some());
    open.progs.open_spans.set_autoload(fast && cfg.summary_slow_ns.is_some() && plan.sched);
    // Preallocated too (about 11 MB): only with --detail summary on the
    // compat route.
    if cfg.summary_slow_ns.is_none() || fast {
        open.maps.io_sums.set_max_entries(1).map_err(bpf_err("sizing the summary map"))?;
    }
    let (loaded, refused) = crate::verifier::catching(|| open.load());
    let mut skel = loaded.map_err(|source| CaptureError::Bpf {
        stage: match refused {
            Some(r) => format!("loading the programs ({} route): {r}", route_name(plan.route)),
            None => format!("loading the programs ({} route)", route_name(plan.route)),
        },
        source,
    })?;
    if let Some(cg) = cfg.adopt.as_ref().and_then(|a| a.cgroup.as_ref()) {
        skel.maps
            .cgroup_filter
            .update(&0u32.to_ne_bytes(), &(cg.as_raw_fd() as u32).to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf_err("setting the --cgroup filter"))?;
    }
    for (cpu, m) in rings.iter().enumerate() {
        skel.maps
            .cpu_rings
            .update(&(cpu as u32).to_ne_bytes(), &m.as_fd().as_raw_fd().to_ne_bytes(), MapFlags::ANY)
            .map_err(bpf_err("putting the rings in place"))?;
    }
    // Each CPU's index as its own value: the programs' key for its ring.
    let index: Vec<Vec<u8>> = (0..rings.len() as u32).map(|cpu| cpu.to_ne_bytes().to_vec()).collect();
    skel.maps
        .cpu_index
        .update_percpu(&0u32.to_ne_bytes(), &index, MapFlags::ANY)
        .map_err(bpf_err("numbering the CPUs"))?;
    // Records are batched once the consumer can send a batch on its CPU
    // (flush_batch run there, 5.10+): a kernel that cannot run it gets
    // every record straight.
    if batching_wanted() && send_batch(&skel, 0).is_ok() {
        skel.maps.bss_data.as_deref_mut().expect("bss is mmapped").batch_on = 1;
    }
    if let Err(e) = skel.attach() {
        return Err(bpf_err(&format!("attaching the programs{}", which_fails_to_attach(&skel)))(e));
    }
    let mut links = Vec::new();
    if calls {
        for name in call_names(plan.mappings, cfg.only_ids.is_some()) {
            for (prog, tp) in [(&skel.progs.call_enter, "sys_enter"), (&skel.progs.call_exit, "sys_exit")] {
                let tp = format!("{tp}_{name}");
                links.push(
                    prog.attach_tracepoint(libbpf_rs::TracepointCategory::Syscalls, &tp)
                        .map_err(bpf_err(&format!("attaching to syscalls:{tp}")))?,
                );
            }
        }
    }
    Ok(Loaded { skel, call_links: links, rings })
}

/// The size of each possible CPU's ring when they share `total` bytes.
/// The CPUs online now share it: each gets the largest power of two that
/// fits its share, and at least a page. `total` 0: 64 MiB, at most 32 and
/// at least 1 MiB a ring: one busy CPU's ring holds its burst alone, and
/// with two CPUs 32 MiB is what the one shared ring held before (16 MiB
/// each let a debug build's consumer, behind a one-worker loader of
/// 250,000 calls a second, lose records). A CPU offline now gets a
/// page: machines whose possible CPUs far outnumber their online ones
/// (hot-plug slots) would otherwise lock megabytes for CPUs that never run.
pub fn ring_sizes(total: u32) -> Result<Vec<u32>, CaptureError> {
    let possible = libbpf_rs::num_possible_cpus().map_err(bpf_err("counting the CPUs"))?.max(1) as u32;
    // Unreadable: every possible CPU counts as online, as before hot-plug.
    let online = crate::system::online_cpus().unwrap_or_else(|_| (0..possible).collect());
    Ok(ring_sizes_for(total, possible, &online, crate::system::page_size() as u32))
}

fn ring_sizes_for(total: u32, possible: u32, online: &[u32], page: u32) -> Vec<u32> {
    let is_online = |cpu: u32| online.contains(&cpu);
    let sharing = (0..possible).filter(|&c| is_online(c)).count().max(1) as u32;
    let share = match total {
        0 => ((64 << 20) / sharing).clamp(1 << 20, 32 << 20),
        t => (t / sharing).max(page),
    };
    let each = 1u32 << (31 - share.leading_zeros());
    (0..possible).map(|cpu| if is_online(cpu) { each } else { page }).collect()
}

/// A ring per possible CPU, sharing `total` bytes ([`ring_sizes`]).
fn cpu_rings(total: u32) -> Result<Vec<MapHandle>, CaptureError> {
    let sizes = ring_sizes(total)?;
    let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
        sz: size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
        ..Default::default()
    };
    sizes
        .iter()
        .enumerate()
        .map(|(cpu, &size)| {
            MapHandle::create(MapType::RingBuf, None::<&str>, 0, 0, size, &opts)
                .map_err(bpf_err(&format!("creating a ring buffer of {size} bytes for CPU {cpu}")))
        })
        .collect()
}

/// The call a trampoline program is for (`tr_enter_NAME`, `tr_exit_NAME`).
pub fn trampoline_call(prog: &str) -> Option<String> {
    prog.strip_prefix("tr_enter_").or_else(|| prog.strip_prefix("tr_exit_")).map(str::to_string)
}

/// The loaded programs; on the per-call route the links of its two
/// programs to each call's tracepoints: keep both while recording; and the
/// ring of each CPU, in CPU order.
/// Whether records are to be batched: unless `MLTRACE_BATCH=0` (for
/// measuring what batching saves; docs/performance.md).
fn batching_wanted() -> bool {
    std::env::var_os("MLTRACE_BATCH").is_none_or(|v| v != "0")
}

/// Whether the programs batch their records (see `batch_room` in
/// bpf/mltrace/common.bpf.h).
pub fn batching(skel: &MltraceSkel<'_>) -> bool {
    skel.maps.bss_data.as_deref().is_some_and(|b| b.batch_on != 0)
}

/// Sends CPU `cpu`'s batch of records into its ring now: runs flush_batch
/// there (BPF_PROG_TEST_RUN on that CPU).
pub fn send_batch(skel: &MltraceSkel<'_>, cpu: u32) -> Result<(), libbpf_rs::Error> {
    let input = libbpf_rs::ProgramInput { cpu, flags: libbpf_sys::BPF_F_TEST_RUN_ON_CPU, ..Default::default() };
    skel.progs.flush_batch.test_run(input).map(drop)
}

pub struct Loaded<'obj> {
    pub skel: MltraceSkel<'obj>,
    pub call_links: Vec<libbpf_rs::Link>,
    pub rings: Vec<MapHandle>,
}

/// After `attach()` failed: " (NAME, SECTION)" of the first program that
/// fails alone, so the error says which probe this kernel refused.
fn which_fails_to_attach(skel: &MltraceSkel<'_>) -> String {
    skel.object()
        .progs_mut()
        .filter(|p| {
            let section = p.section().to_string_lossy();
            p.autoload()
                && !section.starts_with("perf_event")
                && !section.starts_with("uprobe")
                && !section.starts_with("uretprobe")
        })
        .find(|p| p.attach().is_err())
        .map(|p| format!(" ({}, {})", p.name().to_string_lossy(), p.section().to_string_lossy()))
        .unwrap_or_default()
}

/// Attaches the major-fault program to its perf events (they are not
/// tracepoints: `attach()` leaves them); when that fails here, records
/// without faults and says why in `plan`. Keep the links while recording.
pub fn attach_faults(skel: &MltraceSkel<'_>, plan: &mut Plan) -> Option<crate::faults::FaultLinks> {
    plan.faults?;
    match crate::faults::attach(skel) {
        Ok(links) => Some(links),
        Err(why) => {
            plan.faults = None;
            plan.fault_fallback = Some(why);
            None
        }
    }
}

/// Starts tracing a running process `pid` and each thread it has now (the
/// kernel side adopts the threads it could not add here at their first
/// recorded syscall, and follows the children they start).
pub fn attach_pid(skel: &MltraceSkel<'_>, pid: u32, route: SyscallRoute) -> Result<(), CaptureError> {
    trace_pid(skel, pid, route)?;
    if route != SyscallRoute::Compat {
        const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
        let tids = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
        let value = vec![0u8; std::mem::size_of::<crate::skel::types::tstate>()];
        for tid in tids.filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()).filter(|&t| t != pid as i32) {
            // SAFETY: pidfd_open has no memory preconditions.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) } as libc::c_int;
            if fd >= 0 {
                // A thread that already exited, or a kernel without
                // PIDFD_THREAD (before 6.9): adopted at its first call.
                let _ = skel.maps.tstore.update(&fd.to_ne_bytes(), &value, MapFlags::ANY);
                // SAFETY: closing the fd we opened.
                unsafe { libc::close(fd) };
            }
        }
    }
    Ok(())
}

/// Starts tracing process `pid` (its children are added by the kernel side).
pub fn trace_pid(skel: &MltraceSkel<'_>, pid: u32, route: SyscallRoute) -> Result<(), CaptureError> {
    skel.maps
        .traced
        .update(&pid.to_ne_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(bpf_err("adding the command to the traced set"))?;
    if route != SyscallRoute::Compat {
        // Task storage is keyed by a pidfd from user space.
        // SAFETY: pidfd_open on our own (paused) child.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) } as libc::c_int;
        if fd < 0 {
            return Err(CaptureError::Io { what: "pidfd_open".into(), source: std::io::Error::last_os_error() });
        }
        let value = vec![0u8; std::mem::size_of::<crate::skel::types::tstate>()];
        let r = skel.maps.tstore.update(&fd.to_ne_bytes(), &value, MapFlags::ANY);
        // SAFETY: closing the fd we opened.
        unsafe { libc::close(fd) };
        r.map_err(bpf_err("adding the command to the traced set"))?;
    }
    Ok(())
}

/// The live traced processes, straight from the kernel side's set (which
/// also holds, marked, those whose last thread is exiting).
pub fn traced_pids(skel: &MltraceSkel<'_>) -> Vec<u32> {
    let word = |b: &[u8]| b.get(..4).map(|b| u32::from_ne_bytes(b.try_into().unwrap()));
    skel.maps
        .traced
        .keys()
        .filter(|k| skel.maps.traced.lookup(k, MapFlags::ANY).ok().flatten().and_then(|v| word(&v)) == Some(1))
        .filter_map(|k| word(&k))
        .collect()
}

/// [`traced_pids`], walked again only when the kernel side changed the
/// traced set since the last walk (its `traced_changes`, read from the
/// mapped .bss): a walk reads every bucket of the map (65,536, 1 MiB)
/// in a `bpf()` call per process, about 2 ms of CPU a second at the
/// samplers' ten rounds a second on this VM, and as much cache swept.
#[derive(Default)]
pub struct TracedPids(std::sync::Mutex<Option<(u64, Vec<u32>)>>);

impl TracedPids {
    pub fn get(&self, skel: &MltraceSkel<'_>) -> Vec<u32> {
        // Read before the walk: a change during it makes the next one walk.
        let changes = traced_changes(skel);
        let mut last = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (Some(now), Some((seen, pids))) = (changes, last.as_ref()) {
            if now == *seen {
                return pids.clone();
            }
        }
        let pids = traced_pids(skel);
        *last = changes.map(|c| (c, pids.clone()));
        pids
    }
}

/// How many times the programs have changed `traced` (None without a
/// mapped .bss: then every call walks).
fn traced_changes(skel: &MltraceSkel<'_>) -> Option<u64> {
    let bss = skel.maps.bss_data.as_deref()?;
    let at = std::ptr::addr_of!(bss.traced_changes).cast::<std::sync::atomic::AtomicU64>();
    // SAFETY: an 8-aligned u64 of the mapped .bss, which the programs add
    // to atomically while it is read: read as an atomic.
    Some(unsafe { (*at).load(std::sync::atomic::Ordering::Acquire) })
}

/// The records a task iterator writes, as `T`s (plain-data C structs of
/// the skeleton's types); empty where it is not loaded (`link` None).
pub fn read_iter<T: Copy>(link: Option<&libbpf_rs::Link>, what: &'static str) -> Result<Vec<T>, CaptureError> {
    use std::io::Read;
    let Some(link) = link else { return Ok(Vec::new()) };
    let mut it = libbpf_rs::Iter::new(link).map_err(bpf_err(what))?;
    let mut buf = Vec::new();
    it.read_to_end(&mut buf).map_err(|e| bpf_err(what)(libbpf_rs::Error::from(e)))?;
    Ok(buf
        .chunks_exact(size_of::<T>())
        // SAFETY: T is a plain-data C struct of this size, from the kernel.
        .map(|b| unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) })
        .collect())
}

/// Drop counters summed over CPUs, indexed like `mltrace_log::LostKind`.
pub fn read_lost(skel: &MltraceSkel<'_>) -> [u64; LOST_SLOTS] {
    let mut out = [0u64; LOST_SLOTS];
    for (k, slot) in out.iter_mut().enumerate() {
        if let Ok(Some(per_cpu)) = skel.maps.lost.lookup_percpu(&(k as u32).to_ne_bytes(), MapFlags::ANY) {
            *slot = per_cpu.iter().filter_map(|v| v.get(..8).map(|b| u64::from_ne_bytes(b.try_into().unwrap()))).sum();
        }
    }
    out
}

/// Runs the kernel skipped, summed over every loaded program of ours
/// (`bpf_prog_info.recursion_misses`, 5.12+; 0 before).
pub fn read_skipped(skel: &MltraceSkel<'_>) -> u64 {
    use libbpf_rs::AsRawLibbpf;
    skel.object()
        .progs()
        .map(|p| {
            // SAFETY: a program of a live object; -1 when it is not loaded.
            let fd = unsafe { libbpf_sys::bpf_program__fd(p.as_libbpf_object().as_ptr()) };
            if fd < 0 {
                return 0;
            }
            let mut info = libbpf_sys::bpf_prog_info::default();
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: `info` is as long as `len` says; the kernel writes at most that.
            let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
            if rc == 0 {
                info.recursion_misses
            } else {
                0
            }
        })
        .sum()
}

/// What is attached, for the log header and `mltrace doctor`.
pub fn probes(plan: &Plan) -> Vec<mltrace_log::Probe> {
    let names: Vec<&str> = syscalls::traced(plan.mappings, false).iter().map(|(_, o)| syscalls::op_name(o.0)).collect();
    let mut v = vec![
        mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::SYSCALLS.into(),
            mechanism: plan.route.describe().into(),
            detail: format!("sys_enter + sys_exit: {}", names.join(", ")),
        },
        mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::PROCESSES.into(),
            // The fast route's programs on every route with task storage.
            mechanism: if plan.route == SyscallRoute::Compat { plan.route } else { SyscallRoute::Fast }
                .describe()
                .into(),
            detail: "sched_process_fork, sched_process_exec, sched_process_exit (with the thread's I/O accounting), \
                     sched_process_free, task_rename"
                .into(),
        },
    ];
    if let Some(route) = plan.page_cache {
        v.push(mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::PAGE_CACHE.into(),
            mechanism: if plan.route != SyscallRoute::Compat { "tracepoint, per-task storage" } else { "tracepoint" }
                .into(),
            detail: route.describe().into(),
        });
    }
    if let Ok(route) = plan.uring {
        v.push(mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::IO_URING.into(),
            mechanism: "tracepoint".into(),
            detail: route.describe().into(),
        });
    }
    if plan.sched {
        v.push(mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::SCHEDULING.into(),
            mechanism: if plan.route != SyscallRoute::Compat { "tp_btf, per-task storage" } else { "raw_tp" }.into(),
            detail: if plan.summary && plan.route != SyscallRoute::Compat {
                format!(
                    "sched_switch and sched_waking, summed per traced thread between its sleeps (a span: \
                     time on a CPU, runnable and otherwise, then the sleep, its call and its waker); {}",
                    plan.wake_context.describe()
                )
            } else {
                format!(
                    "sched_switch (traced thread on either side, with the call it sleeps in), sched_waking, \
                     sched_migrate_task; {}",
                    plan.wake_context.describe()
                )
            },
        });
    }
    if plan.mappings {
        let skipped = if plan.route != SyscallRoute::Compat {
            "; munmap and mremap of anonymous memory skipped (bpf_find_vma, 5.17+)"
        } else {
            ""
        };
        v.push(mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::MAPPINGS.into(),
            mechanism: plan.route.describe().into(),
            detail: format!("mmap, munmap, mremap; anonymous mmaps counted per process{skipped}"),
        });
    }
    v.push(mltrace_log::Probe {
        subsystem: mltrace_log::subsystem::PYTHON.into(),
        mechanism: "in the syscall and uprobe programs".into(),
        detail: if plan.py_stacks {
            format!(
                "CPython 3.9 to 3.14 (GIL builds): each recorded call's frames, walked from the thread's state, {} \
                 deep at most, each distinct stack and code object sent once per process; sleeps on the GIL{}",
                crate::python::DEPTH,
                if plan.mappings {
                    ""
                } else {
                    "; without --mappings, a process is walked once user space has read it"
                }
            )
        } else {
            "CPython 3.9 to 3.14 (GIL builds): each interpreter read, for the sleeps on its GIL; stacks not walked \
             (--py-stacks on walks them)"
                .into()
        },
    });
    if let Some(route) = plan.faults {
        v.push(mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::MAJOR_FAULTS.into(),
            mechanism: "perf_event + BPF".into(),
            detail: route.describe().into(),
        });
    }
    if let Some(route) = plan.block {
        v.push(mltrace_log::Probe {
            subsystem: mltrace_log::subsystem::BLOCK.into(),
            mechanism: if plan.route != SyscallRoute::Compat { "tp_btf + raw_tp" } else { "raw_tp" }.into(),
            detail: route.describe().into(),
        });
    }
    v
}

/// With `MLTRACE_BPF_STATS=FILE`: each of this recorder's programs that
/// ran, as `name runs run_time_ns` lines, counted while the kernel's
/// `kernel.bpf_stats_enabled` is 1 (`make bench` sets it): where the time
/// the probes take goes, per program; then the recorder's own CPU time
/// (its threads, user and system) before the command ran and while it
/// ran. Programs are told from another recorder's by being loaded at or
/// after `loaded_since` (boot-time ns).
pub fn write_prog_stats(skel: &MltraceSkel<'_>, loaded_since: u64, startup_cpu_ns: u64) {
    let Some(path) = std::env::var_os("MLTRACE_BPF_STATS") else { return };
    let ours: Vec<String> =
        skel.object().progs().map(|p| p.name().to_string_lossy().chars().take(15).collect()).collect();
    let mut out = String::new();
    for info in libbpf_rs::query::ProgInfoIter::default() {
        let name = info.name.to_string_lossy();
        if info.run_cnt > 0 && info.load_time.as_nanos() as u64 >= loaded_since && ours.iter().any(|n| *n == name) {
            out.push_str(&format!("{name} {} {}\n", info.run_cnt, info.run_time_ns));
        }
    }
    // The recorder's own threads (user + system): before the command ran
    // (loading and verifying the programs), and while it ran.
    let now = mltrace_sample::process_cpu_ns();
    out.push_str(&format!("(recorder,start-up) 1 {startup_cpu_ns}\n"));
    out.push_str(&format!("(recorder,run) 1 {}\n", now.saturating_sub(startup_cpu_ns)));
    if let Err(e) = std::fs::write(&path, out) {
        eprintln!("mltrace: MLTRACE_BPF_STATS: {}: {e}", std::path::Path::new(&path).display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_share_the_space_in_powers_of_two_of_at_least_a_page() {
        let sizes = ring_sizes(0).unwrap();
        assert_eq!(sizes.len(), libbpf_rs::num_possible_cpus().unwrap());
        let page = 4096;
        // Two CPUs online: 32 MiB each of the default 64 (one: 32 too);
        // 3 MiB: 1 MiB each.
        assert_eq!(ring_sizes_for(0, 2, &[0, 1], page), [32 << 20; 2]);
        assert_eq!(ring_sizes_for(0, 1, &[0], page), [32 << 20]);
        assert_eq!(ring_sizes_for(3 << 20, 2, &[0, 1], page), [1 << 20; 2]);
        assert_eq!(ring_sizes_for(1, 2, &[0, 1], page), [page; 2], "a page at least");
        // 64 online: the default's floor of 1 MiB each; a given total is kept.
        let many: Vec<u32> = (0..64).collect();
        assert!(ring_sizes_for(0, 64, &many, page).iter().all(|&s| s == 1 << 20));
        assert!(ring_sizes_for(8 << 20, 64, &many, page).iter().all(|&s| s == 128 << 10));
    }

    /// A VM with 256 CPU slots and 8 CPUs online: the 8 share the space,
    /// the 248 offline get a page each (not 248 MiB).
    #[test]
    fn offline_cpus_get_a_page_each() {
        let online = [0, 1, 2, 3, 8, 9, 10, 11];
        let sizes = ring_sizes_for(0, 256, &online, 4096);
        assert_eq!(sizes.len(), 256);
        for (cpu, &size) in sizes.iter().enumerate() {
            let want = if online.contains(&(cpu as u32)) { 8 << 20 } else { 4096 };
            assert_eq!(size, want, "cpu {cpu}");
        }
        assert_eq!(sizes.iter().map(|&s| u64::from(s)).sum::<u64>(), (64 << 20) + 248 * 4096);
    }

    /// The trampoline route has a pair of programs for every call the
    /// other routes can record, of the same operation, and no other.
    #[test]
    fn each_recorded_call_has_its_trampoline_pair() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
        let ops = crate::decode::tests::c_enum(&std::fs::read_to_string(root.join("events.h")).unwrap(), "op");
        let src = std::fs::read_to_string(root.join("mltrace/syscalls.bpf.h")).unwrap();
        let declared: Vec<(&str, u64)> = src
            .lines()
            .filter_map(|l| l.strip_prefix("TRAMPOLINE(")?.strip_suffix(')')?.split_once(", "))
            .map(|(name, op)| (name, ops.iter().find(|o| o.0 == op).unwrap_or_else(|| panic!("{op}")).1))
            .collect();
        let recorded: Vec<&str> =
            syscalls::traced(true, true).into_iter().map(|(nr, o)| syscalls::tracepoint_name(nr, o)).collect();
        for (nr, o) in syscalls::traced(true, true) {
            let name = syscalls::tracepoint_name(nr, o);
            assert!(declared.contains(&(name, u64::from(o.0))), "{name}: no TRAMPOLINE({name}, op {})", o.0);
        }
        // The calls only x86_64 has (newer architectures have the *at ones).
        let x86_only =
            ["open", "creat", "newstat", "newlstat", "access", "readlink", "rename", "unlink", "mkdir", "rmdir"];
        for (name, _) in &declared {
            let elsewhere = cfg!(not(target_arch = "x86_64")) && x86_only.contains(name);
            assert!(recorded.contains(name) || elsewhere, "TRAMPOLINE({name}) records no call of this arch");
        }
        let mut storage = MaybeUninit::uninit();
        let mut open = MltraceSkelBuilder::default().open(&mut storage).expect("open the object");
        let mut progs: Vec<String> =
            open.open_object_mut().progs_mut().filter_map(|p| trampoline_call(&p.name().to_string_lossy())).collect();
        progs.sort();
        progs.dedup();
        let mut names: Vec<String> = declared.iter().map(|d| d.0.to_string()).collect();
        names.sort();
        assert_eq!(progs, names);
    }
}
