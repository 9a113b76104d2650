//! (f) What the CUDA uprobes cost: calls of the stand-in libcuda's
//! cuStreamSynchronize, cuStreamQuery and cuLaunchKernel (returning at
//! once) untraced, traced with the probes on, with `--cuda off` and with
//! `--cuda-launches`, alternating; the difference per call is the
//! uprobes' cost (each a trap into the kernel). A real sync call waits for
//! the GPU for micro- to milliseconds; launches come 10k-100k a second in
//! launch-bound jobs, which is why they are counted only when asked for.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{cc, first_number, median};

const CALLS: &str = "200000";

pub fn cuda_bench(dir: &Path, mltrace: &Path, reps: usize) -> Result<String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = dir.join("libcuda.so.1");
    let st = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(repo.join("tests/workloads/fake_cuda.c"))
        .status()?;
    if !st.success() {
        bail!("compiling the stand-in libcuda");
    }
    let bin = dir.join("cuda_sync");
    cc(&repo.join("bench/workloads/cuda_sync.c"), &bin)?;
    // (call, row, mltrace's options or untraced)
    type Config = (&'static str, &'static str, Option<&'static [&'static str]>);
    let configs: [Config; 10] = [
        ("sync", "untraced", None),
        ("sync", "mltrace, CUDA probes on", Some(&[])),
        ("sync", "mltrace --cuda off", Some(&["--cuda", "off"])),
        ("query", "untraced", None),
        ("query", "mltrace (counted)", Some(&[])),
        ("eventquery", "untraced", None),
        ("eventquery", "mltrace (counted)", Some(&[])),
        ("launch", "untraced", None),
        ("launch", "mltrace (launches not probed)", Some(&[])),
        ("launch", "mltrace --cuda-launches", Some(&["--cuda-launches"])),
    ];
    let mut got: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
    let log = dir.join("cuda.bin");
    for _ in 0..reps.max(3) {
        for (i, &(call, _, args)) in configs.iter().enumerate() {
            let out = match args {
                None => Command::new(&bin).arg(&lib).args([CALLS, call]).output()?,
                Some(a) => Command::new(mltrace)
                    .args(["record", "-q", "-f", "--gpu", "off"])
                    .args(a)
                    .arg("-o")
                    .arg(&log)
                    .arg("--")
                    .arg(&bin)
                    .arg(&lib)
                    .args([CALLS, call])
                    .env("MLTRACE_CUDA_LIB", &lib)
                    .output()?,
            };
            if !out.status.success() {
                bail!("cuda_sync {call} failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            got[i].push(first_number(&String::from_utf8_lossy(&out.stdout)).context("cuda_sync's output")?);
        }
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n== 8. CUDA uprobes: {CALLS} calls of one entry point of the stand-in libcuda (returning at once), \
         median of {} alternating runs ==",
        got[0].len()
    );
    let titles = [
        ("sync", "cuStreamSynchronize (recorded call by call: entry and return probes)"),
        ("query", "cuStreamQuery (counted in the kernel: an entry probe)"),
        ("eventquery", "cuEventQuery (the same, but its first instruction is one a uprobe single-steps, not emulates)"),
        ("launch", "cuLaunchKernel (counted only with --cuda-launches)"),
    ];
    for (call, title) in titles {
        let _ = writeln!(t, "  {title}:");
        let mut base = 0i64;
        for (i, &(_, name, args)) in configs.iter().enumerate().filter(|(_, c)| c.0 == call) {
            let m = median(&mut got[i]) as i64;
            if args.is_none() {
                base = m;
            }
            let _ = writeln!(t, "    {name:<30} {m:>9} ns/call  ({:+} ns over untraced)", m - base);
        }
    }
    Ok(t)
}
