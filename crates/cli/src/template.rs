//! `-o` name templates for one recorder per node: `%h` host name, `%r`
//! rank, `%p` recorder pid, `%t` start time, `%%` a literal `%`.

use std::path::PathBuf;

/// Where a launcher puts the rank, in the order they are looked at: the
/// variables of `env::RANK`, the launcher's own first (one recorder per
/// node runs beside `torchrun`, not under it: `SLURM_PROCID` numbers it).
pub const RANK_VARS: [&str; 4] = ["SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"];

/// What the placeholders stand for.
pub struct Values {
    pub host: String,
    pub rank: Option<String>,
    pub pid: u32,
    /// `20261123T034000Z`: sorts in time order, no `:` for other filesystems.
    pub time: String,
}

impl Values {
    /// This process, this machine (the name the log's header holds), now.
    pub fn current() -> Values {
        let rank = RANK_VARS.iter().find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()));
        Values {
            host: mltrace_capture::system::hostname(),
            rank: rank.map(|r| r.trim().to_string()),
            pid: std::process::id(),
            time: chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string(),
        }
    }
}

/// Expands the placeholders of `path`; a path without `%` is unchanged.
pub fn expand(path: &std::path::Path, v: &Values) -> anyhow::Result<PathBuf> {
    let Some(s) = path.to_str() else {
        // A non-UTF-8 path cannot hold a template we could read.
        return Ok(path.to_path_buf());
    };
    if !s.contains('%') {
        return Ok(path.to_path_buf());
    }
    let mut out = String::with_capacity(s.len() + 16);
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next().map(|(_, c)| c) {
            Some('h') => out.push_str(&safe(&v.host)),
            Some('p') => out.push_str(&v.pid.to_string()),
            Some('t') => out.push_str(&v.time),
            Some('%') => out.push('%'),
            Some('r') => match &v.rank {
                Some(r) => out.push_str(&safe(r)),
                None => anyhow::bail!(
                    "-o {s}: %r needs a rank, and none of {} is set (run under srun, torchrun or mpirun, or set RANK)",
                    RANK_VARS.join(", ")
                ),
            },
            Some(x) => anyhow::bail!(
                "-o {s}: unknown placeholder %{x} at byte {i}: expected %h (host), %r (rank), %p (pid), %t (start time) or %% (a %)"
            ),
            None => anyhow::bail!("-o {s}: a lone % at the end: write %% for a literal %"),
        }
    }
    Ok(PathBuf::from(out))
}

/// A value that becomes part of one file name: no `/`, no NUL.
fn safe(s: &str) -> String {
    s.chars().map(|c| if c == '/' || c == '\0' { '_' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same variables the log takes a process's rank from, in another order.
    #[test]
    fn rank_vars_are_the_logs() {
        let (mut a, mut b) = (RANK_VARS, mltrace_log::env::RANK);
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }

    fn v(rank: Option<&str>) -> Values {
        Values { host: "node/7".into(), rank: rank.map(String::from), pid: 42, time: "20261123T034000Z".into() }
    }

    #[test]
    fn expands_each_placeholder() {
        let p = expand("runs/%h-r%r.%p.%t.bin".as_ref(), &v(Some("3"))).unwrap();
        assert_eq!(p, PathBuf::from("runs/node_7-r3.42.20261123T034000Z.bin"));
        assert_eq!(expand("a%%b.bin".as_ref(), &v(None)).unwrap(), PathBuf::from("a%b.bin"));
        assert_eq!(expand("plain.bin".as_ref(), &v(None)).unwrap(), PathBuf::from("plain.bin"));
    }

    #[test]
    fn refuses_what_it_cannot_fill() {
        let e = expand("x%q.bin".as_ref(), &v(None)).unwrap_err().to_string();
        assert!(e.contains("unknown placeholder %q"), "{e}");
        let e = expand("x%r.bin".as_ref(), &v(None)).unwrap_err().to_string();
        assert!(e.contains("SLURM_PROCID, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK"), "{e}");
        let e = expand("x%".as_ref(), &v(None)).unwrap_err().to_string();
        assert!(e.contains("lone %"), "{e}");
    }
}
