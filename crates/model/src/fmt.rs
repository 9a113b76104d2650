//! Shares, byte counts and durations as people read them: one
//! implementation of each, so that `stats`, the report and the CLI print a
//! number the same way. (A record field's size in a label is
//! `mltrace_log::show::size`, which drops the `.0` of round numbers.)

/// A fraction as a whole percentage: `37%`.
pub fn pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

/// [`pct`], or `-` where there is no fraction to show.
pub fn pct_or_dash(f: Option<f64>) -> String {
    f.map_or_else(|| "-".into(), pct)
}

/// `512 B`, `1.5 MiB`: one decimal from KiB on.
pub fn bytes(b: u64) -> String {
    const U: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", U[i])
}

/// `4 KiB` for a power of two (a histogram bucket's bound on an axis):
/// whole units, up to GiB.
pub fn bytes_pow2(b: u64) -> String {
    match b {
        0..=1023 => format!("{b} B"),
        b if b < 1 << 20 => format!("{} KiB", b >> 10),
        b if b < 1 << 30 => format!("{} MiB", b >> 20),
        b => format!("{} GiB", b >> 30),
    }
}

/// `512 ns`, `3.5 µs`, `12.0 ms`, `1.25 s`.
pub fn duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// A duration rounded to its unit, for an axis: `512 ns`, `16 µs`, `3 ms`, `2 s`.
pub fn duration_rounded(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{} µs", (ns as f64 / 1e3).round()),
        1_000_000..=999_999_999 => format!("{} ms", (ns as f64 / 1e6).round()),
        _ => format!("{} s", (ns as f64 / 1e9).round()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        assert_eq!(pct(0.374), "37%");
        assert_eq!(pct_or_dash(Some(1.0)), "100%");
        assert_eq!(pct_or_dash(None), "-");
    }

    #[test]
    fn byte_counts() {
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(bytes(1 << 60), "1024.0 PiB");
        assert_eq!(bytes_pow2(4096), "4 KiB");
        assert_eq!(bytes_pow2(1 << 40), "1024 GiB");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(3_500), "3.5 µs");
        assert_eq!(duration(1_250_000_000), "1.25 s");
        assert_eq!(duration_rounded(16_400), "16 µs");
        assert_eq!(duration_rounded(2_400_000_000), "2 s");
    }
}
