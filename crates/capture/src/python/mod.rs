//! Python stacks. The kernel side walks a Python thread's frames where a
//! call is recorded and sends each stack, and each code object in it,
//! once per process (python.bpf.h); here they become [`PyFrame`] records,
//! with each frame's line found from its code's line table. Which
//! processes are Python, and how their interpreter is laid out, is found
//! when the kernel side asks ([`layout::discover`]).

pub mod layout;
pub mod linetable;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mltrace_log::{pyf, FrameEncoder, PyFrame, PyInterp};
use rustc_hash::FxHashMap;

use linetable::LineFormat;

/// Frames walked at most (events.h's PY_DEPTH), the C stack's and the
/// interpreter's own entry frames included.
pub const DEPTH: usize = 32;

/// How one process's frames give their line.
#[derive(Clone, Copy, Debug)]
pub struct Lines {
    pub format: LineFormat,
    /// 3.11+: the frame's instruction is a pointer; its offset from the
    /// code object, less this, is the bytecode offset.
    pub code_adaptive: Option<u32>,
    /// Before 3.11: f_lasti's unit in bytes (3.10 counts code units of 2).
    pub lasti_unit: u32,
    /// 3.11+: frames have an owner; those of the C stack or the
    /// interpreter (3 and 4) are not the program's.
    pub owned: bool,
}

struct Code {
    name: Box<str>,
    file: Box<str>,
    first_line: i32,
    lines: Box<[u8]>,
    cut: bool,
    /// Lines found so far, by instruction: a line table is read from its
    /// start, and the outer frames of a process's stacks repeat.
    found: HashMap<u32, u32>,
}

/// A stack whose code objects have not all arrived (another thread of its
/// process may be sending one at the same moment).
struct Pending {
    pid: u32,
    ts: u64,
    id: u32,
    truncated: bool,
    frames: Vec<(u64, u32)>,
}

/// A process's interpreter, from the first ask on.
struct Asked {
    first: Instant,
    decided: bool,
}

/// How long a process that looks like Python may stay undecided (its
/// interpreter not mapped or not started) before it is said to have none.
const UNDECIDED: Duration = Duration::from_secs(10);
/// Lines said about interpreters without stacks.
const MAX_SAID: usize = 64;

#[derive(Default)]
pub struct PyStacks {
    lines: FxHashMap<u32, Lines>,
    codes: FxHashMap<u32, HashMap<u64, Code>>,
    pending: Vec<Pending>,
    asks: FxHashMap<u32, Asked>,
    /// Interpreter files told to the kernel side, by (s_dev, inode): what
    /// a process it adopted runs.
    bins: FxHashMap<(u32, u64), (Lines, String)>,
    /// (pid, the kernel side's generation of its entry).
    to_answer: Vec<(u32, u32)>,
    /// Processes whose interpreter gives no stacks, each in a sentence.
    pub said: Vec<String>,
    /// `record --py-stacks on`: stacks are walked, and what was found of
    /// each interpreter is recorded and said (off, interpreters are only
    /// read, for their GIL).
    pub walk: bool,
}

impl PyStacks {
    /// The kernel side asks about `pid` (again, while undecided).
    pub fn ask(&mut self, pid: u32, gen: u32) {
        let a = self.asks.entry(pid).or_insert(Asked { first: Instant::now(), decided: false });
        if !a.decided && !self.to_answer.iter().any(|&(p, _)| p == pid) {
            self.to_answer.push((pid, gen));
        }
    }

    pub fn has_asked(&self) -> bool {
        !self.to_answer.is_empty()
    }

    /// The kernel side found `pid`'s interpreter in a file it was told of.
    pub fn adopted(&mut self, pid: u32, file: (u32, u64), enc: &mut FrameEncoder) {
        if let Some((lines, version)) = self.bins.get(&file).cloned() {
            self.asks.insert(pid, Asked { first: Instant::now(), decided: false });
            self.decided(pid, Some(lines), &version, "", enc);
        }
    }

    pub fn knows_file(&self, file: (u32, u64)) -> bool {
        self.bins.contains_key(&file)
    }

    /// `interp`'s file was told to the kernel side.
    pub fn bin_told(&mut self, interp: &layout::Interp) {
        self.bins.insert(interp.file, (interp.lines(), interp.version_text()));
    }

    /// The processes to look at now.
    pub fn take_asked(&mut self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.to_answer)
    }

    /// Whether `pid` has been undecided too long.
    pub fn gave_up(&self, pid: u32) -> bool {
        self.asks.get(&pid).is_some_and(|a| a.first.elapsed() >= UNDECIDED)
    }

    /// `pid` is not Python: nothing is recorded of it.
    pub fn not_python(&mut self, pid: u32) {
        if let Some(a) = self.asks.get_mut(&pid) {
            a.decided = true;
        }
    }

    /// `pid` was decided: `lines` when its stacks are walked; the record
    /// says what was found.
    pub fn decided(&mut self, pid: u32, lines: Option<Lines>, version: &str, why: &str, enc: &mut FrameEncoder) {
        if let Some(a) = self.asks.get_mut(&pid) {
            a.decided = true;
        }
        if let Some(l) = lines {
            self.lines.insert(pid, l);
        }
        if !self.walk {
            return;
        }
        if lines.is_none() && self.said.len() < MAX_SAID {
            self.said.push(format!("process {pid} (Python {version}): no Python stacks: {why}"));
        }
        let (version, why) = (enc.intern(version.as_bytes()), enc.intern(why.as_bytes()));
        let ts = crate::system::boottime_ns();
        enc.push(&PyInterp { pid, ts, version, stacks: lines.is_some(), why });
    }

    /// A process forked: the child runs the same interpreter (the kernel
    /// side copied its layout).
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(&l) = self.lines.get(&parent) {
            self.lines.insert(child, l);
        }
    }

    /// A process exec'd or ended: what was known of its program is gone
    /// (its stacks still waiting are written with what is known).
    pub fn forget(&mut self, pid: u32, enc: &mut FrameEncoder) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].pid == pid {
                let p = self.pending.swap_remove(i);
                self.write(&p, enc);
            } else {
                i += 1;
            }
        }
        self.lines.remove(&pid);
        self.codes.remove(&pid);
        self.asks.remove(&pid);
    }

    /// A code object's names and line table.
    #[allow(clippy::too_many_arguments)]
    pub fn code(
        &mut self,
        pid: u32,
        addr: u64,
        name: String,
        file: String,
        first_line: i32,
        lines: &[u8],
        cut: bool,
        enc: &mut FrameEncoder,
    ) {
        let c =
            Code { name: name.into(), file: file.into(), first_line, lines: lines.into(), cut, found: HashMap::new() };
        self.codes.entry(pid).or_default().insert(addr, c);
        if self.pending.iter().any(|p| p.pid == pid) {
            let mut i = 0;
            while i < self.pending.len() {
                if self.pending[i].pid == pid && self.resolvable(&self.pending[i]) {
                    let p = self.pending.swap_remove(i);
                    self.write(&p, enc);
                } else {
                    i += 1;
                }
            }
        }
    }

    /// A new stack, its frames as read (innermost first: code address,
    /// the raw instruction word, owner).
    pub fn stack(
        &mut self,
        pid: u32,
        ts: u64,
        id: u32,
        truncated: bool,
        raw: &[(u64, u64, u8)],
        enc: &mut FrameEncoder,
    ) {
        let l = self.lines.get(&pid).copied();
        let frames = raw
            .iter()
            .filter(|&&(code, _, owner)| code != 0 && !(l.is_some_and(|l| l.owned) && matches!(owner, 3 | 4)))
            .map(|&(code, instr, _)| {
                // A pointer into the code object (3.11+), else f_lasti, an int.
                let instr = match l.and_then(|l| l.code_adaptive) {
                    Some(_) => instr.wrapping_sub(code) as u32,
                    None => instr as u32,
                };
                (code, instr)
            })
            .collect();
        let p = Pending { pid, ts, id, truncated, frames };
        if self.resolvable(&p) {
            self.write(&p, enc);
        } else if self.pending.len() < 4096 {
            self.pending.push(p);
        } else {
            self.write(&p, enc);
        }
    }

    /// The stacks still waiting for a code object, written with what is known.
    pub fn finish(&mut self, enc: &mut FrameEncoder) {
        for p in std::mem::take(&mut self.pending) {
            self.write(&p, enc);
        }
    }

    fn resolvable(&self, p: &Pending) -> bool {
        let codes = self.codes.get(&p.pid);
        p.frames.iter().all(|(c, _)| codes.is_some_and(|m| m.contains_key(c)))
    }

    fn write(&mut self, p: &Pending, enc: &mut FrameEncoder) {
        let lines = self.lines.get(&p.pid).copied();
        let mut codes = self.codes.get_mut(&p.pid);
        let last = p.frames.len().saturating_sub(1);
        for (depth, &(addr, instr)) in p.frames.iter().enumerate() {
            let mut flags = if p.truncated && depth == last { pyf::TRUNCATED } else { 0 };
            let (function, file, line) = match codes.as_mut().and_then(|m| m.get_mut(&addr)) {
                Some(c) => {
                    if c.cut {
                        flags |= pyf::CUT;
                    }
                    let line = match (c.found.get(&instr), lines) {
                        (Some(&l), _) => l,
                        (None, Some(l)) => {
                            let line = line_of(l, c, instr).unwrap_or(0);
                            c.found.insert(instr, line);
                            line
                        }
                        (None, None) => 0,
                    };
                    (enc.intern(c.name.as_bytes()), enc.intern(c.file.as_bytes()), line)
                }
                // Marked in the record: its code object was lost on the way.
                None => {
                    flags |= pyf::UNKNOWN_CODE;
                    (enc.intern(b"?"), enc.intern(b"?"), 0)
                }
            };
            enc.push(&PyFrame { pid: p.pid, ts: p.ts, stack: p.id, depth: depth as u32, function, file, line, flags });
        }
    }
}

/// The line a frame executes.
fn line_of(l: Lines, c: &Code, instr: u32) -> Option<u32> {
    let offset = match l.code_adaptive {
        Some(base) => instr.checked_sub(base)?,
        None => instr.checked_mul(l.lasti_unit)?,
    };
    linetable::line_at(l.format, &c.lines, c.first_line, offset)
}

/// Tells the kernel side what was decided of `pid` when its entry was
/// generation `gen`: walk it with `layout`, or (None) never look at it
/// again. An entry of another generation (the process exec'd since) is
/// left alone (false): it asks again, and is decided then.
pub fn tell_kernel(
    skel: &crate::bpf::Skeleton<'_>,
    pid: u32,
    gen: u32,
    layout: Option<&crate::skel::types::py_layout>,
) -> Result<bool, libbpf_rs::Error> {
    use crate::skel::types::{py_layout, py_state};
    use libbpf_rs::{MapCore, MapFlags};
    let size = std::mem::size_of::<py_layout>();
    let key = pid.to_ne_bytes();
    // The kernel side's own entry keeps its generation (it keys the stacks).
    let old = skel.maps.py_procs.lookup(&key, MapFlags::ANY)?;
    // SAFETY: py_layout is a plain C struct of integers: any bytes are one.
    let read = |b: &[u8]| unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<py_layout>()) };
    if old.as_deref().filter(|b| b.len() >= size).map(|b| read(b).gen) != Some(gen) {
        return Ok(false);
    }
    let mut v = match layout {
        Some(l) => *l,
        // SAFETY: as above; all zeros is a valid value.
        None => unsafe { std::mem::zeroed() },
    };
    v.state = if layout.is_some() { py_state::PY_READY.0 as u8 } else { py_state::PY_NO.0 as u8 };
    v.gen = gen;
    // SAFETY: reading the bytes of a plain C struct.
    let bytes = unsafe { std::slice::from_raw_parts((&v as *const py_layout).cast::<u8>(), size) };
    skel.maps.py_procs.update(&key, bytes, MapFlags::EXIST).map(|()| true)
}

/// Before the command runs: when its program is a Python interpreter (or a
/// script whose `#!` names one, as `torchrun` is), the kernel side is told
/// of the interpreter's file, so that the command is walked from its first
/// call after loading it rather than once user space has answered for it.
pub fn prime(skel: &crate::bpf::Skeleton<'_>, program: &std::path::Path, py: &mut PyStacks) {
    let Some(interp) = interpreter_of(program, 0) else { return };
    if let Some(layout::Discovery::Ready(i)) = layout::from_file(&interp) {
        if i.unwalkable().is_none() && tell_kernel_file(skel, &i).is_ok() {
            py.bin_told(&i);
        }
    }
}

/// The program file that runs when `program` is exec'd: itself, or the
/// interpreter its `#!` line names (`/usr/bin/env python3` searched in PATH).
fn interpreter_of(program: &std::path::Path, depth: u32) -> Option<std::path::PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).and_then(|mut f| f.read(&mut head)).ok()?;
    let Some(line) = head[..n].strip_prefix(b"#!") else { return Some(program.to_path_buf()) };
    let line = String::from_utf8_lossy(line.split(|&b| b == b'\n').next()?).into_owned();
    let mut words = line.split_whitespace();
    let mut interp = std::path::PathBuf::from(words.next()?);
    if interp.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        interp = std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())?;
    }
    // A script run by a script (a launcher shim): its interpreter, once.
    if depth == 0 {
        interpreter_of(&interp, 1)
    } else {
        Some(interp)
    }
}

/// Tells the kernel side of `interp`'s file, so that the processes that
/// load it later are walked from their first call after (see struct py_bin).
pub fn tell_kernel_file(skel: &crate::bpf::Skeleton<'_>, interp: &layout::Interp) -> Result<(), libbpf_rs::Error> {
    use crate::skel::types::{py_bin, py_bin_key, py_state};
    use libbpf_rs::{MapCore, MapFlags};
    // SAFETY: plain C structs of integers: all zeros is a valid value.
    let (mut k, mut v): (py_bin_key, py_bin) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    (k.dev, k.ino) = interp.file;
    v.layout = interp.bpf_layout();
    v.layout.state = py_state::PY_READY.0 as u8;
    v.map_delta = interp.map_delta;
    v.entry_delta = interp.entry_delta;
    v.in_exe = u8::from(interp.in_exe);
    // SAFETY: reading the bytes of plain C structs.
    let bytes = |p: *const u8, n: usize| unsafe { std::slice::from_raw_parts(p, n) };
    let key = bytes((&k as *const py_bin_key).cast(), std::mem::size_of::<py_bin_key>());
    let value = bytes((&v as *const py_bin).cast(), std::mem::size_of::<py_bin>());
    skel.maps.py_bins.update(key, value, MapFlags::ANY)
}

/// Bytes of a frame the kernel side reads at once (events.h's PY_FRAME_READ).
const FRAME_READ: u16 = 128;

impl layout::Interp {
    /// Why the kernel side's walk cannot read this interpreter's frames:
    /// it reads a frame's first [`FRAME_READ`] bytes at once, and the
    /// pointers in them whole (an interpreter's own `_Py_DebugOffsets`
    /// could name others).
    pub fn unwalkable(&self) -> Option<String> {
        let l = &self.layout;
        let word = |off: u16| off & 7 == 0 && off <= FRAME_READ - 8;
        let fits = word(l.f_code)
            && word(l.f_globals)
            && word(l.f_back)
            && word(l.f_instr)
            && (l.f_owner == layout::NO_OWNER || l.f_owner < FRAME_READ);
        (!fits).then(|| {
            format!(
                "its frames' fields (code {}, caller {}, instruction {}, owner {}) are not where the walk reads them",
                l.f_code, l.f_back, l.f_instr, l.f_owner
            )
        })
    }

    /// The layout as the kernel side's map holds it.
    pub fn bpf_layout(&self) -> crate::skel::types::py_layout {
        const _: () = assert!(std::mem::size_of::<crate::skel::types::py_layout>() == layout::Layout::SIZE);
        let b = self.layout.to_bytes();
        // SAFETY: py_layout is a plain C struct of integers of that size.
        unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) }
    }

    pub fn lines(&self) -> Lines {
        let minor = self.version.1;
        Lines {
            format: self.format,
            code_adaptive: (minor >= 11).then_some(self.code_adaptive),
            lasti_unit: if minor == 10 { 2 } else { 1 },
            owned: minor >= 11,
        }
    }

    /// `3.11.7`; before 3.11 (no `Py_Version`: the version is the file
    /// name's) without the micro version, which is not known.
    pub fn version_text(&self) -> String {
        match self.version {
            (a, b, _) if (a, b) < (3, 11) => format!("{a}.{b}"),
            (a, b, c) => format!("{a}.{b}.{c}"),
        }
    }
}
