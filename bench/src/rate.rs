//! Section 2: the highest sustained rate with zero drops, and the
//! recorder's RSS at 1M events/s.

use std::fmt::Write as _;
use std::path::Path;

use super::{verdict, Bench, Tool, Workload};

pub fn sustained_rate(bench: &Bench, dir: &Path, cached: &Path) -> String {
    let mut table = String::new();
    // 2. Sustained rate with zero drops, and the recorder's RSS at 1M/s.
    // Two threads: one traced thread cannot issue 1M syscalls/s here.
    let _ = writeln!(table, "\n== 2. Sustained rate (paced 1-byte preads for 3 s, 2 threads) ==");
    let mut best = 0.0;
    let mut rss_1m = None;
    for rate in [250_000.0, 500_000.0, 750_000.0, 1_000_000.0, 1_250_000.0, 1_500_000.0, 2_000_000.0] {
        let w = Workload {
            key: "paced",
            title: "",
            bin: dir.join("paced"),
            args: vec![cached.display().to_string(), format!("{rate}"), "3".into(), "2".into()],
            comm: "paced".into(),
            repeat: 1,
            warm: None,
        };
        let r = match bench.run(Tool::Mltrace, &w) {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(table, "  {rate:>9.0}/s: failed: {e:#}");
                break;
            }
        };
        let achieved = r.loop_ns as f64;
        let _ = writeln!(
            table,
            "  asked {:>9.0}/s  achieved {:>9.0}/s  lost {:>8}  recorder peak RSS {:>6.1} MiB",
            rate,
            achieved,
            r.lost,
            r.rss_kib as f64 / 1024.0
        );
        if rate == 1_000_000.0 {
            rss_1m = Some((r.rss_kib, r.lost, achieved));
        }
        if r.lost == 0 && achieved > best {
            best = achieved;
        }
    }
    let _ = writeln!(
        table,
        "  highest rate with zero drops: {best:.0} events/s  (target 1M/s: {})",
        verdict(best >= 950_000.0)
    );
    if let Some((rss, lost, achieved)) = rss_1m {
        let _ = writeln!(
            table,
            "  recorder peak RSS at {achieved:.0}/s: {:.1} MiB, {lost} lost  (target < 100 MiB: {})",
            rss as f64 / 1024.0,
            verdict(rss < 100 * 1024)
        );
    }
    table
}
