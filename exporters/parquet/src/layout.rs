//! Where each table's file goes: a directory of tables for one log, or one
//! host's partition of a dataset in Hive layout.

use std::path::PathBuf;

/// The Hive partition column of a dataset: no table may have a column of
/// this name (DuckDB and pyarrow would silently show the directory's value
/// in its place).
pub const PARTITION: &str = "host";

/// Where the tables of one log are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `dir/<table>.parquet`.
    Flat(PathBuf),
    /// `dir/<table>/host=<host>/part-0.parquet`: the log's part of a
    /// dataset of several hosts, read with hive partitioning.
    Hive { dir: PathBuf, host: String },
}

impl Layout {
    /// The file of table `table`.
    pub fn path(&self, table: &str) -> PathBuf {
        match self {
            Layout::Flat(dir) => dir.join(format!("{table}.parquet")),
            Layout::Hive { dir, host } => partition(dir, table, host).join("part-0.parquet"),
        }
    }
}

/// `dir/<table>/host=<host>`.
pub fn partition(dir: &std::path::Path, table: &str, host: &str) -> PathBuf {
    dir.join(table).join(format!("{PARTITION}={host}"))
}

/// Why a host name cannot name a partition directory as it is (Hive
/// readers would have to unescape it, and not all do), if it cannot.
pub fn bad_host_name(host: &str) -> Option<&'static str> {
    if host.is_empty() {
        Some("it is empty")
    } else if host.starts_with('.') {
        Some("it starts with '.'")
    } else if !host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_')) {
        Some("only letters, digits, '.', '-' and '_' can name a partition directory")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let d = PathBuf::from("job");
        assert_eq!(Layout::Flat(d.clone()).path("syscalls"), PathBuf::from("job/syscalls.parquet"));
        let h = Layout::Hive { dir: d, host: "node-3.example".into() };
        assert_eq!(h.path("syscalls"), PathBuf::from("job/syscalls/host=node-3.example/part-0.parquet"));
    }

    #[test]
    fn host_names() {
        for ok in ["nodeA", "gpu-node-7.cluster", "n_1"] {
            assert_eq!(bad_host_name(ok), None, "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a=b", "node A", "nodeA#2", "h%41"] {
            assert!(bad_host_name(bad).is_some(), "{bad}");
        }
    }
}
