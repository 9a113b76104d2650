//! Who is who: one identity per process incarnation (a pid reused after
//! its process exited is a new one), with its parent, program, threads
//! and final name, known before anything is drawn. Both passes over a log
//! run the same [`ProcTracker`] over the same records, so they agree on
//! every record's [`ProcIdx`].

use rustc_hash::FxHashMap as HashMap;

use mltrace_log::labels::{self, NAME_MAX};
use mltrace_log::names;
use mltrace_log::*;

/// A process incarnation, dense from 0 in order of first sight.
pub type ProcIdx = u32;

/// Maps pids to incarnations as records come.
#[derive(Default)]
pub struct ProcTracker {
    /// pid -> (current incarnation, whether it has exited).
    current: HashMap<u32, (ProcIdx, bool)>,
    /// Each incarnation's pid and parent.
    pub pids: Vec<u32>,
    pub parents: Vec<Option<ProcIdx>>,
}

impl ProcTracker {
    /// The incarnation of `pid` now, made on first sight.
    #[inline]
    pub fn of(&mut self, pid: u32) -> ProcIdx {
        match self.current.get(&pid) {
            Some(&(i, _)) => i,
            None => self.fresh(pid),
        }
    }

    /// The incarnation a record belongs to (`None` for the machine's own
    /// records), made on first sight; a process fork of a pid whose
    /// process exited starts a new one.
    #[inline]
    pub fn observe(&mut self, rec: &Record) -> Option<ProcIdx> {
        match rec {
            Record::Fork(f) if !f.thread => {
                let parent = (f.parent_pid != 0 && f.parent_pid != f.pid).then(|| self.of(f.parent_pid));
                let idx = match self.current.get(&f.pid) {
                    Some(&(i, false)) => i,
                    _ => self.fresh(f.pid),
                };
                if parent.is_some() {
                    self.parents[idx as usize] = parent;
                }
                Some(idx)
            }
            Record::Exit(e) if e.process_exit => {
                let i = self.of(e.pid);
                self.current.insert(e.pid, (i, true));
                Some(i)
            }
            r => owner(r).map(|pid| self.of(pid)),
        }
    }

    fn fresh(&mut self, pid: u32) -> ProcIdx {
        let i = self.pids.len() as ProcIdx;
        self.pids.push(pid);
        self.parents.push(None);
        self.current.insert(pid, (i, false));
        i
    }

    pub fn count(&self) -> usize {
        self.pids.len()
    }
}

/// The process a record is about; `None` for the machine's own records
/// (its counters and marks carry pid 0, a process's syscalls may too when
/// an import did not know the pid).
pub fn owner(r: &Record) -> Option<u32> {
    Some(match r {
        Record::Fork(x) => x.pid,
        Record::Exec(x) => x.pid,
        Record::Comm(x) => x.pid,
        Record::Exit(x) => x.pid,
        Record::Open(x) => x.pid,
        Record::Io(x) => x.pid,
        Record::Close(x) => x.pid,
        Record::Transfer(x) => x.pid,
        Record::Block(x) if x.flags & blk::TRACED != 0 => x.pid,
        Record::Counter(x) if x.pid != 0 => x.pid,
        Record::Mark(x) if x.pid != 0 => x.pid,
        _ => return None,
    })
}

/// Everything known about one incarnation once the log has been read.
#[derive(Clone, Debug, Default)]
pub struct ProcInfo {
    pub pid: u32,
    pub parent: Option<ProcIdx>,
    /// Seen being forked (so it started while recording).
    pub forked: bool,
    /// Has records of its own (not only named as a parent).
    pub seen: bool,
    pub first_ts: u64,
    pub last_ts: u64,
    /// The last program it exec'd: (name, argv).
    pub exec: Option<(String, Vec<String>)>,
    /// Its main thread's name, when no exec named it.
    pub comm: Option<String>,
    pub exit: Option<(u64, i32)>,
    /// Its threads (tid, comm), in order of first sight.
    pub threads: Vec<(u32, String)>,
    /// Syscall records and bytes moved: how busy it was.
    pub syscalls: u64,
    pub bytes: u64,
    /// Output events it makes (for planning a `--pid` export).
    pub weight: u64,
    /// What the trace calls it, and its command line.
    pub name: String,
    pub cmdline: Vec<String>,
}

/// All incarnations.
#[derive(Default)]
pub struct Procs {
    pub list: Vec<ProcInfo>,
}

const MAX_THREADS_NAMED: usize = 4096;

impl Procs {
    pub fn get(&self, i: ProcIdx) -> &ProcInfo {
        &self.list[i as usize]
    }

    /// Takes one record (already given its incarnation by the tracker).
    pub fn note(&mut self, f: &Frame<'_>, rec: &Record, idx: ProcIdx, tracker: &ProcTracker) {
        let i = idx as usize;
        while self.list.len() <= i {
            let j = self.list.len();
            self.list.push(ProcInfo { pid: tracker.pids[j], first_ts: u64::MAX, ..Default::default() });
        }
        let p = &mut self.list[i];
        p.parent = tracker.parents[i];
        p.seen = true;
        let ts = rec.ts();
        p.first_ts = p.first_ts.min(ts);
        p.last_ts = p.last_ts.max(rec.end_ts());
        match *rec {
            Record::Fork(r) => {
                if r.thread {
                    if p.threads.len() < MAX_THREADS_NAMED && !p.threads.iter().any(|t| t.0 == r.tid) {
                        p.threads.push((r.tid, String::new()));
                    }
                } else {
                    p.forked = true;
                    p.first_ts = ts;
                }
            }
            Record::Exec(r) => {
                let (argv, filename) = (f.str(r.argv), f.str(r.filename));
                let name = labels::exec_name(argv, filename);
                let cmdline = argv.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                p.exec = Some((name, cmdline));
            }
            Record::Comm(r) => {
                let comm = f.str_lossy(r.comm).into_owned();
                if r.tid == r.pid {
                    p.comm = Some(comm.clone());
                }
                match p.threads.iter().position(|t| t.0 == r.tid) {
                    Some(k) => p.threads[k].1 = comm,
                    None if p.threads.len() < MAX_THREADS_NAMED => p.threads.push((r.tid, comm)),
                    None => {}
                }
            }
            Record::Exit(r) if r.process_exit => p.exit = Some((r.ts, r.status)),
            Record::Io(r) => {
                p.syscalls += 1;
                p.bytes += u64::try_from(r.ret).unwrap_or(0);
            }
            Record::Open(_) | Record::Close(_) => p.syscalls += 1,
            Record::Transfer(r) => {
                p.syscalls += 1;
                p.bytes += u64::try_from(r.ret).unwrap_or(0);
            }
            _ => {}
        }
    }

    /// Names every incarnation, parents before children (a parent is
    /// always seen first).
    pub fn finish(&mut self, header: &Header, tracker: &ProcTracker) {
        // Incarnations only named as a parent, with no record of their own.
        while self.list.len() < tracker.count() {
            let j = self.list.len();
            self.list.push(ProcInfo { pid: tracker.pids[j], parent: tracker.parents[j], ..Default::default() });
        }
        for p in &mut self.list {
            if p.first_ts == u64::MAX {
                p.first_ts = p.last_ts;
            }
        }
        let mut root_done = false;
        for i in 0..self.list.len() {
            let (name, cmdline) = {
                let p = &self.list[i];
                let is_root = !root_done && p.pid == header.root_pid && header.root_pid != 0;
                if is_root {
                    root_done = true;
                }
                match &p.exec {
                    Some((name, argv)) => (name.clone(), argv.clone()),
                    None if is_root => (names::command_name(&header.command, NAME_MAX), header.command.clone()),
                    None => match p.parent.filter(|&q| (q as usize) < i && p.forked && self.list[q as usize].seen) {
                        // A forked worker runs its parent's program: say whose.
                        Some(q) => {
                            let parent = &self.list[q as usize];
                            (labels::fork_name(&parent.name, parent.pid), parent.cmdline.clone())
                        }
                        None => match &p.comm {
                            Some(c) => (c.clone(), vec![]),
                            None => (labels::pid_name(p.pid), vec![]),
                        },
                    },
                }
            };
            let p = &mut self.list[i];
            p.name = name;
            p.cmdline = cmdline;
        }
    }
}
