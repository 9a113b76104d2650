//! (f) What the CUDA uprobes cost: calls of the stand-in libcuda's
//! cuStreamSynchronize (returning at once) untraced, traced with the
//! probes on, and with `--cuda off`, alternating; the difference per call
//! is the uprobe pair's cost (entry and return, each a trap into the
//! kernel). A real sync call waits for the GPU for micro- to milliseconds.

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
    let configs: [(&str, Option<&[&str]>); 3] =
        [("untraced", None), ("mltrace, CUDA probes on", Some(&[])), ("mltrace --cuda off", Some(&["--cuda", "off"]))];
    let mut got: Vec<Vec<u64>> = vec![Vec::new(); configs.len()];
    let log = dir.join("cuda.bin");
    for _ in 0..reps.max(3) {
        for (i, (_, args)) in configs.iter().enumerate() {
            let out = match args {
                None => Command::new(&bin).arg(&lib).arg(CALLS).output()?,
                Some(a) => Command::new(mltrace)
                    .args(["record", "-q", "-f", "--gpu", "off"])
                    .args(*a)
                    .arg("-o")
                    .arg(&log)
                    .arg("--")
                    .arg(&bin)
                    .arg(&lib)
                    .arg(CALLS)
                    .env("MLTRACE_CUDA_LIB", &lib)
                    .output()?,
            };
            if !out.status.success() {
                bail!("cuda_sync failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            got[i].push(first_number(&String::from_utf8_lossy(&out.stdout)).context("cuda_sync's output")?);
        }
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n== 8. CUDA uprobes: {CALLS} cuStreamSynchronize calls on the stand-in libcuda (returning at once), \
         median of {} alternating runs ==",
        got[0].len()
    );
    let base = median(&mut got[0].clone()) as i64;
    for (i, (name, _)) in configs.iter().enumerate() {
        let m = median(&mut got[i]) as i64;
        let _ = writeln!(t, "  {name:<28} {m:>9} ns/call  ({:+} ns over untraced)", m - base);
    }
    let _ = writeln!(t, "  kernel launches are not probed: a launch-bound job pays for its sync and copy calls only");
    Ok(t)
}
