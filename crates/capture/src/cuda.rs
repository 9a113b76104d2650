//! CUDA driver calls and NCCL calls seen from the host: uprobes on
//! `libcuda.so` and `libnccl.so` (the programs are in bpf/mltrace/gpu.bpf.h,
//! one entry program per call and a return program per library).
//!
//! At the start of a recording the probes go on every copy of
//! `libcuda.so.1` / `libnccl.so.2` the dynamic linker would find
//! (`ldconfig -p`, the usual folders, and `$MLTRACE_CUDA_LIB` /
//! `$MLTRACE_NCCL_LIB`), for all processes: the kernel side records only
//! the traced ones. A copy found elsewhere (a container's, a wheel's: PyTorch
//! ships its own libnccl in site-packages/nvidia/nccl/lib) is attached when
//! a traced process maps it; calls it makes before that attach completes
//! are not seen.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use libbpf_rs::{Link, UprobeMultiOpts, UprobeOpts};
use libbpf_rs::{MapCore, MapFlags};

use crate::bpf::Skeleton;
use crate::skel::MltraceSkel;

/// The entry programs, by what they read of the call's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    StreamSync,
    CtxSync,
    EventSync,
    Memcpy,
    DtoH,
    DtoHV1,
    HtoD,
    HtoDV1,
    DtoD,
    DtoDV1,
    Peer,
    Copy2D,
    Copy2DV1,
    Copy3D,
    Copy3DV1,
    /// Only counted (no return program).
    StreamQuery,
    EventQuery,
    /// Only counted, and only with `--cuda-launches`.
    Launch,
    GraphLaunch,
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    Send,
    Recv,
    GroupStart,
    GroupEnd,
    /// ncclCommInitRank, ncclCommInitRankConfig: a communicator's rank and size.
    CommInitRank,
    CommInitAll,
}

/// The driver's entry points: the `_v2` ones (what `cuda.h` names), their
/// per-thread default stream variants (`_ptds`, `_ptsz`), and the legacy
/// ones (32-bit sizes, kept by the driver for old binaries).
const CUDA_SYMBOLS: [(&str, Entry); 35] = [
    ("cuStreamSynchronize", Entry::StreamSync),
    ("cuStreamSynchronize_ptsz", Entry::StreamSync),
    ("cuCtxSynchronize", Entry::CtxSync),
    // CUDA 13's runtime (cudaDeviceSynchronize) calls this one.
    ("cuCtxSynchronize_v2", Entry::CtxSync),
    ("cuEventSynchronize", Entry::EventSync),
    ("cuMemcpy", Entry::Memcpy),
    ("cuMemcpy_ptds", Entry::Memcpy),
    ("cuMemcpyDtoH_v2", Entry::DtoH),
    ("cuMemcpyDtoH_v2_ptds", Entry::DtoH),
    ("cuMemcpyDtoH", Entry::DtoHV1),
    ("cuMemcpyHtoD_v2", Entry::HtoD),
    ("cuMemcpyHtoD_v2_ptds", Entry::HtoD),
    ("cuMemcpyHtoD", Entry::HtoDV1),
    ("cuMemcpyDtoD_v2", Entry::DtoD),
    ("cuMemcpyDtoD_v2_ptds", Entry::DtoD),
    ("cuMemcpyDtoD", Entry::DtoDV1),
    ("cuMemcpyPeer", Entry::Peer),
    ("cuMemcpyPeer_ptds", Entry::Peer),
    ("cuMemcpy2D_v2", Entry::Copy2D),
    ("cuMemcpy2D_v2_ptds", Entry::Copy2D),
    ("cuMemcpy2D", Entry::Copy2DV1),
    ("cuMemcpy3D_v2", Entry::Copy3D),
    ("cuMemcpy3D_v2_ptds", Entry::Copy3D),
    ("cuMemcpy3D", Entry::Copy3DV1),
    ("cuStreamQuery", Entry::StreamQuery),
    ("cuStreamQuery_ptsz", Entry::StreamQuery),
    ("cuEventQuery", Entry::EventQuery),
    ("cuLaunchKernel", Entry::Launch),
    ("cuLaunchKernel_ptsz", Entry::Launch),
    ("cuLaunchKernelEx", Entry::Launch),
    ("cuLaunchKernelEx_ptsz", Entry::Launch),
    ("cuLaunchCooperativeKernel", Entry::Launch),
    ("cuLaunchCooperativeKernel_ptsz", Entry::Launch),
    ("cuGraphLaunch", Entry::GraphLaunch),
    ("cuGraphLaunch_ptsz", Entry::GraphLaunch),
];

impl Entry {
    /// A launch: attached only when asked for.
    fn is_launch(self) -> bool {
        matches!(self, Entry::Launch | Entry::GraphLaunch)
    }
}

/// NCCL's entry points (each also exported as `pnccl*`, an alias at the
/// same address: not attached twice).
const NCCL_SYMBOLS: [(&str, Entry); 12] = [
    ("ncclAllReduce", Entry::AllReduce),
    ("ncclAllGather", Entry::AllGather),
    ("ncclReduceScatter", Entry::ReduceScatter),
    ("ncclBroadcast", Entry::Broadcast),
    ("ncclReduce", Entry::Reduce),
    ("ncclSend", Entry::Send),
    ("ncclRecv", Entry::Recv),
    ("ncclGroupStart", Entry::GroupStart),
    ("ncclGroupEnd", Entry::GroupEnd),
    ("ncclCommInitRank", Entry::CommInitRank),
    ("ncclCommInitRankConfig", Entry::CommInitRank),
    ("ncclCommInitAll", Entry::CommInitAll),
];

/// A library the probes go on.
pub struct Library {
    /// The log header's probe entry, and `MLTRACE_<NAME>_LIB`'s name.
    pub subsystem: &'static str,
    /// For messages.
    title: &'static str,
    /// What the dynamic linker is asked for (`ldconfig -p`'s left side).
    soname: &'static str,
    /// File names starting so are this library (a mapped one is attached).
    prefix: &'static str,
    /// Paths to attach at the start, colon-separated (tests, odd installs).
    env: &'static str,
    /// Folders it is usually installed in, besides ldconfig's.
    dirs: &'static [&'static str],
    symbols: &'static [(&'static str, Entry)],
    /// What is recorded, for the header.
    calls: &'static str,
}

/// Folders the NVIDIA driver installs `libcuda.so.1` into.
#[cfg(target_arch = "x86_64")]
const DRIVER_DIRS: [&str; 5] =
    ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib", "/usr/local/nvidia/lib64"];
#[cfg(target_arch = "aarch64")]
const DRIVER_DIRS: [&str; 5] = [
    "/usr/lib/aarch64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib/wsl/lib",
    "/usr/local/nvidia/lib64",
];

/// Where NCCL packages (libnccl2, the CUDA toolkit's) put `libnccl.so.2`.
#[cfg(target_arch = "x86_64")]
const NCCL_DIRS: [&str; 4] =
    ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64", "/usr/local/nccl/lib"];
#[cfg(target_arch = "aarch64")]
const NCCL_DIRS: [&str; 4] =
    ["/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64", "/usr/local/nccl/lib"];

/// How `ldconfig -p` tags this architecture's libraries.
#[cfg(target_arch = "x86_64")]
const LDCONFIG_ARCH: &str = "x86-64";
#[cfg(target_arch = "aarch64")]
const LDCONFIG_ARCH: &str = "AArch64";

pub static CUDA: Library = Library {
    subsystem: mltrace_log::subsystem::CUDA,
    title: "CUDA",
    soname: "libcuda.so.1",
    prefix: "libcuda.so",
    env: "MLTRACE_CUDA_LIB",
    dirs: &DRIVER_DIRS,
    symbols: &CUDA_SYMBOLS,
    calls: "cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize, cuMemcpy* (blocking); \
            cuStreamQuery, cuEventQuery counted",
};

pub static NCCL: Library = Library {
    subsystem: mltrace_log::subsystem::NCCL,
    title: "NCCL",
    soname: "libnccl.so.2",
    prefix: "libnccl.so",
    env: "MLTRACE_NCCL_LIB",
    dirs: &NCCL_DIRS,
    symbols: &NCCL_SYMBOLS,
    calls: "ncclAllReduce, ncclAllGather, ncclReduceScatter, ncclBroadcast, ncclReduce, ncclSend, ncclRecv, \
            ncclGroupStart/End (they enqueue: the wait shows in the CUDA calls that synchronise); \
            ranks from ncclCommInitRank*, ncclCommInitAll",
};

/// The libraries probed.
pub static LIBRARIES: [&Library; 2] = [&CUDA, &NCCL];

/// The library a mapped file (path or name) is, if one probed.
pub fn library_of(path: &[u8]) -> Option<&'static Library> {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    LIBRARIES.iter().copied().find(|l| name.starts_with(l.prefix.as_bytes()))
}

/// A call's entry program and its return program (none for one only counted).
fn program<'a>(
    skel: &'a Skeleton<'_>,
    e: Entry,
) -> (&'a libbpf_rs::ProgramMut<'a>, Option<&'a libbpf_rs::ProgramMut<'a>>) {
    let p = &skel.progs;
    let entry = match e {
        Entry::StreamSync => &p.cu_stream_sync,
        Entry::CtxSync => &p.cu_ctx_sync,
        Entry::EventSync => &p.cu_event_sync,
        Entry::Memcpy => &p.cu_memcpy,
        Entry::DtoH => &p.cu_memcpy_dtoh,
        Entry::DtoHV1 => &p.cu_memcpy_dtoh_v1,
        Entry::HtoD => &p.cu_memcpy_htod,
        Entry::HtoDV1 => &p.cu_memcpy_htod_v1,
        Entry::DtoD => &p.cu_memcpy_dtod,
        Entry::DtoDV1 => &p.cu_memcpy_dtod_v1,
        Entry::Peer => &p.cu_memcpy_peer,
        Entry::Copy2D => &p.cu_memcpy_2d,
        Entry::Copy2DV1 => &p.cu_memcpy_2d_v1,
        Entry::Copy3D => &p.cu_memcpy_3d,
        Entry::Copy3DV1 => &p.cu_memcpy_3d_v1,
        Entry::StreamQuery => &p.cu_stream_query,
        Entry::EventQuery => &p.cu_event_query,
        Entry::Launch => &p.cu_launch_kernel,
        Entry::GraphLaunch => &p.cu_graph_launch,
        Entry::AllReduce => &p.nccl_all_reduce,
        Entry::AllGather => &p.nccl_all_gather,
        Entry::ReduceScatter => &p.nccl_reduce_scatter,
        Entry::Broadcast => &p.nccl_broadcast,
        Entry::Reduce => &p.nccl_reduce,
        Entry::Send => &p.nccl_send,
        Entry::Recv => &p.nccl_recv,
        Entry::GroupStart => &p.nccl_group_start,
        Entry::GroupEnd => &p.nccl_group_end,
        Entry::CommInitRank => &p.nccl_comm_init_rank,
        Entry::CommInitAll => &p.nccl_comm_init_all,
    };
    let ret = match e {
        Entry::CommInitRank | Entry::CommInitAll => &p.nccl_init_return,
        Entry::AllReduce
        | Entry::AllGather
        | Entry::ReduceScatter
        | Entry::Broadcast
        | Entry::Reduce
        | Entry::Send
        | Entry::Recv
        | Entry::GroupStart
        | Entry::GroupEnd => &p.nccl_return,
        Entry::StreamQuery | Entry::EventQuery | Entry::Launch | Entry::GraphLaunch => return (entry, None),
        Entry::StreamSync
        | Entry::CtxSync
        | Entry::EventSync
        | Entry::Memcpy
        | Entry::DtoH
        | Entry::DtoHV1
        | Entry::HtoD
        | Entry::HtoDV1
        | Entry::DtoD
        | Entry::DtoDV1
        | Entry::Peer
        | Entry::Copy2D
        | Entry::Copy2DV1
        | Entry::Copy3D
        | Entry::Copy3DV1 => &p.cu_return,
    };
    (entry, Some(ret))
}

/// The CUDA toolkit's link-time stub (`.../stubs/libcuda.so`): no code.
fn is_stub(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "stubs")
}

/// `soname` paths in `ldconfig -p` output (this architecture's entries).
fn from_ldconfig(text: &str, soname: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let (lhs, path) = l.trim().split_once(" => ")?;
            (lhs.strip_prefix(soname).is_some_and(|r| r.starts_with(' ')) && lhs.contains(LDCONFIG_ARCH))
                .then(|| PathBuf::from(path.trim()))
        })
        .collect()
}

impl Library {
    /// The file name the dynamic linker is asked for.
    pub fn soname(&self) -> &'static str {
        self.soname
    }

    /// Whether `path` (a path or file name) is this library.
    pub fn matches(&self, path: &[u8]) -> bool {
        library_of(path).is_some_and(|l| std::ptr::eq(l, self))
    }

    /// How many of the entry points probed `path` defines, of how many.
    pub fn entry_points(&self, path: &Path) -> std::io::Result<(usize, usize)> {
        let names: Vec<&str> = self.symbols.iter().map(|(s, _)| *s).collect();
        Ok((crate::elfsym::function_offsets(path, &names)?.len(), names.len()))
    }

    /// The copies a process here would load: `$MLTRACE_<NAME>_LIB`
    /// (colon-separated paths), `ldconfig -p`, the usual folders. Stubs
    /// left out.
    pub fn candidates(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::env::var_os(self.env)
            .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
            .unwrap_or_default();
        for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
            if let Ok(o) = std::process::Command::new(ldconfig).arg("-p").stderr(std::process::Stdio::null()).output() {
                out.extend(from_ldconfig(&String::from_utf8_lossy(&o.stdout), self.soname));
                break;
            }
        }
        out.extend(self.dirs.iter().map(|d| Path::new(d).join(self.soname)));
        out.retain(|p| !is_stub(p) && p.is_file());
        out
    }
}

/// The probes attached so far on one library's copies, kept while recording.
pub struct LibProbes {
    pub lib: &'static Library,
    /// Attach as uprobe_multi links (the programs were loaded for them).
    multi: bool,
    /// Count kernel and graph launches too (`--cuda-launches`).
    launches: bool,
    links: Vec<Link>,
    /// (dev, inode) of the files attached (or tried): a library reached
    /// through several paths (symlinks) is attached once.
    seen: Vec<(u64, u64)>,
    /// The libraries attached, and their calls found.
    pub attached: Vec<(PathBuf, usize)>,
    /// What failed to attach, said once each.
    pub failures: Vec<String>,
}

impl Drop for LibProbes {
    /// Detaching a uprobe link waits for the kernel to quiesce (an RCU
    /// tasks-trace grace period, about 0.1 s, per single uprobe or per
    /// uprobe_multi link): they go together, not one after the other.
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.links);
        std::thread::scope(|s| {
            for l in links {
                s.spawn(move || drop(l));
            }
        });
    }
}

impl LibProbes {
    /// `multi`: the programs were loaded as uprobe_multi ones
    /// ([`uprobe_multi_works`]).
    /// `launches`: count kernel and graph launches too.
    pub fn new(lib: &'static Library, multi: bool, launches: bool) -> Self {
        LibProbes {
            lib,
            multi,
            launches,
            links: Vec::new(),
            seen: Vec::new(),
            attached: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// The entry points attached.
    fn symbols(&self) -> Vec<(&'static str, Entry)> {
        self.lib.symbols.iter().copied().filter(|(_, e)| self.launches || !e.is_launch()).collect()
    }

    /// Attaches to `path` unless already done; false when it was.
    pub fn attach(&mut self, skel: &Skeleton<'_>, path: &Path) -> bool {
        let Ok(real) = std::fs::canonicalize(path) else {
            self.failures.push(format!("{}: not found", path.display()));
            return true;
        };
        let Ok(meta) = std::fs::metadata(&real) else { return false };
        let key = (meta.dev(), meta.ino());
        if self.seen.contains(&key) {
            return false;
        }
        self.seen.push(key);
        // Not every version has every entry point: the absent ones are
        // expected, and left out.
        let symbols = self.symbols();
        let names: Vec<&str> = symbols.iter().map(|(s, _)| *s).collect();
        let offsets = match crate::elfsym::function_offsets(&real, &names) {
            Ok(o) => o,
            Err(e) => {
                self.failures.push(format!("reading its symbols: {e}"));
                self.attached.push((real, 0));
                return true;
            }
        };
        let present: Vec<(&'static str, Entry, u64)> =
            symbols.into_iter().filter_map(|(s, e)| Some((s, e, *offsets.get(s)?))).collect();
        // libbpf's messages on a refusal are caught (the error says it).
        let ((found, failed), _) = crate::verifier::catching(|| {
            if self.multi {
                self.attach_multi(skel, &real, &present)
            } else {
                self.attach_single(skel, &real, &present)
            }
        });
        if !failed.is_empty() {
            self.failures.push(format!("{}: {}", real.display(), failed.join("; ")));
        }
        self.attached.push((real, found));
        true
    }

    /// A uprobe (and a uretprobe) per entry point. Returns the entry
    /// points attached and what failed.
    fn attach_single(
        &mut self,
        skel: &Skeleton<'_>,
        real: &Path,
        present: &[(&'static str, Entry, u64)],
    ) -> (usize, Vec<String>) {
        let (mut found, mut failed) = (0usize, Vec::new());
        for &(sym, entry, offset) in present {
            let (enter, ret) = program(skel, entry);
            let mut ok = true;
            for (prog, retprobe) in [(Some(enter), false), (ret, true)] {
                let Some(prog) = prog else { continue };
                let opts = UprobeOpts { retprobe, ..Default::default() };
                match prog.attach_uprobe_with_opts(-1, real, offset as usize, opts) {
                    Ok(l) => self.links.push(l),
                    Err(e) => {
                        ok = false;
                        failed.push(format!("{sym}{}: {e}", if retprobe { " (return)" } else { "" }));
                        break;
                    }
                }
            }
            found += usize::from(ok);
        }
        (found, failed)
    }

    /// The uprobe_multi way: a link per entry program (its entry points
    /// together) and one per return program. Returns the entry points
    /// attached and what failed.
    fn attach_multi(
        &mut self,
        skel: &Skeleton<'_>,
        real: &Path,
        present: &[(&'static str, Entry, u64)],
    ) -> (usize, Vec<String>) {
        let multi = |prog: &libbpf_rs::ProgramMut<'_>, offsets: Vec<usize>, retprobe: bool| {
            let opts = UprobeMultiOpts { offsets, retprobe, ..Default::default() };
            prog.attach_uprobe_multi_with_opts(-1, real, "", opts)
        };
        let names = |v: &[(&str, u64)]| v.iter().map(|x| x.0).collect::<Vec<_>>().join(", ");
        let (mut failed, mut found) = (Vec::new(), 0);
        let mut entries: Vec<(Entry, Vec<(&str, u64)>)> = Vec::new();
        for &(sym, e, off) in present {
            match entries.iter_mut().find(|(x, _)| *x == e) {
                Some((_, v)) => v.push((sym, off)),
                None => entries.push((e, vec![(sym, off)])),
            }
        }
        // The entry points attached, by return program (its address: the
        // programs are fields of one skeleton).
        let mut returns: Vec<(*const libbpf_rs::ProgramMut<'_>, Vec<(&str, u64)>)> = Vec::new();
        for (e, syms) in entries {
            let (enter, ret) = program(skel, e);
            match multi(enter, syms.iter().map(|x| x.1 as usize).collect(), false) {
                Ok(l) => self.links.push(l),
                Err(err) => {
                    failed.push(format!("{}: {err}", names(&syms)));
                    continue;
                }
            }
            let Some(ret) = ret else {
                found += syms.len();
                continue;
            };
            let key = ret as *const _;
            match returns.iter_mut().find(|(p, _)| *p == key) {
                Some((_, v)) => v.extend(syms),
                None => returns.push((key, syms)),
            }
        }
        for (key, syms) in returns {
            // SAFETY: `key` is one of `skel.progs`' fields, borrowed above.
            let ret = unsafe { &*key };
            match multi(ret, syms.iter().map(|x| x.1 as usize).collect(), true) {
                Ok(l) => {
                    self.links.push(l);
                    found += syms.len();
                }
                Err(err) => failed.push(format!("{} (return): {err}", names(&syms))),
            }
        }
        (found, failed)
    }

    /// Uprobes that failed to attach, counted.
    pub fn failed(&self) -> usize {
        self.failures.len()
    }

    /// The log header's entry.
    pub fn probe(&self) -> mltrace_log::Probe {
        let libs: Vec<String> =
            self.attached.iter().map(|(p, n)| format!("{} ({n} entry points)", p.display())).collect();
        mltrace_log::Probe {
            subsystem: self.lib.subsystem.into(),
            mechanism: "uprobe + uretprobe".into(),
            detail: format!(
                "{}{}; {}; libraries traced processes map later are attached then",
                self.lib.calls,
                if self.launches { "; kernel and graph launches counted" } else { "" },
                if libs.is_empty() { format!("no {} found at the start", self.lib.soname) } else { libs.join(", ") }
            ),
        }
    }

    /// The end-of-run warning, when anything failed.
    pub fn warning(&self) -> Option<String> {
        (!self.failures.is_empty()).then(|| {
            format!(
                "{} probes: {} attach failure(s), calls there are not recorded: {}",
                self.lib.title,
                self.failed(),
                self.failures.join(" | ")
            )
        })
    }
}

/// The calls the kernel side only counts (queries, launches), turned into
/// [`GpuCount`](mltrace_log::GpuCount) records about once a second: per
/// process and call, the calls since the last round.
pub struct GpuCounts {
    /// The sums last read, by (pid, call code).
    seen: HashMap<(u32, u32), u64>,
    /// Those that had calls in the last round (the next says 0 if none).
    busy: HashSet<(u32, u32)>,
    /// Where the current round began.
    since: u64,
}

impl GpuCounts {
    pub fn new(now: u64) -> Self {
        GpuCounts { seen: HashMap::new(), busy: HashSet::new(), since: now }
    }

    /// Writes the calls counted since the last round, at `now`. A process
    /// that has exited and said 0 is forgotten (its sums leave the map).
    pub fn round(&mut self, skel: &Skeleton<'_>, now: u64, enc: &mut mltrace_log::FrameEncoder) {
        let dur = now.saturating_sub(self.since);
        for (pid, call, n) in gpu_counts(skel) {
            let key = (pid, call);
            let last = self.seen.insert(key, n).unwrap_or(0);
            // Fewer than before: the entry was made again.
            let count = if n >= last { n - last } else { n };
            let was_busy = if count > 0 { !self.busy.insert(key) } else { self.busy.remove(&key) };
            if count > 0 || was_busy {
                enc.push(&mltrace_log::Record::GpuCount(mltrace_log::GpuCount {
                    pid,
                    ts: self.since,
                    dur,
                    call: mltrace_log::GpuCounted::from_u8(call as u8),
                    count,
                }));
            } else if !Path::new(&format!("/proc/{pid}")).exists() {
                forget_gpu_count(skel, pid, call);
                self.seen.remove(&key);
            }
        }
        self.since = now;
    }
}

/// Whether this kernel has uprobe_multi links (6.6+) with a working pid
/// filter (libbpf's own check: a link on `/` fails with EBADF, and with
/// pid -1 with EINVAL). Decided before loading: a program is loaded either
/// for such links or for single uprobes.
pub fn uprobe_multi_works() -> bool {
    use libbpf_sys as sys;
    // r0 = 0; exit
    let insns = [
        sys::bpf_insn { code: (sys::BPF_ALU64 | sys::BPF_MOV | sys::BPF_K) as u8, ..Default::default() },
        sys::bpf_insn { code: (sys::BPF_JMP | sys::BPF_EXIT) as u8, ..Default::default() },
    ];
    let mut load = sys::bpf_prog_load_opts {
        sz: size_of::<sys::bpf_prog_load_opts>() as _,
        expected_attach_type: sys::BPF_TRACE_UPROBE_MULTI,
        ..Default::default()
    };
    // SAFETY: valid instructions, license and options for the call's duration.
    let prog = unsafe {
        sys::bpf_prog_load(sys::BPF_PROG_TYPE_KPROBE, std::ptr::null(), c"GPL".as_ptr(), insns.as_ptr(), 2, &mut load)
    };
    if prog < 0 {
        return false;
    }
    let offset: std::ffi::c_ulong = 0;
    let try_link = |pid: u32| {
        let mut opts =
            sys::bpf_link_create_opts { sz: size_of::<sys::bpf_link_create_opts>() as _, ..Default::default() };
        opts.__bindgen_anon_1.uprobe_multi.path = c"/".as_ptr();
        opts.__bindgen_anon_1.uprobe_multi.offsets = &offset;
        opts.__bindgen_anon_1.uprobe_multi.cnt = 1;
        opts.__bindgen_anon_1.uprobe_multi.pid = pid;
        // SAFETY: the options point at live values.
        // (libbpf returns -errno.)
        let fd = unsafe { sys::bpf_link_create(prog, -1, sys::BPF_TRACE_UPROBE_MULTI, &opts) };
        if fd >= 0 {
            // SAFETY: a descriptor we own.
            unsafe { libc::close(fd) };
        }
        fd
    };
    let ok = try_link(0) == -libc::EBADF && try_link(u32::MAX) == -libc::EINVAL;
    // SAFETY: a descriptor we own.
    unsafe { libc::close(prog) };
    ok
}

/// The probed libraries' files process `pid` has mapped now (for `record -p`).
pub fn mapped_by(pid: u32) -> Vec<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut out: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with('/') && library_of(p.as_bytes()).is_some())
        .map(PathBuf::from)
        .collect();
    out.dedup();
    out
}

/// The CUDA calls counted so far (see bpf's gpu_counts): (pid, call code, calls).
pub fn gpu_counts(skel: &MltraceSkel<'_>) -> Vec<(u32, u32, u64)> {
    let map = &skel.maps.gpu_counts;
    let word = |b: &[u8], i: usize| b.get(i..i + 4).map(|b| u32::from_ne_bytes(b.try_into().unwrap()));
    map.keys()
        .filter_map(|k| {
            let v = map.lookup(&k, MapFlags::ANY).ok().flatten()?;
            Some((word(&k, 0)?, word(&k, 4)?, u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
        })
        .collect()
}

/// Forgets the count of an exited process's `call`.
pub fn forget_gpu_count(skel: &MltraceSkel<'_>, pid: u32, call: u32) {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&pid.to_ne_bytes());
    k[4..].copy_from_slice(&call.to_ne_bytes());
    let _ = skel.maps.gpu_counts.delete(&k);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")] // the lines name x86-64 libraries
    fn ldconfig_lines() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n\
            \tlibcuda.so.1 (libc6) => /usr/lib32/libcuda.so.1\n\
            \tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so\n\
            \tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n";
        assert_eq!(from_ldconfig(text, "libcuda.so.1"), vec![PathBuf::from("/lib/x86_64-linux-gnu/libcuda.so.1")]);
        assert_eq!(from_ldconfig(text, "libnccl.so.2"), vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libnccl.so.2")]);
        assert!(CUDA.matches(b"/usr/lib/libcuda.so.550.54.15") && !CUDA.matches(b"/usr/lib/libcudart.so.12"));
        assert!(NCCL.matches(b"/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"));
        assert!(!NCCL.matches(b"/usr/lib/libcuda.so.1") && library_of(b"/usr/lib/libnccl-net.so").is_none());
        assert!(is_stub(Path::new("/usr/local/cuda/lib64/stubs/libcuda.so")));
    }
}
