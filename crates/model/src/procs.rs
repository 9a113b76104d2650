//! Who is who: one identity per process incarnation (a pid reused after
//! its process exited is a new one), with its parent, program, threads
//! and final name, known before anything is drawn. Both passes over a log
//! run the same [`ProcTracker`] over the same records, so they agree on
//! every record's [`ProcIdx`].

use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;

use mltrace_log::labels;
use mltrace_log::show;
use mltrace_log::*;

use crate::event::{self, BroughtIn as Read};

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

    /// The current incarnation of `pid`, if it has one (makes none).
    pub fn known(&self, pid: u32) -> Option<ProcIdx> {
        self.current.get(&pid).map(|&(i, _)| i)
    }

    /// The incarnation a record belongs to (`None` for the machine's own
    /// records), made on first sight; a process fork of a pid whose
    /// process exited starts a new one.
    #[inline]
    pub fn observe(&mut self, rec: &Record) -> Option<ProcIdx> {
        match rec {
            Record::Fork(f) if !f.thread => {
                let parent = (local_pid(f.parent_pid) != 0 && f.parent_pid != f.pid).then(|| self.of(f.parent_pid));
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
            r => r.owner().map(|pid| self.of(pid)),
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

/// Everything known about one incarnation once the log has been read.
#[derive(Clone, Debug, Default)]
pub struct ProcInfo {
    pub pid: u32,
    pub parent: Option<ProcIdx>,
    /// Seen being forked (so it started while recording).
    pub forked: bool,
    /// Forked while its parent ran a shell: a subshell, not a worker.
    pub forked_by_shell: bool,
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
    /// Bytes of the job's data each thread but the main one read or
    /// received, until it is a loader thread (see [`LOADER_BYTES`]).
    pub thread_data: HashMap<u32, u64>,
    /// Its loader threads, in the order they became so.
    pub loaders: Vec<u32>,
    /// Threads that move a collective library's traffic (see
    /// [`is_collective_comm`]), in the order they became so: never loaders.
    pub collective: Vec<u32>,
    /// The sockets (inodes) those threads did I/O on: what comes through
    /// them is other ranks' data, not the job's.
    collective_sockets: Vec<u64>,
    /// Syscall records and bytes moved: how busy it was.
    pub syscalls: u64,
    pub bytes: u64,
    /// Output events it makes (for planning a `--pid` export).
    pub weight: u64,
    /// What the trace calls it (short enough for a viewer's track
    /// column), and its full command line.
    pub name: String,
    pub cmdline: Vec<String>,
    pub role: Role,
    /// Its rank in the job, from its environment at its last exec (see
    /// [`mltrace_log::env::RANK`]).
    pub rank: Option<u32>,
    /// Those variables (name, value) so far.
    env: Vec<(&'static str, String)>,
    /// Where it goes among the process groups, lowest first.
    pub order: i32,
}

impl ProcInfo {
    /// Counts `n` bytes of data read or received by thread `tid`.
    fn data_in(&mut self, tid: u32, n: u64) {
        if tid == self.pid || n == 0 || self.loaders.contains(&tid) || self.collective.contains(&tid) {
            return;
        }
        if self.thread_data.len() >= MAX_THREADS_COUNTED && !self.thread_data.contains_key(&tid) {
            return;
        }
        let b = self.thread_data.entry(tid).or_default();
        *b += n;
        if *b >= LOADER_BYTES {
            self.thread_data.remove(&tid);
            self.loaders.push(tid);
        }
    }

    /// Whether thread `tid` is one of its loader threads (as far as the
    /// log has said so far).
    pub fn is_loader_thread(&self, tid: u32) -> bool {
        self.loaders.contains(&tid)
    }

    /// Whether thread `tid` moves collective traffic (as far as the log
    /// has said so far).
    pub fn is_collective_thread(&self, tid: u32) -> bool {
        self.collective.contains(&tid)
    }

    /// Thread `tid` is a collective library's: it stops being a loader
    /// (gloo's receiving thread takes in megabytes of the peers' gradients
    /// before its first send on the same socket may show it). The main
    /// thread never is: it runs the job.
    fn make_collective(&mut self, tid: u32) {
        if tid == self.pid || self.collective.contains(&tid) || self.collective.len() >= MAX_THREADS_COUNTED {
            return;
        }
        self.collective.push(tid);
        self.loaders.retain(|&t| t != tid);
        self.thread_data.remove(&tid);
    }

    /// Thread `tid` did I/O on socket `ino`: a collective thread marks
    /// the socket, and a thread on a marked socket is a collective one
    /// (gloo's device loop receives what its `pt_gloo_runloop` threads
    /// send on the same sockets).
    fn socket_io(&mut self, tid: u32, ino: u64) {
        let marked = self.collective_sockets.contains(&ino);
        if self.collective.contains(&tid) {
            if !marked && self.collective_sockets.len() < MAX_THREADS_COUNTED {
                self.collective_sockets.push(ino);
            }
        } else if marked {
            self.make_collective(tid);
        }
    }

    /// Whether socket `ino` carries collective traffic (so far).
    fn is_collective_socket(&self, ino: u64) -> bool {
        self.collective_sockets.contains(&ino)
    }

    /// What its loader threads are called, without their number.
    pub fn loader_word(&self) -> &'static str {
        // TensorFlow names its pools tf_*; the threads tf.data reads in
        // are unnamed ones beside them.
        if self.threads.iter().any(|t| t.1.starts_with("tf_")) {
            "tf.data thread"
        } else {
            "loader thread"
        }
    }

    /// A thread's comm, if it was renamed or named when seen.
    fn thread_comm(&self, tid: u32) -> Option<&str> {
        self.threads.iter().find(|t| t.0 == tid).map(|t| t.1.as_str()).filter(|c| !c.is_empty())
    }

    /// What a thread is called: a loader thread by its number among them
    /// (and its comm where the framework set one), any other by its comm,
    /// else its process's (threads inherit it).
    pub fn thread_name(&self, tid: u32) -> String {
        let comm = self.thread_comm(tid);
        if let Some(k) = self.loaders.iter().position(|&t| t == tid) {
            let base = self.loader_word();
            return match comm.filter(|&c| Some(c) != self.comm.as_deref()) {
                Some(c) => format!("{base} {} ({c})", k + 1),
                None => format!("{base} {}", k + 1),
            };
        }
        let own = |t: u32| self.thread_comm(t).filter(|&c| Some(c) != self.comm.as_deref());
        if own(tid).is_none() && self.collective.contains(&tid) {
            // gloo's device loop keeps the process's name: numbered among
            // the unnamed ones.
            let k = self.collective.iter().filter(|&&t| own(t).is_none()).position(|&t| t == tid).unwrap_or(0);
            return format!("collective thread {}", k + 1);
        }
        match (comm, &self.comm) {
            (Some(c), _) => c.to_string(),
            (None, Some(c)) => c.clone(),
            _ => format!("thread {tid}"),
        }
    }
}

/// A thread a collective library names for itself: PyTorch's gloo
/// workers (`pt_gloo_runloop`), its NCCL watchdog and heartbeat
/// (`pt_nccl_*`), NCCL's own (`NCCL ...`). What they move is other
/// ranks' data, and a wait they end is a wait for other ranks.
pub fn is_collective_comm(comm: &str) -> bool {
    comm.starts_with("pt_gloo") || comm.starts_with("pt_nccl") || comm.starts_with("NCCL")
}

/// The inode of a socket's file name (`socket:[1234]`).
pub fn socket_inode(path: &[u8]) -> Option<u64> {
    let digits = path.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The thread and socket of a call on a socket.
fn on_socket(f: &Frame<'_>, rec: &Record) -> Option<(u32, u64)> {
    let (tid, path) = match *rec {
        Record::IoSummary(r) if r.kind == FileKind::Socket => (r.tid, r.path),
        _ => event::split(rec).ok()?.socket()?,
    };
    Some((tid, socket_inode(f.str(path))?))
}

/// What a process is to the job: decides its name and its place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    /// The command `record` ran.
    Main,
    /// Forked without exec from a process (a DataLoader worker), or
    /// started by multiprocessing's spawn: `slot` among its live siblings,
    /// `generation` how many workers held that slot before.
    Worker { slot: u32, generation: u32 },
    /// Short-lived and did little I/O: shells, shims, `uname`.
    Helper,
    /// Anything else: exec'd children by their command, processes that
    /// were running before the recording.
    #[default]
    Other,
}

/// A helper lives less than this...
const HELPER_NS: u64 = 5_000_000_000;
/// ...and moves less than this through its calls.
const HELPER_BYTES: u64 = 1 << 20;
/// Longest process name: what fits the track column of Perfetto's UI.
pub const SHORT_NAME: usize = 28;
/// A thread other than the main one that has read or received this much
/// of the job's data is a loader thread (tf.data, DALI, a thread pool):
/// more than a config file or a handshake, less than a few batches.
pub const LOADER_BYTES: u64 = 1 << 20;
/// Threads per process whose data bytes are counted.
const MAX_THREADS_COUNTED: usize = 4096;

/// A path the job reads as data, not as its program: not Python's own
/// modules and packages, shared libraries, or the kernel's files.
pub fn is_data_path(path: &[u8]) -> bool {
    let has = |needle: &[u8]| path.windows(needle.len()).any(|w| w == needle);
    let code = [&b".py"[..], b".pyc", b".so"].iter().any(|e| path.ends_with(e))
        || has(b".so.")
        || has(b"/site-packages/")
        || has(b"/dist-packages/")
        || has(b"/lib/python");
    let system = [&b"/proc/"[..], b"/sys/", b"/dev/", b"/etc/", b"/usr/", b"/lib/", b"/lib64/"]
        .iter()
        .any(|p| path.starts_with(p));
    !(code || system || path.is_empty())
}

/// The thread and bytes of a record that brought the job's data into a
/// thread other than `p`'s main one and not yet one of its loaders: a
/// read of a data file, or a receive from the network. Each kind's arm
/// gives its thread and what it read; its path is tested last, as most
/// reads are a main thread's or a known loader's.
fn data_in(f: &Frame<'_>, rec: &Record, p: &ProcInfo) -> Option<(u32, u64)> {
    let (tid, read) = match *rec {
        Record::IoSummary(r) if r.op.io().is_some_and(|o| !o.is_write()) => {
            (r.tid, Read::File(r.path, r.kind, r.bytes))
        }
        _ => event::split(rec).ok()?.brought_in()?,
    };
    if tid == p.pid || p.loaders.contains(&tid) || p.collective.contains(&tid) {
        return None;
    }
    if !p.collective_sockets.is_empty() && on_socket(f, rec).is_some_and(|(_, ino)| p.is_collective_socket(ino)) {
        return None;
    }
    let bytes = match read {
        Read::File(path, FileKind::Regular | FileKind::BlockDev, b) if is_data_path(f.str(path)) => b,
        Read::File(_, FileKind::Socket, b) => b,
        Read::File(..) => return None,
        Read::Uring(path, b) if is_data_path(f.str(path)) => b,
        Read::Uring(..) => return None,
        Read::Received(b) => b,
    };
    Some((tid, bytes))
}

/// All incarnations.
#[derive(Clone, Default)]
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
        // The parent's program when it forked this one (a shell forks
        // subshells, even one that later execs the trainer).
        let by_shell = match *rec {
            // A subshell's own forks (a pipeline's stages) are a shell's too.
            Record::Fork(r) if !r.thread => {
                tracker.parents[i].and_then(|q| self.list.get(q as usize)).is_some_and(|q| match &q.exec {
                    Some(e) => show::is_shell(&e.0),
                    None => q.forked_by_shell || q.comm.as_deref().is_some_and(show::is_shell),
                })
            }
            _ => false,
        };
        let p = &mut self.list[i];
        p.parent = tracker.parents[i];
        p.seen = true;
        let ts = rec.ts();
        p.first_ts = p.first_ts.min(ts);
        p.last_ts = p.last_ts.max(rec.end_ts());
        if let Some((tid, ino)) = on_socket(f, rec) {
            p.socket_io(tid, ino);
        }
        if let Some((tid, n)) = data_in(f, rec, p) {
            p.data_in(tid, n);
        }
        match *rec {
            Record::Fork(r) => {
                if r.thread {
                    if p.threads.len() < MAX_THREADS_NAMED && !p.threads.iter().any(|t| t.0 == r.tid) {
                        p.threads.push((r.tid, String::new()));
                    }
                } else {
                    p.forked = true;
                    p.forked_by_shell = by_shell;
                    p.first_ts = ts;
                }
            }
            Record::Exec(r) => {
                let (argv, filename) = (f.str(r.argv), f.str(r.filename));
                let name = labels::exec_name(argv, filename);
                let cmdline = argv.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
                p.exec = Some((name, cmdline));
                p.env.clear();
                p.rank = None;
            }
            Record::Env(r) => {
                let name = f.str_lossy(r.name);
                if let Some(&n) = env::NAMES.iter().find(|n| **n == name) {
                    p.env.push((n, f.str_lossy(r.value).into_owned()));
                    p.rank = env::rank(p.env.iter().map(|(n, v)| (*n, v.as_str()))).map(|r| r.0);
                }
            }
            Record::Comm(r) => {
                let comm = f.str_lossy(r.comm).into_owned();
                if r.tid == r.pid {
                    p.comm = Some(comm.clone());
                } else if is_collective_comm(&comm) {
                    p.make_collective(r.tid);
                }
                match p.threads.iter().position(|t| t.0 == r.tid) {
                    Some(k) => p.threads[k].1 = comm,
                    None if p.threads.len() < MAX_THREADS_NAMED => p.threads.push((r.tid, comm)),
                    None => {}
                }
            }
            Record::Exit(r) if r.process_exit => p.exit = Some((r.ts, r.status)),
            Record::IoSummary(r) => {
                p.syscalls += r.calls;
                p.bytes += r.bytes;
            }
            _ => {
                if let Some(bytes) = crate::event::split(rec).ok().and_then(|c| c.syscall_bytes()) {
                    p.syscalls += 1;
                    p.bytes += bytes;
                }
            }
        }
    }

    /// Names every incarnation and gives it a role and an order.
    /// `epochs` (start, end, label) say which epoch a respawned worker
    /// belongs to.
    pub fn finish(&mut self, header: &Header, tracker: &ProcTracker, epochs: &[(u64, u64, String)]) {
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
        // One command per host (a merged log has several).
        let mut root_done: HashSet<usize> = HashSet::default();
        for i in 0..self.list.len() {
            let p = &self.list[i];
            let host = mltrace_log::host_of(p.pid);
            let is_root = !root_done.contains(&host) && header.is_root_pid(p.pid) && !p.forked_by_seen(self);
            if is_root {
                root_done.insert(host);
            }
            let role = if is_root {
                Role::Main
            } else if self.is_worker(i as ProcIdx) {
                Role::Worker { slot: 0, generation: 0 }
            } else {
                Role::Other
            };
            let cmdline = match &p.exec {
                Some((_, argv)) => argv.clone(),
                None if is_root => header.command.clone(),
                None => match self.live_parent(i) {
                    Some(q) => self.list[q].cmdline.clone(),
                    None => vec![],
                },
            };
            let p = &mut self.list[i];
            p.role = role;
            p.cmdline = cmdline;
        }
        self.number_workers();
        // A thread's comm is inherited (from the exec'd program or the
        // parent) until it is renamed: what unnamed threads are called.
        for i in 0..self.list.len() {
            if self.list[i].comm.is_none() {
                let p = &self.list[i];
                let comm = match &p.exec {
                    Some((_, argv)) => argv.first().map(|a| show::basename(a).chars().take(15).collect()),
                    None => p.parent.and_then(|q| self.list.get(q as usize)).and_then(|q| q.comm.clone()),
                };
                self.list[i].comm = comm;
            }
        }
        // Ranks (processes fed by loaders, with a rank in their
        // environment) say so first: a job's many trainers look alike.
        let fed: HashSet<ProcIdx> =
            (self.list.iter()).filter(|p| matches!(p.role, Role::Worker { .. })).filter_map(|p| p.parent).collect();
        let ranked: Vec<Option<u32>> = (0..self.list.len())
            .map(|i| {
                let p = &self.list[i];
                p.rank.filter(|_| fed.contains(&(i as ProcIdx)) || !p.loaders.is_empty() || !p.collective.is_empty())
            })
            .collect();
        for i in 0..self.list.len() {
            let mut name = self.name_of(i, epochs);
            if name.trim().is_empty() {
                name = labels::pid_name(self.list[i].pid);
            }
            let p = &self.list[i];
            // A rank's workers say whose they are (every rank has a worker 0).
            let rank = match p.role {
                Role::Worker { .. } => p.parent.and_then(|q| ranked[q as usize]),
                _ => ranked[i],
            };
            if let Some(r) = rank {
                name = format!("rank {r}: {name}");
            }
            let p = &mut self.list[i];
            let minor = match p.role {
                Role::Other => true,
                Role::Worker { .. } => !name.starts_with("DataLoader"),
                _ => false,
            };
            if minor && p.exit.is_some() && p.last_ts.saturating_sub(p.first_ts) < HELPER_NS && p.bytes < HELPER_BYTES {
                p.role = Role::Helper;
            }
            p.name = name;
        }
        self.order(&ranked);
    }

    /// The parent, when it was seen and this process was forked by it.
    fn live_parent(&self, i: usize) -> Option<usize> {
        let p = &self.list[i];
        p.parent.map(|q| q as usize).filter(|&q| q < i && p.forked && self.list[q].seen)
    }

    /// Whether incarnation `i` is a data-loader worker: forked from a
    /// traced process without exec (not by a shell: that is a subshell),
    /// or started by multiprocessing's spawn or forkserver. It reads only
    /// what [`Procs::note`] took, so it answers during a pass (`stats`
    /// asks it record by record) as well as after.
    pub fn is_worker(&self, i: ProcIdx) -> bool {
        let Some(p) = self.list.get(i as usize) else { return false };
        match &p.exec {
            None => self.live_parent(i as usize).is_some() && !p.forked_by_shell,
            Some((_, argv)) => argv.iter().any(|a| a.contains("multiprocessing.spawn") || a.contains("spawn_main")),
        }
    }

    /// Gives each worker the lowest slot its live siblings do not hold.
    fn number_workers(&mut self) {
        // Live workers by parent: (slot, until).
        let mut live: HashMap<Option<ProcIdx>, Vec<(u32, u64)>> = HashMap::default();
        let mut used: HashMap<(Option<ProcIdx>, u32), u32> = HashMap::default();
        let mut order: Vec<usize> =
            (0..self.list.len()).filter(|&i| matches!(self.list[i].role, Role::Worker { .. })).collect();
        order.sort_by_key(|&i| (self.list[i].first_ts, i));
        for i in order {
            let (parent, start) = (self.list[i].parent, self.list[i].first_ts);
            let until = self.list[i].exit.map_or(self.list[i].last_ts, |e| e.0);
            let sibs = live.entry(parent).or_default();
            sibs.retain(|&(_, end)| end > start);
            let slot = (0..).find(|s| !sibs.iter().any(|&(t, _)| t == *s)).unwrap_or(0);
            sibs.push((slot, until));
            let g = used.entry((parent, slot)).or_insert(0);
            self.list[i].role = Role::Worker { slot, generation: *g };
            *g += 1;
        }
    }

    fn name_of(&self, i: usize, epochs: &[(u64, u64, String)]) -> String {
        let p = &self.list[i];
        match p.role {
            Role::Worker { slot, generation } => {
                let parent = p.parent.map(|q| &self.list[q as usize]);
                let python = |c: &[String]| c.first().is_some_and(|a| show::basename(a).starts_with("python"));
                let base = match parent {
                    Some(q) if python(&q.cmdline) || python(&p.cmdline) => "DataLoader worker".to_string(),
                    Some(q) => format!("{} worker", short_command(&q.cmdline, 16).split(' ').next().unwrap_or("")),
                    None if python(&p.cmdline) => "DataLoader worker".to_string(),
                    None => "worker".to_string(),
                };
                // Respawned (a new epoch): say which epoch, or keep counting.
                let respawns = self.list.iter().any(|o| {
                    o.parent == p.parent && matches!(o.role, Role::Worker { generation, .. } if generation > 0)
                });
                if !respawns {
                    return format!("{base} {slot}");
                }
                let mid = p.first_ts / 2 + p.last_ts / 2;
                match epochs.iter().find(|e| e.0 <= mid && mid < e.1) {
                    Some(e) => format!("{base} {slot} ({})", e.2),
                    None => {
                        let per_round = self
                            .list
                            .iter()
                            .filter(|o| o.parent == p.parent && matches!(o.role, Role::Worker { generation: 0, .. }))
                            .count() as u32;
                        format!("{base} {}", generation * per_round.max(1) + slot)
                    }
                }
            }
            _ => match (&p.exec, &p.comm) {
                (Some((name, argv)), _) if argv.is_empty() => short_command(std::slice::from_ref(name), SHORT_NAME),
                _ if !p.cmdline.is_empty() && (p.exec.is_some() || p.role == Role::Main) => {
                    short_command(&p.cmdline, SHORT_NAME)
                }
                (_, Some(c)) => c.clone(),
                _ => labels::pid_name(p.pid),
            },
        }
    }

    /// Main first, then workers (by parent, epoch, slot), then the rest
    /// by start, helpers last.
    /// A rank (`ranked`) and its workers go together, ranks in order,
    /// after the command.
    fn order(&mut self, ranked: &[Option<u32>]) {
        let mut idx: Vec<usize> = (0..self.list.len()).collect();
        let key = |i: usize| {
            let p = &self.list[i];
            let parent_rank = p.parent.and_then(|q| ranked.get(q as usize).copied().flatten());
            match (p.role, ranked[i], parent_rank) {
                (Role::Main, None, _) => (0, 0, 0, 0, 0, p.first_ts),
                (Role::Worker { slot, generation }, _, Some(r)) => (1, r, 1, generation, slot, p.first_ts),
                (Role::Helper, ..) => (4, 0, 0, 0, 0, p.first_ts),
                (_, Some(r), _) => (1, r, 0, 0, 0, p.first_ts),
                (Role::Worker { slot, generation }, ..) => (2, 0, generation, slot, 0, p.first_ts),
                _ => (3, 0, 0, 0, 0, p.first_ts),
            }
        };
        idx.sort_by_key(|&i| (key(i), i));
        for (rank, i) in idx.into_iter().enumerate() {
            self.list[i].order = rank.min(1_000_000) as i32;
        }
    }
}

impl ProcInfo {
    /// Whether a traced parent forked it (so it is not the command itself).
    fn forked_by_seen(&self, all: &Procs) -> bool {
        self.forked && self.parent.is_some_and(|q| all.list[q as usize].seen)
    }
}

/// `python3 train.py`: the program and what it runs (a script, `-m
/// module`), without options, at most `max` characters.
pub fn short_command(argv: &[String], max: usize) -> String {
    let mut words: Vec<&str> = Vec::new();
    let mut it = argv.iter().map(String::as_str).filter(|a| !a.is_empty());
    if let Some(prog) = it.next() {
        words.push(show::basename(prog));
    }
    while let Some(a) = it.next() {
        if a == "-m" || a == "-c" {
            words.push(a);
            if a == "-m" {
                if let Some(m) = it.next() {
                    words.push(m);
                }
            }
            break;
        }
        if !a.starts_with('-') {
            words.push(if a.contains('/') && !a.contains(char::is_whitespace) { show::basename(a) } else { a });
            break;
        }
    }
    let s = words.join(" ");
    if s.chars().count() > max {
        return s.chars().take(max.saturating_sub(1)).collect::<String>() + "…";
    }
    s
}

#[cfg(test)]
mod loader_tests {
    use super::*;

    #[test]
    fn data_is_what_is_not_the_program() {
        for p in ["/data/train/shard-0001.tfrecord", "/tmp/tl/x.bin", "/mnt/imagenet/n01/a.JPEG", "/home/u/c4.json"] {
            assert!(is_data_path(p.as_bytes()), "{p}");
        }
        for p in [
            "/usr/lib/python3.11/os.py",
            "/venv/lib/python3.11/site-packages/tensorflow/__init__.py",
            "/a/__pycache__/b.cpython-311.pyc",
            "/opt/x/libcudart.so.12",
            "/proc/self/maps",
            "/sys/devices/system/cpu/online",
            "/etc/ld.so.cache",
            "",
        ] {
            assert!(!is_data_path(p.as_bytes()), "{p}");
        }
    }

    #[test]
    /// gloo: its pt_gloo_runloop threads send on sockets that its device
    /// loop receives the peers' gradients from; the loop, though it took
    /// in megabytes first (a loader thread then), is a collective thread,
    /// and never a loader; what comes through those sockets is not data.
    fn collective_threads_are_never_loaders() {
        let mut p = ProcInfo { pid: 10, comm: Some("python3".into()), ..Default::default() };
        p.data_in(11, 2 * LOADER_BYTES);
        assert!(p.is_loader_thread(11));
        p.make_collective(12);
        p.threads.push((12, "pt_gloo_runloop".into()));
        p.socket_io(12, 777);
        p.socket_io(11, 777);
        assert!(p.is_collective_thread(11) && p.is_collective_thread(12));
        assert!(!p.is_loader_thread(11) && p.loaders.is_empty());
        p.data_in(11, 8 * LOADER_BYTES);
        assert!(p.loaders.is_empty());
        // Another socket of another thread: the job's data (a download).
        p.socket_io(13, 888);
        p.data_in(13, LOADER_BYTES);
        assert_eq!(p.loaders, [13]);
        // The main thread runs the job: never a collective thread.
        p.socket_io(10, 777);
        assert!(!p.is_collective_thread(10));
        assert_eq!(p.thread_name(11), "collective thread 1");
        assert_eq!(p.thread_name(12), "pt_gloo_runloop");
        assert!(is_collective_comm("pt_gloo_runloop") && is_collective_comm("NCCL Progress"));
        assert!(!is_collective_comm("pt_data_worker"));
        assert_eq!(socket_inode(b"socket:[15141]"), Some(15141));
        assert_eq!(socket_inode(b"pipe:[3]"), None);
    }

    #[test]
    fn a_thread_becomes_a_loader_past_a_mebibyte() {
        let mut p = ProcInfo { pid: 10, comm: Some("python3".into()), ..Default::default() };
        p.threads.push((12, "tf_Compute".into()));
        p.data_in(10, 8 << 20);
        p.data_in(11, LOADER_BYTES - 1);
        assert!(!p.is_loader_thread(11) && !p.is_loader_thread(10));
        p.data_in(13, LOADER_BYTES);
        p.data_in(11, 1);
        assert_eq!(p.loaders, [13, 11]);
        assert_eq!(p.thread_name(11), "tf.data thread 2");
        assert_eq!(p.thread_name(12), "tf_Compute");
        p.threads.clear();
        p.threads.push((13, "reader".into()));
        assert_eq!(p.thread_name(13), "loader thread 1 (reader)");
        assert_eq!(p.thread_name(14), "python3");
    }
}
