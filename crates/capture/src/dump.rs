//! `MLTRACE_RING_DUMP=FILE`: the ring's records as the consumer takes
//! them, for the bench to replay through the decoder alone (what decoding
//! costs without the workload's CPUs, caches and rings around it).
//!
//! The file: `MLTRDMP2`, the command's pid (u32, little-endian), whether
//! it was recorded in summary detail (u32: 1 or 0; the decoder keeps more
//! then), then each record as its length (u32) and its bytes.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

const MAGIC: &[u8; 8] = b"MLTRDMP2";

pub struct Dump {
    out: Option<BufWriter<File>>,
    path: std::path::PathBuf,
}

impl Dump {
    /// The dump `MLTRACE_RING_DUMP` asks for, if any (a file that cannot
    /// be made is said once, and nothing is dumped).
    pub fn from_env(root_pid: u32, summary: bool) -> Option<Dump> {
        Dump::create(std::path::PathBuf::from(std::env::var_os("MLTRACE_RING_DUMP")?), root_pid, summary)
    }

    fn create(path: std::path::PathBuf, root_pid: u32, summary: bool) -> Option<Dump> {
        let made = File::create(&path).and_then(|f| {
            let mut out = BufWriter::with_capacity(1 << 20, f);
            out.write_all(MAGIC)?;
            out.write_all(&root_pid.to_le_bytes())?;
            out.write_all(&u32::from(summary).to_le_bytes())?;
            Ok(out)
        });
        match made {
            Ok(out) => Some(Dump { out: Some(out), path }),
            Err(e) => {
                eprintln!("mltrace: MLTRACE_RING_DUMP: {}: {e}", path.display());
                None
            }
        }
    }

    pub fn write(&mut self, data: &[u8]) {
        let Some(out) = &mut self.out else { return };
        let r = out.write_all(&(data.len() as u32).to_le_bytes()).and_then(|()| out.write_all(data));
        if let Err(e) = r {
            eprintln!("mltrace: MLTRACE_RING_DUMP: {}: {e}; the dump stops here", self.path.display());
            self.out = None;
        }
    }
}

impl Drop for Dump {
    fn drop(&mut self) {
        if let Some(Err(e)) = self.out.as_mut().map(BufWriter::flush) {
            eprintln!("mltrace: MLTRACE_RING_DUMP: {}: {e}", self.path.display());
        }
    }
}

/// A dump read back: its command's pid and its records, kept end to end
/// in one buffer as a ring keeps them.
#[derive(Debug)]
pub struct Records {
    pub pid: u32,
    /// Recorded in summary detail.
    pub summary: bool,
    bytes: Vec<u8>,
    /// Each record's start in `bytes` and its length.
    spans: Vec<(usize, usize)>,
}

impl Records {
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The records in the order they were taken.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.spans.iter().map(|&(at, n)| &self.bytes[at..at + n])
    }
}

/// Reads the dump at `path`.
pub fn read(path: &Path) -> io::Result<Records> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()));
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return Err(bad("not a ring dump of this build (no MLTRDMP2 header)".into()));
    }
    let pid = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    let summary = match u32::from_le_bytes(bytes[12..16].try_into().unwrap()) {
        0 => false,
        1 => true,
        n => return Err(bad(format!("detail {n} at offset 12, expected 0 (full) or 1 (summary)"))),
    };
    let (mut at, mut spans) = (16, Vec::new());
    while at < bytes.len() {
        let len = bytes.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
        let Some(n) = len.filter(|&n| bytes.len() - (at + 4) >= n) else {
            return Err(bad(format!("a record cut short at offset {at}")));
        };
        spans.push((at + 4, n));
        at += 4 + n;
    }
    Ok(Records { pid, summary, bytes, spans })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_reads_back_and_a_cut_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d");
        let mut d = Dump::create(path.clone(), 42, true).unwrap();
        d.write(b"abc");
        d.write(b"");
        d.write(&[7; 300]);
        drop(d);
        let recs = read(&path).unwrap();
        assert_eq!(recs.pid, 42);
        assert!(recs.summary);
        assert_eq!(recs.iter().collect::<Vec<_>>(), vec![&b"abc"[..], &[], &[7; 300][..]]);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("cut short at offset 27"), "{e}");
        std::fs::write(&path, b"nope").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("not a ring dump"));
    }
}
