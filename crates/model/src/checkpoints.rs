//! Checkpoints: a file the job's processes write at least
//! [`CHECKPOINT_BYTES`] of in one burst, or a directory of shards written
//! together (by one process or several ranks), is one checkpoint.
//!
//! A burst of one (process, file) ends at its close or fsync, at the
//! process's exit, or after [`GAP`] without a write to it. Bursts of files
//! in one directory that follow each other within [`GAP`] are one
//! checkpoint, named by the file when there is one, else by the directory.
//! Memory: one entry per file being written and per directory with
//! recent bursts, not per write.

use std::collections::HashMap;

use mltrace_log::*;

/// At least this many bytes make a checkpoint.
pub const CHECKPOINT_BYTES: u64 = 64 << 20;
/// A pause longer than this ends a burst, and a directory's group.
pub const GAP: u64 = 5_000_000_000;
/// Bursts smaller than this are not shards of anything (logs, metadata).
const SHARD_BYTES: u64 = 1 << 20;

/// One checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The file, or for several the directory with a trailing `/`.
    pub path: String,
    /// The process that wrote the first of it (the lowest pid of those
    /// that began at that instant).
    pub pid: u32,
    pub start: u64,
    pub end: u64,
    pub bytes: u64,
    /// Files written (1 for a single file).
    pub files: u32,
    /// Processes that wrote it.
    pub writers: u32,
}

impl Checkpoint {
    /// MB/s over its span.
    pub fn mb_per_s(&self) -> f64 {
        let s = (self.end.saturating_sub(self.start)) as f64 / 1e9;
        if s > 0.0 {
            self.bytes as f64 / 1e6 / s
        } else {
            0.0
        }
    }
}

struct Burst {
    path: Vec<u8>,
    start: u64,
    end: u64,
    bytes: u64,
}

struct Group {
    start: u64,
    end: u64,
    bytes: u64,
    pid: u32,
    files: Vec<Vec<u8>>,
    pids: Vec<u32>,
}

/// The streaming detector: feed it every record in log order, then
/// [`Detector::finish`].
#[derive(Default)]
pub struct Detector {
    bursts: HashMap<(u32, Vec<u8>), Burst>,
    groups: HashMap<Vec<u8>, Group>,
    pub found: Vec<Checkpoint>,
}

fn dir_of(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => &path[..i],
        None => b"",
    }
}

impl Detector {
    pub fn add(&mut self, f: &Frame<'_>, rec: &Record) {
        match *rec {
            Record::Io(r) if r.kind == FileKind::Regular => {
                let path = f.str(r.path);
                if path.is_empty() {
                    return;
                }
                let end = r.ts.saturating_add(r.dur);
                if matches!(r.op, IoOp::Fsync | IoOp::Fdatasync) {
                    self.end_burst(r.pid, path, Some(end));
                } else if r.op.is_write() && r.ret > 0 {
                    let key = (r.pid, path.to_vec());
                    if self.bursts.get(&key).is_some_and(|b| r.ts > b.end.saturating_add(GAP)) {
                        self.end_burst(r.pid, path, None);
                    }
                    let b = self.bursts.entry(key).or_insert_with(|| Burst {
                        path: path.to_vec(),
                        start: r.ts,
                        end,
                        bytes: 0,
                    });
                    b.end = b.end.max(end);
                    b.bytes += r.ret as u64;
                }
            }
            Record::Close(r) => {
                let path = f.str(r.path);
                if !path.is_empty() {
                    self.end_burst(r.pid, path, Some(r.ts.saturating_add(r.dur)));
                }
            }
            Record::Exit(r) if r.process_exit => {
                let mut ended: Vec<Vec<u8>> =
                    self.bursts.keys().filter(|k| k.0 == r.pid).map(|k| k.1.clone()).collect();
                ended.sort();
                for p in ended {
                    self.end_burst(r.pid, &p, None);
                }
            }
            _ => {}
        }
    }

    fn end_burst(&mut self, pid: u32, path: &[u8], at: Option<u64>) {
        let Some(mut b) = self.bursts.remove(&(pid, path.to_vec())) else { return };
        if let Some(at) = at {
            b.end = b.end.max(at);
        }
        if b.bytes < SHARD_BYTES {
            return;
        }
        let dir = dir_of(&b.path).to_vec();
        if self.groups.get(&dir).is_some_and(|g| b.start > g.end.saturating_add(GAP)) {
            self.close_group(&dir);
        }
        let g = self.groups.entry(dir).or_insert_with(|| Group {
            start: b.start,
            end: b.end,
            bytes: 0,
            pid,
            files: Vec::new(),
            pids: Vec::new(),
        });
        // The first writer: the earliest burst's (whatever order bursts
        // end in: the exporters must agree).
        if (b.start, pid) < (g.start, g.pid) {
            g.pid = pid;
        }
        g.start = g.start.min(b.start);
        g.end = g.end.max(b.end);
        g.bytes += b.bytes;
        if !g.files.contains(&b.path) {
            g.files.push(b.path);
        }
        if !g.pids.contains(&pid) {
            g.pids.push(pid);
        }
    }

    fn close_group(&mut self, dir: &[u8]) {
        let Some(g) = self.groups.remove(dir) else { return };
        if g.bytes < CHECKPOINT_BYTES {
            return;
        }
        let path = if g.files.len() == 1 {
            String::from_utf8_lossy(&g.files[0]).into_owned()
        } else {
            format!("{}/", String::from_utf8_lossy(dir))
        };
        self.found.push(Checkpoint {
            path,
            pid: g.pid,
            start: g.start,
            end: g.end,
            bytes: g.bytes,
            files: g.files.len() as u32,
            writers: g.pids.len() as u32,
        });
    }

    /// Ends what is still open (the log ended) and returns the
    /// checkpoints by start.
    pub fn finish(mut self) -> Vec<Checkpoint> {
        let mut open: Vec<(u32, Vec<u8>)> = self.bursts.keys().cloned().collect();
        open.sort();
        for (pid, p) in open {
            self.end_burst(pid, &p, None);
        }
        let mut dirs: Vec<Vec<u8>> = self.groups.keys().cloned().collect();
        dirs.sort();
        for d in dirs {
            self.close_group(&d);
        }
        self.found.sort_by(|a, b| (a.start, a.end, &a.path).cmp(&(b.start, b.end, &b.path)));
        self.found
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;

    use super::*;

    fn run(writes: &[(u32, &str, u64, u64, bool)]) -> Vec<Checkpoint> {
        let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
        for &(pid, path, ts, bytes, close) in writes {
            w.push_with(|e| {
                let p = e.intern(path.as_bytes());
                Record::Io(Io {
                    pid,
                    tid: pid,
                    ts,
                    dur: 10,
                    op: IoOp::Write,
                    kind: FileKind::Regular,
                    path: p,
                    ret: bytes as i64,
                    requested: bytes,
                    ..Default::default()
                })
            })
            .unwrap();
            if close {
                w.push_with(|e| {
                    let p = e.intern(path.as_bytes());
                    Record::Close(Close { pid, tid: pid, ts: ts + 20, dur: 5, path: p, ..Default::default() })
                })
                .unwrap();
            }
        }
        let log = w.finish(&Trailer::default()).unwrap();
        let mut r = LogReader::new(Path::new("t"), Cursor::new(log)).unwrap();
        let mut d = Detector::default();
        while let Some(mut f) = r.next_frame().unwrap() {
            while let Some(rec) = f.next_record() {
                d.add(&f, &rec);
            }
        }
        d.finish()
    }

    #[test]
    fn one_big_file_shards_together_and_small_or_slow_writes() {
        const M: u64 = 1 << 20;
        let s = 1_000_000_000;
        let got = run(&[
            // A 96 MiB file in 3 writes, closed.
            (1, "/ck/a.pt", s, 32 * M, false),
            (1, "/ck/a.pt", s + 100, 32 * M, false),
            (1, "/ck/a.pt", s + 200, 32 * M, true),
            // 20 s later: 4 ranks write 20 MiB shards into one directory.
            (1, "/ck/step2/r0.pt", 21 * s, 20 * M, true),
            (2, "/ck/step2/r1.pt", 21 * s + 10, 20 * M, true),
            (3, "/ck/step2/r2.pt", 21 * s + 20, 20 * M, true),
            (4, "/ck/step2/r3.pt", 21 * s + 30, 20 * M, true),
            // A log appended slowly: bursts of 1 MiB, 10 s apart.
            (1, "/logs/train.log", 2 * s, M, false),
            (1, "/logs/train.log", 12 * s, M, false),
            // 32 MiB alone is not a checkpoint.
            (1, "/ck/small.pt", 40 * s, 32 * M, true),
        ]);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[0].path.as_str(), got[0].bytes, got[0].files), ("/ck/a.pt", 96 * M, 1));
        assert_eq!(got[0].end, s + 200 + 20 + 5);
        assert_eq!((got[1].path.as_str(), got[1].bytes, got[1].files, got[1].writers), ("/ck/step2/", 80 * M, 4, 4));
    }
}
