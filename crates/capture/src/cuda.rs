//! CUDA driver calls seen from the host: uprobes on `libcuda.so` (the
//! programs are in bpf/mltrace.bpf.c, one entry program per call and one
//! return program for all).
//!
//! At the start of a recording the probes go on every copy of
//! `libcuda.so.1` the dynamic linker would find (`ldconfig -p`, the usual
//! driver folders, and `$MLTRACE_CUDA_LIB`), for all processes: the kernel
//! side records only the traced ones. A copy found elsewhere (a container's,
//! a wheel's) is attached when a traced process maps it; calls it makes
//! before that attach completes are not seen.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use libbpf_rs::{ErrorKind, Link, UprobeOpts};

use crate::bpf::Skeleton;

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
}

/// The driver's entry points: the `_v2` ones (what `cuda.h` names), their
/// per-thread default stream variants (`_ptds`, `_ptsz`), and the legacy
/// ones (32-bit sizes, kept by the driver for old binaries).
const SYMBOLS: [(&str, Entry); 23] = [
    ("cuStreamSynchronize", Entry::StreamSync),
    ("cuStreamSynchronize_ptsz", Entry::StreamSync),
    ("cuCtxSynchronize", Entry::CtxSync),
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
];

fn program<'a>(skel: &'a Skeleton<'_>, e: Entry) -> &'a libbpf_rs::ProgramMut<'a> {
    let p = &skel.progs;
    match e {
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
    }
}

/// Folders the NVIDIA driver installs `libcuda.so.1` into.
const DRIVER_DIRS: [&str; 5] =
    ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib", "/usr/local/nvidia/lib64"];

/// Whether `name` (a file name) is the CUDA driver library.
pub fn is_libcuda(path: &[u8]) -> bool {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    name.starts_with(b"libcuda.so")
}

/// The CUDA toolkit's link-time stub (`.../stubs/libcuda.so`): no code.
fn is_stub(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "stubs")
}

/// `libcuda.so.1` paths in `ldconfig -p` output (x86-64 entries).
fn from_ldconfig(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let (lhs, path) = l.trim().split_once(" => ")?;
            (lhs.starts_with("libcuda.so.1 ") && lhs.contains("x86-64")).then(|| PathBuf::from(path.trim()))
        })
        .collect()
}

/// The copies of `libcuda.so.1` a process here would load:
/// `$MLTRACE_CUDA_LIB` (colon-separated paths), `ldconfig -p`, the driver's
/// usual folders. Stubs left out.
pub fn candidates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::env::var_os("MLTRACE_CUDA_LIB")
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default();
    for ldconfig in ["ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"] {
        if let Ok(o) = std::process::Command::new(ldconfig).arg("-p").stderr(std::process::Stdio::null()).output() {
            out.extend(from_ldconfig(&String::from_utf8_lossy(&o.stdout)));
            break;
        }
    }
    out.extend(DRIVER_DIRS.iter().map(|d| Path::new(d).join("libcuda.so.1")));
    out.retain(|p| !is_stub(p) && p.is_file());
    out
}

/// The probes attached so far, kept while recording.
#[derive(Default)]
pub struct CudaProbes {
    links: Vec<Link>,
    /// (dev, inode) of the files attached (or tried): a library reached
    /// through several paths (symlinks) is attached once.
    seen: Vec<(u64, u64)>,
    /// The libraries attached, and their calls found.
    pub attached: Vec<(PathBuf, usize)>,
    /// What failed to attach, said once each.
    pub failures: Vec<String>,
}

impl Drop for CudaProbes {
    /// Detaching a uprobe waits for the kernel to quiesce (about 0.1 s
    /// each here): they go together, not one after the other.
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.links);
        std::thread::scope(|s| {
            for l in links {
                s.spawn(move || drop(l));
            }
        });
    }
}

impl CudaProbes {
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
        // libbpf says which symbols a library lacks: that is expected (not
        // every driver has every variant), so its messages are caught.
        let ((found, failed), _) = crate::verifier::catching(|| {
            let (mut found, mut failed) = (0usize, Vec::new());
            for (sym, entry) in SYMBOLS {
                let mut ok = true;
                for (prog, retprobe) in [(program(skel, entry), false), (&skel.progs.cu_return, true)] {
                    let opts = UprobeOpts { func_name: Some(sym.into()), retprobe, ..Default::default() };
                    match prog.attach_uprobe_with_opts(-1, &real, 0, opts) {
                        Ok(l) => self.links.push(l),
                        Err(e) if e.kind() == ErrorKind::NotFound && !retprobe => {
                            ok = false;
                            break;
                        }
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
        });
        if !failed.is_empty() {
            self.failures.push(format!("{}: {}", real.display(), failed.join("; ")));
        }
        self.attached.push((real, found));
        true
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
            subsystem: "cuda".into(),
            mechanism: "uprobe + uretprobe".into(),
            detail: format!(
                "cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize, cuMemcpy* (blocking); {}; \
                 libraries traced processes map later are attached then",
                if libs.is_empty() { "no libcuda.so.1 found at the start".to_string() } else { libs.join(", ") }
            ),
        }
    }

    /// The end-of-run warning, when anything failed.
    pub fn warning(&self) -> Option<String> {
        (!self.failures.is_empty()).then(|| {
            format!(
                "CUDA probes: {} attach failure(s), calls there are not recorded: {}",
                self.failed(),
                self.failures.join(" | ")
            )
        })
    }
}

/// The `libcuda.so*` files process `pid` has mapped now (for `record -p`).
pub fn mapped_by(pid: u32) -> Vec<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut out: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with('/') && is_libcuda(p.as_bytes()))
        .map(PathBuf::from)
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldconfig_lines() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1\n\
            \tlibcuda.so.1 (libc6) => /usr/lib32/libcuda.so.1\n\
            \tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so\n";
        assert_eq!(from_ldconfig(text), vec![PathBuf::from("/lib/x86_64-linux-gnu/libcuda.so.1")]);
        assert!(is_libcuda(b"/usr/lib/libcuda.so.550.54.15") && !is_libcuda(b"/usr/lib/libcudart.so.12"));
        assert!(is_stub(Path::new("/usr/local/cuda/lib64/stubs/libcuda.so")));
    }
}
