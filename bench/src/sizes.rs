//! Section 3: size per event, of the log and its Perfetto export, from
//! section 1's last runs.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Result;

use super::{log_counts, verdict, Bench, Run, Tool};

pub fn sizes(bench: &Bench, results: &[Vec<Vec<Run>>], dir: &Path, mltrace: &Path) -> Result<String> {
    let mut table = String::new();
    // 3. Sizes, from the runs above.
    let last = |wi: usize, t: Tool| -> Option<Run> {
        let ti = bench.tools.iter().position(|&x| x == t)?;
        results[wi][ti].last().cloned()
    };
    let _ = writeln!(table, "\n== 3. Size per event ==");
    let mut perfetto_a = None;
    for (wi, key) in [(0, "a"), (1, "b")] {
        let Some(m) = last(wi, Tool::Mltrace) else { continue };
        let log = dir.join(format!("out-{key}.bin"));
        let trace = dir.join(format!("out-{key}.perfetto-trace"));
        let (_, _, sys) = log_counts(&log)?;
        // The default (compressed batches) and plain packets.
        let size = |extra: &[&str]| -> Result<f64> {
            let st = Command::new(mltrace)
                .arg("export")
                .args(extra)
                .arg(&log)
                .arg("-o")
                .arg(&trace)
                .stderr(Stdio::null())
                .status()?;
            Ok(if st.success() { fs::metadata(&trace)?.len() as f64 / sys.max(1) as f64 } else { f64::NAN })
        };
        let raw = size(&["--uncompressed"])?;
        let pf = size(&[])?;
        if key == "a" {
            perfetto_a = Some(pf);
        }
        let bt = last(wi, Tool::Bpftrace).map(|b| b.out_bytes as f64 / b.events.max(1) as f64);
        let _ = writeln!(
            table,
            "  ({key}) run.bin {:.2} B/event ({} events, {} lost); Perfetto {:.1} B/syscall ({:.1} uncompressed); \
             bpftrace text {}",
            m.out_bytes as f64 / m.events.max(1) as f64,
            m.events,
            m.lost,
            pf,
            raw,
            bt.map(|v| format!("{v:.1} B/event")).unwrap_or("-".into())
        );
        if key == "a" {
            let v = m.out_bytes as f64 / m.events.max(1) as f64;
            let _ = writeln!(table, "      target run.bin <= 3 B/event on (a): {}", verdict(v <= 3.0));
            let _ = writeln!(table, "      target Perfetto <= 20 B/syscall on (a): {}", verdict(pf <= 20.0));
        } else if let Some(b) = bt {
            let v = m.out_bytes as f64 / m.events.max(1) as f64;
            let _ = writeln!(
                table,
                "      target run.bin <= 1/10 of bpftrace's text on (b): {:.1}x smaller  {}",
                b / v,
                verdict(b / v >= 10.0)
            );
        }
    }
    let _ = perfetto_a;
    Ok(table)
}
