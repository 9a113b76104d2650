//! Where a traced process's CPython interpreter is, and how the BPF stack
//! walk (python.bpf.h) reads it: `discover` finds the ELF file that holds
//! `_PyRuntime` in the process and fills a `Layout`, the mirror of
//! `struct py_layout` (events.h).
//!
//! The offsets come from a table per minor version, computed from each
//! version's headers by offsets.c. On 3.13+ the interpreter carries its own
//! (`_Py_DebugOffsets`, the first bytes of `_PyRuntime`); those are read
//! from the file (`.PyRuntime` is initialised data) and win over the table.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::linetable::LineFormat;
use crate::elfsym::{self, DataSymbol};

/// `enum py_state`.
pub const PY_PENDING: u8 = 0;
pub const PY_READY: u8 = 1;
pub const PY_NO: u8 = 2;
/// `enum py_model`.
pub const PYM_FRAMEOBJ: u8 = 1;
pub const PYM_CFRAME: u8 = 2;
pub const PYM_IFRAME: u8 = 3;
/// `enum py_bits` (those `discover` sets).
pub const PYB_NATIVE_TID: u16 = 1;
pub const PYB_INSTR_PTR: u16 = 2;
/// `f_owner` where frames have no owner (3.9, 3.10).
pub const NO_OWNER: u16 = 0xffff;

/// `struct py_layout`, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub runtime: u64,
    pub asked: u64,
    pub state: u8,
    pub model: u8,
    pub bits: u16,
    pub gen: u32,
    pub rt_interp: u16,
    pub is_threads: u16,
    pub ts_next: u16,
    pub ts_tid: u16,
    pub ts_frame: u16,
    pub cf_current: u16,
    pub f_back: u16,
    pub f_code: u16,
    pub f_instr: u16,
    pub f_owner: u16,
    pub co_name: u16,
    pub co_file: u16,
    pub co_lines: u16,
    pub co_first: u16,
    pub u_state: u16,
    pub u_length: u16,
    pub u_ascii_size: u16,
    pub u_compact_size: u16,
    pub b_size: u16,
    pub b_data: u16,
    pub f_globals: u16,
    pub gil_size: u16,
    pub gil_off: u32,
}

impl Layout {
    /// `sizeof(struct py_layout)`: 72 bytes, no padding.
    pub const SIZE: usize = 72;

    /// The map value's bytes (little-endian, as the BPF side reads them).
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..8].copy_from_slice(&self.runtime.to_le_bytes());
        b[8..16].copy_from_slice(&self.asked.to_le_bytes());
        b[16] = self.state;
        b[17] = self.model;
        b[18..20].copy_from_slice(&self.bits.to_le_bytes());
        b[20..24].copy_from_slice(&self.gen.to_le_bytes());
        let halves = [
            self.rt_interp,
            self.is_threads,
            self.ts_next,
            self.ts_tid,
            self.ts_frame,
            self.cf_current,
            self.f_back,
            self.f_code,
            self.f_instr,
            self.f_owner,
            self.co_name,
            self.co_file,
            self.co_lines,
            self.co_first,
            self.u_state,
            self.u_length,
            self.u_ascii_size,
            self.u_compact_size,
            self.b_size,
            self.b_data,
            self.f_globals,
            self.gil_size,
        ];
        for (i, h) in halves.iter().enumerate() {
            b[24 + 2 * i..26 + 2 * i].copy_from_slice(&h.to_le_bytes());
        }
        b[68..72].copy_from_slice(&self.gil_off.to_le_bytes());
        b
    }
}

/// What `discover` found in a process.
#[derive(Clone, Debug)]
pub enum Discovery {
    /// A readable interpreter: fill the BPF map with `layout` (runtime set,
    /// state PY_READY, model, bits and offsets; `asked` and `gen` are the caller's).
    Ready(Interp),
    /// Not a Python process (no libpython mapped, no `_PyRuntime` in the
    /// executable, not named python*), or one that has exited.
    NotPython,
    /// Looks like Python but the interpreter is not mapped yet (an
    /// executable that needs libpython3.X, before the loader maps it): ask again later.
    NotYet,
    /// Python that cannot be walked: `version` as found ("3.13t", "3.8",
    /// "unknown"), `why` one line for users.
    Unsupported { version: String, why: String },
}

#[derive(Clone, Debug)]
pub struct Interp {
    /// From `Py_Version` or the debug offsets; else the file's name, micro 0.
    pub version: (u8, u8, u8),
    /// The ELF file that holds `_PyRuntime`, as /proc/PID/maps names it (in
    /// a container, its path there; from a chroot, ours).
    pub path: PathBuf,
    pub layout: Layout,
    pub format: LineFormat,
    /// On 3.11+ `offsetof(PyCodeObject, co_code_adaptive)`: the walk sends
    /// the frame's `prev_instr` (3.11, 3.12) or `instr_ptr` (3.13+) less the
    /// code object's address, so the bytecode offset is that less this. On 3.9
    /// and 3.10 `offsetof(PyBytesObject, ob_sval)`, where `co_code`'s bytes
    /// start in their own object: informative only, as the walk sends
    /// `f_lasti`, already an index (bytes on 3.9, code units on 3.10). Use
    /// `byte_offset`, which knows which.
    pub code_adaptive: u32,
    /// The offsets came from the interpreter's `_Py_DebugOffsets` (3.13+), not the table.
    pub debug_offsets: bool,
    /// The file holding `_PyRuntime`, as the kernel names it: its
    /// superblock's s_dev (major << 20 | minor) and inode.
    pub file: (u32, u64),
    /// Where `_PyRuntime` is from where the file's offset 0 is mapped (a
    /// library, as the loader maps it), and from the entry point (an
    /// executable: the kernel's AT_ENTRY); `in_exe` says which applies.
    pub map_delta: u64,
    pub entry_delta: u64,
    pub in_exe: bool,
}

impl Interp {
    /// The offset in bytes into the code's bytecode of a frame's `instr`
    /// (`struct py_frame`), as the line tables count; `None` before the
    /// frame's first instruction (3.10's `f_lasti` of -1; 3.11's
    /// `prev_instr` one unit before the code).
    pub fn byte_offset(&self, instr: u32) -> Option<u32> {
        match self.version.1 {
            9 => (instr as i32 >= 0).then_some(instr),
            10 => (instr as i32 >= 0).then(|| instr.checked_mul(2)).flatten(),
            _ => instr.checked_sub(self.code_adaptive),
        }
    }
}

/// A version's offsets, as offsets.c prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Offsets {
    rt_interp: u16,
    is_threads: u16,
    ts_tid: u16,
    ts_next: u16,
    ts_frame: u16,
    cf_current: u16,
    f_back: u16,
    f_code: u16,
    f_instr: u16,
    f_owner: u16,
    f_globals: u16,
    co_name: u16,
    co_lines: u16,
    co_code_adaptive: u16,
    co_file: u16,
    co_first: u16,
    u_state: u16,
    u_length: u16,
    u_ascii_size: u16,
    u_compact_size: u16,
    // python.bpf.h has these three as constants; the tests hold it to them.
    u_kind_shift: u8,
    u_compact_bit: u8,
    u_ascii_bit: u8,
    b_size: u16,
    b_data: u16,
    /// The main interpreter's `struct _gil_runtime_state`: its distance from
    /// `_PyRuntime` and its size.
    gil_off: u32,
    gil_size: u16,
}

// The tables: offsets.c's output, pasted, for x86-64 and the default (GIL)
// build, compiled with gcc against pyenv's 3.9.18, 3.10.13, 3.11.7, 3.12.1
// and 3.13.0 headers and Debian sid's libpython3.14-dev 3.14.10. Debian's
// 3.11.2 and 3.13.5 headers print the same as 3.11.7 and 3.13.0.

/// From offsets.c against the 3.9.18 headers.
const PY39: Offsets = Offsets {
    rt_interp: 32,
    is_threads: 8,
    ts_tid: 176,
    ts_next: 8,
    ts_frame: 24,
    cf_current: 0,
    f_back: 24,
    f_code: 32,
    f_instr: 104,
    f_owner: NO_OWNER,
    f_globals: 48,
    co_name: 112,
    co_lines: 120,
    co_code_adaptive: 32,
    co_file: 104,
    co_first: 40,
    u_state: 32,
    u_length: 16,
    u_ascii_size: 48,
    u_compact_size: 72,
    u_kind_shift: 2,
    u_compact_bit: 5,
    u_ascii_bit: 6,
    b_size: 16,
    b_data: 32,
    gil_off: 352,
    gil_size: 208,
};
/// From offsets.c against the 3.10.13 headers.
const PY310: Offsets = Offsets {
    rt_interp: 32,
    is_threads: 8,
    ts_tid: 176,
    ts_next: 8,
    ts_frame: 24,
    cf_current: 0,
    f_back: 24,
    f_code: 32,
    f_instr: 96,
    f_owner: NO_OWNER,
    f_globals: 48,
    co_name: 112,
    co_lines: 120,
    co_code_adaptive: 32,
    co_file: 104,
    co_first: 40,
    u_state: 32,
    u_length: 16,
    u_ascii_size: 48,
    u_compact_size: 72,
    u_kind_shift: 2,
    u_compact_bit: 5,
    u_ascii_bit: 6,
    b_size: 16,
    b_data: 32,
    gil_off: 352,
    gil_size: 208,
};
/// From offsets.c against the 3.11.7 headers.
const PY311: Offsets = Offsets {
    rt_interp: 40,
    is_threads: 16,
    ts_tid: 160,
    ts_next: 8,
    ts_frame: 56,
    cf_current: 8,
    f_back: 48,
    f_code: 32,
    f_instr: 56,
    f_owner: 69,
    f_globals: 8,
    co_name: 128,
    co_lines: 136,
    co_code_adaptive: 184,
    co_file: 112,
    co_first: 72,
    u_state: 32,
    u_length: 16,
    u_ascii_size: 48,
    u_compact_size: 72,
    u_kind_shift: 2,
    u_compact_bit: 5,
    u_ascii_bit: 6,
    b_size: 16,
    b_data: 32,
    gil_off: 360,
    gil_size: 208,
};
/// From offsets.c against the 3.12.1 headers.
const PY312: Offsets = Offsets {
    rt_interp: 40,
    is_threads: 72,
    ts_tid: 144,
    ts_next: 8,
    ts_frame: 56,
    cf_current: 0,
    f_back: 8,
    f_code: 0,
    f_instr: 56,
    f_owner: 70,
    f_globals: 24,
    co_name: 128,
    co_lines: 136,
    co_code_adaptive: 192,
    co_file: 112,
    co_first: 68,
    u_state: 32,
    u_length: 16,
    u_ascii_size: 40,
    u_compact_size: 56,
    u_kind_shift: 2,
    u_compact_bit: 5,
    u_ascii_bit: 6,
    b_size: 16,
    b_data: 32,
    gil_off: 77432,
    gil_size: 208,
};
/// From offsets.c against the 3.13.0 headers.
const PY313: Offsets = Offsets {
    rt_interp: 632,
    is_threads: 7344,
    ts_tid: 160,
    ts_next: 8,
    ts_frame: 72,
    cf_current: 0,
    f_back: 8,
    f_code: 0,
    f_instr: 56,
    f_owner: 70,
    f_globals: 24,
    co_name: 128,
    co_lines: 136,
    co_code_adaptive: 200,
    co_file: 112,
    co_first: 68,
    u_state: 32,
    u_length: 16,
    u_ascii_size: 40,
    u_compact_size: 56,
    u_kind_shift: 2,
    u_compact_bit: 5,
    u_ascii_bit: 6,
    b_size: 16,
    b_data: 32,
    gil_off: 96104,
    gil_size: 208,
};
/// From offsets.c against the 3.14.10 headers.
const PY314: Offsets = Offsets {
    rt_interp: 808,
    is_threads: 7344,
    ts_tid: 160,
    ts_next: 8,
    ts_frame: 72,
    cf_current: 0,
    f_back: 8,
    f_code: 0,
    f_instr: 56,
    f_owner: 74,
    f_globals: 24,
    co_name: 128,
    co_lines: 136,
    co_code_adaptive: 208,
    co_file: 112,
    co_first: 68,
    u_state: 32,
    u_length: 16,
    u_ascii_size: 40,
    u_compact_size: 56,
    u_kind_shift: 2,
    u_compact_bit: 5,
    u_ascii_bit: 6,
    b_size: 16,
    b_data: 32,
    gil_off: 98536,
    gil_size: 208,
};

fn table(minor: u8) -> Option<&'static Offsets> {
    Some(match minor {
        9 => &PY39,
        10 => &PY310,
        11 => &PY311,
        12 => &PY312,
        13 => &PY313,
        14 => &PY314,
        _ => return None,
    })
}

/// Where the values the walk needs sit inside a version's
/// `_Py_DebugOffsets` (each a u64), as offsets.c prints them.
#[derive(Clone, Copy, Debug)]
struct DebugPos {
    free_threaded: usize,
    rt_interp: usize,
    is_threads: usize,
    ts_next: usize,
    ts_tid: usize,
    ts_frame: usize,
    f_back: usize,
    f_code: usize,
    f_instr: usize,
    f_owner: usize,
    co_name: usize,
    co_file: usize,
    co_lines: usize,
    co_first: usize,
    co_code_adaptive: usize,
    u_state: usize,
    u_length: usize,
    u_ascii_size: usize,
    b_size: usize,
    b_data: usize,
}

/// Inside `_Py_DebugOffsets` (584 bytes, at _PyRuntime + 0), from offsets.c against 3.13.0.
const DEBUG313: DebugPos = DebugPos {
    free_threaded: 16,
    rt_interp: 40,
    is_threads: 72,
    ts_next: 168,
    ts_tid: 200,
    ts_frame: 184,
    f_back: 232,
    f_code: 240,
    f_instr: 248,
    f_owner: 264,
    co_name: 296,
    co_file: 280,
    co_lines: 304,
    co_first: 312,
    co_code_adaptive: 344,
    u_state: 544,
    u_length: 552,
    u_ascii_size: 560,
    b_size: 520,
    b_data: 528,
};
/// Inside `_Py_DebugOffsets` (760 bytes, at _PyRuntime + 0), from offsets.c against 3.14.10.
const DEBUG314: DebugPos = DebugPos {
    free_threaded: 16,
    rt_interp: 40,
    is_threads: 72,
    ts_next: 192,
    ts_tid: 224,
    ts_frame: 208,
    f_back: 256,
    f_code: 264,
    f_instr: 272,
    f_owner: 288,
    co_name: 336,
    co_file: 320,
    co_lines: 344,
    co_first: 352,
    co_code_adaptive: 384,
    u_state: 624,
    u_length: 632,
    u_ascii_size: 640,
    b_size: 600,
    b_data: 608,
};

/// The most of `_PyRuntime` read from the file: the debug offsets (760
/// bytes in 3.14) with room to grow.
const RUNTIME_HEAD: u64 = 2048;

/// What a file's `_Py_DebugOffsets` say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OwnOffsets {
    /// None (before 3.13), or ones this module cannot read: use the table.
    Absent,
    FreeThreaded {
        hex: u32,
    },
    Offsets {
        hex: u32,
        offsets: Offsets,
    },
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// `head`: the first bytes of `_PyRuntime` in the file. The table gives
/// what the debug offsets lack (`u_compact_size`, the state bits).
fn read_debug(head: &[u8]) -> OwnOffsets {
    if head.get(..8) != Some(b"xdebugpy") {
        return OwnOffsets::Absent;
    }
    let Some(hex) = le64(head, 8).and_then(|v| u32::try_from(v).ok()) else { return OwnOffsets::Absent };
    let (pos, table) = match (hex >> 24, (hex >> 16) & 0xff) {
        (3, 13) => (&DEBUG313, &PY313),
        (3, 14) => (&DEBUG314, &PY314),
        _ => return OwnOffsets::Absent,
    };
    if le64(head, pos.free_threaded).is_some_and(|f| f != 0) {
        return OwnOffsets::FreeThreaded { hex };
    }
    let get = |at: usize| le64(head, at).and_then(|v| u16::try_from(v).ok());
    let read = || {
        Some(Offsets {
            rt_interp: get(pos.rt_interp)?,
            is_threads: get(pos.is_threads)?,
            ts_tid: get(pos.ts_tid)?,
            ts_next: get(pos.ts_next)?,
            ts_frame: get(pos.ts_frame)?,
            f_back: get(pos.f_back)?,
            f_code: get(pos.f_code)?,
            f_instr: get(pos.f_instr)?,
            f_owner: get(pos.f_owner)?,
            co_name: get(pos.co_name)?,
            co_lines: get(pos.co_lines)?,
            co_code_adaptive: get(pos.co_code_adaptive)?,
            co_file: get(pos.co_file)?,
            co_first: get(pos.co_first)?,
            u_state: get(pos.u_state)?,
            u_length: get(pos.u_length)?,
            u_ascii_size: get(pos.u_ascii_size)?,
            b_size: get(pos.b_size)?,
            b_data: get(pos.b_data)?,
            ..*table
        })
    };
    match read() {
        Some(offsets) => OwnOffsets::Offsets { hex, offsets },
        None => OwnOffsets::Absent,
    }
}

/// What a file's name says: `libpython3.13t.so.1.0`, `python3.9`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Named {
    minor: u8,
    free_threaded: bool,
    debug: bool,
    lib: bool,
}

impl Named {
    fn version(&self) -> String {
        format!("3.{}{}{}", self.minor, if self.free_threaded { "t" } else { "" }, if self.debug { "d" } else { "" })
    }
}

fn named(file_name: &str) -> Option<Named> {
    let (rest, lib) = match file_name.strip_prefix("libpython") {
        Some(r) => (r, true),
        None => (file_name.strip_prefix("python")?, false),
    };
    let rest = rest.strip_prefix("3.")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let minor = rest[..digits].parse().ok()?;
    let rest = &rest[digits..];
    // ABI flags: t free-threaded, d debug, m pymalloc (3.7 and older)
    let flags = rest.bytes().take_while(|b| matches!(b, b't' | b'd' | b'm')).count();
    let (flags, tail) = rest.split_at(flags);
    let fits = if lib { tail.starts_with(".so") } else { tail.is_empty() };
    fits.then(|| Named { minor, free_threaded: flags.contains('t'), debug: flags.contains('d'), lib })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// One file-backed line of /proc/PID/maps.
#[derive(Clone, Debug)]
struct Mapping {
    start: u64,
    end: u64,
    offset: u64,
    dev: u64,
    inode: u64,
    /// Without a " (deleted)" suffix.
    path: String,
}

fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines().filter_map(parse_map_line).collect()
}

fn parse_map_line(line: &str) -> Option<Mapping> {
    let mut rest = line;
    let mut field = || {
        rest = rest.trim_start();
        let end = rest.find(' ').unwrap_or(rest.len());
        let (f, r) = rest.split_at(end);
        rest = r;
        f
    };
    let (range, _perms, offset, dev, inode) = (field(), field(), field(), field(), field());
    let (lo, hi) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let path = rest.trim_start();
    let path = path.strip_suffix(" (deleted)").unwrap_or(path);
    let m = Mapping {
        start: u64::from_str_radix(lo, 16).ok()?,
        end: u64::from_str_radix(hi, 16).ok()?,
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev: u64::from_str_radix(major, 16).ok()? << 32 | u64::from_str_radix(minor, 16).ok()?,
        inode: inode.parse().ok()?,
        path: path.to_string(),
    };
    (m.inode != 0 && m.path.starts_with('/')).then_some(m)
}

/// What is read from an ELF file once, whichever processes map it.
#[derive(Debug)]
struct ElfFacts {
    runtime: Option<DataSymbol>,
    /// PY_VERSION_HEX, from `Py_Version` (3.11+).
    version_hex: Option<u32>,
    /// The first bytes of `_PyRuntime` in the file: `_Py_DebugOffsets` on 3.13+.
    runtime_head: Vec<u8>,
    /// The first PT_LOAD's (p_vaddr, p_offset).
    load: (u64, u64),
    /// The ELF header's entry point.
    entry: u64,
    needed: Vec<String>,
}

fn read_facts(path: &Path) -> io::Result<ElfFacts> {
    let syms = elfsym::data_symbols(path, &["_PyRuntime", "Py_Version"])?;
    let file = fs::File::open(path)?;
    let read = |at: Option<u64>, len: u64| -> Vec<u8> {
        let mut buf = vec![0; len as usize];
        match at.map(|at| file.read_exact_at(&mut buf, at)) {
            Some(Ok(())) => buf,
            _ => Vec::new(),
        }
    };
    let runtime = syms.get("_PyRuntime").copied();
    let runtime_head = runtime.map(|r| read(r.file_offset, r.size.min(RUNTIME_HEAD))).unwrap_or_default();
    let version_hex = syms.get("Py_Version").and_then(|v| {
        // an unsigned long; the version fits its low 4 bytes
        let b = read(v.file_offset, 4);
        Some(u32::from_le_bytes(b.get(..4)?.try_into().ok()?))
    });
    let entry = read(Some(24), 8).get(..8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
    Ok(ElfFacts {
        runtime,
        version_hex,
        runtime_head,
        load: elfsym::first_load(path)?,
        entry,
        needed: elfsym::needed_libraries(path)?,
    })
}

/// Files read, by (dev, inode) as the maps give them: many processes map one libpython.
type FactsCache = Mutex<HashMap<(u64, u64), Arc<ElfFacts>>>;

fn facts_cache() -> &'static FactsCache {
    static CACHE: OnceLock<FactsCache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The mapped file, opened from outside the process. The maps name it as
/// this process sees it: inside another mount namespace (a container) the
/// path is the one there, through /proc/PID/root; from a chroot it is ours.
/// Either, where the inode is the one mapped; else map_files (the very
/// file, even if replaced or deleted since; needs CAP_SYS_ADMIN). Not a
/// file of another inode: its `_PyRuntime` could be elsewhere.
fn reachable(pid: u32, m: &Mapping) -> Result<PathBuf, String> {
    let root = PathBuf::from(format!("/proc/{pid}/root{}", m.path));
    for p in [&root, Path::new(&m.path)] {
        if fs::metadata(p).is_ok_and(|md| md.ino() == m.inode) {
            return Ok(p.to_path_buf());
        }
    }
    let mapped = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
    match fs::metadata(&mapped) {
        Ok(_) => Ok(mapped),
        Err(e) => {
            Err(format!("{}: not the file mapped (replaced or deleted since?), and {}: {e}", m.path, mapped.display()))
        }
    }
}

fn facts(pid: u32, m: &Mapping) -> Result<Arc<ElfFacts>, String> {
    let key = (m.dev, m.inode);
    if let Some(f) = facts_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(f);
    }
    let path = reachable(pid, m)?;
    let f = Arc::new(read_facts(&path).map_err(|e| format!("{}: {e}", m.path))?);
    if let Ok(mut c) = facts_cache().lock() {
        if c.len() >= 4096 {
            c.clear(); // a bound, not a policy: they are cheap to read again
        }
        c.insert(key, f.clone());
    }
    Ok(f)
}

fn no_layout(major: u8, minor: u8) -> String {
    format!("Python {major}.{minor} has no layout here (3.9 to 3.14 are walked)")
}

fn unsupported(version: impl Into<String>, why: impl Into<String>) -> Discovery {
    Discovery::Unsupported { version: version.into(), why: why.into() }
}

/// Finds the interpreter of process `pid`. Never fails: what cannot be
/// read is `Unsupported`, with why.
pub fn discover(pid: u32) -> Discovery {
    let maps = match fs::read_to_string(format!("/proc/{pid}/maps")) {
        Ok(m) => parse_maps(&m),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            return Discovery::NotPython;
        }
        Err(e) => return unsupported("unknown", format!("cannot read /proc/{pid}/maps: {e}")),
    };
    let exe = fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| {
        let p = p.to_string_lossy().into_owned();
        p.strip_suffix(" (deleted)").map(str::to_string).unwrap_or(p)
    });
    let at_zero = |want: &dyn Fn(&Mapping) -> bool| maps.iter().find(|m| m.offset == 0 && want(m)).cloned();
    let exe_map = exe.as_deref().and_then(|e| at_zero(&|m: &Mapping| m.path == e));
    let lib_map = at_zero(&|m: &Mapping| named(file_name(&m.path)).is_some_and(|n| n.lib));

    // The executable first: where it defines _PyRuntime, its copy is the one used.
    let mut exe_facts = None;
    for m in [&exe_map, &lib_map].into_iter().flatten() {
        let name = named(file_name(&m.path));
        if let Some(n) = name.as_ref().filter(|n| n.free_threaded) {
            return unsupported(n.version(), format!("{}: a free-threaded build, whose frames are not walked", m.path));
        }
        let f = match facts(pid, m) {
            Ok(f) => f,
            Err(e) => match name {
                Some(n) => return unsupported(n.version(), e),
                None => continue, // an executable that is not ELF (or not ours to read) is not Python
            },
        };
        if f.runtime.is_some() {
            return ready(m, &f, name.as_ref(), exe_map.as_ref().is_some_and(|e| e.start == m.start));
        }
        if let Some(n) = name.filter(|n| n.lib) {
            let why = match table(n.minor) {
                Some(_) => format!("{}: no _PyRuntime symbol (stripped?)", m.path),
                None => no_layout(3, n.minor),
            };
            return unsupported(n.version(), why);
        }
        exe_facts = Some(f);
    }
    // An executable that needs libpython before the loader has mapped it.
    let needs = exe_facts.iter().flat_map(|f| f.needed.iter()).find_map(|n| named(n).filter(|n| n.lib));
    if let Some(n) = needs {
        if n.free_threaded {
            return unsupported(n.version(), "a free-threaded build, whose frames are not walked");
        }
        return Discovery::NotYet;
    }
    if let Some(m) = exe_map.filter(|m| file_name(&m.path).starts_with("python")) {
        let version = named(file_name(&m.path)).map_or("unknown".into(), |n| n.version());
        return unsupported(version, format!("{}: no _PyRuntime symbol and no libpython (stripped?)", m.path));
    }
    Discovery::NotPython
}

/// The interpreter a program file runs, before any process runs it: the
/// file itself when it defines `_PyRuntime`, else the `libpython3.X` it
/// needs, found where such an executable's loader finds it (beside it in
/// `../lib`, then the system's directories). `runtime` is then where
/// `_PyRuntime` is in the file (see [`Interp::map_delta`]).
pub fn from_file(path: &Path) -> Option<Discovery> {
    let f = read_facts(path).ok()?;
    if f.runtime.is_some() {
        return Some(from_facts(path, &f, true));
    }
    let lib = f.needed.iter().find(|n| named(n).is_some_and(|n| n.lib))?;
    let beside = path.parent().map(|d| d.join("../lib"));
    #[cfg(target_arch = "x86_64")]
    let dirs = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/local/lib", "/usr/lib", "/lib"];
    #[cfg(target_arch = "aarch64")]
    let dirs = ["/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/local/lib", "/usr/lib", "/lib"];
    let found = beside.into_iter().chain(dirs.iter().map(PathBuf::from)).map(|d| d.join(lib)).find(|p| p.exists())?;
    let f = read_facts(&found).ok()?;
    f.runtime.is_some().then(|| from_facts(&found, &f, false))
}

fn from_facts(path: &Path, f: &ElfFacts, in_exe: bool) -> Discovery {
    let Ok(md) = fs::metadata(path) else { return Discovery::NotPython };
    // As the maps give a device (major << 32 | minor), mapped at its link address.
    let dev = (u64::from(libc::major(md.dev())) << 32) | u64::from(libc::minor(md.dev()));
    let m = Mapping {
        start: f.load.0,
        end: f.load.0 + 1,
        offset: 0,
        dev,
        inode: md.ino(),
        path: path.display().to_string(),
    };
    ready(&m, f, named(file_name(&m.path)).as_ref(), in_exe)
}

/// The interpreter whose `_PyRuntime` is in `m`'s file.
fn ready(m: &Mapping, f: &ElfFacts, name: Option<&Named>, in_exe: bool) -> Discovery {
    let debug = read_debug(&f.runtime_head);
    let hex = f.version_hex.or(match debug {
        OwnOffsets::FreeThreaded { hex } | OwnOffsets::Offsets { hex, .. } => Some(hex),
        OwnOffsets::Absent => None,
    });
    let version = match (hex, name) {
        (Some(h), _) => ((h >> 24) as u8, (h >> 16) as u8, (h >> 8) as u8),
        (None, Some(n)) => (3, n.minor, 0),
        (None, None) => {
            return unsupported("unknown", format!("{}: no Py_Version, and its name has no version", m.path))
        }
    };
    let (major, minor, _) = version;
    let shown = format!("{major}.{minor}");
    if let OwnOffsets::FreeThreaded { .. } = debug {
        return unsupported(
            format!("{shown}t"),
            format!("{}: a free-threaded build, whose frames are not walked", m.path),
        );
    }
    let Some(table) = table(minor).filter(|_| major == 3) else { return unsupported(shown, no_layout(major, minor)) };
    // The debug offsets only where they describe this very version.
    let (off, from_debug) = match debug {
        OwnOffsets::Offsets { hex, offsets } if (hex >> 16) as u8 == minor && (hex >> 24) as u8 == major => {
            (offsets, true)
        }
        _ => (*table, false),
    };
    if name.is_some_and(|n| n.debug) && !from_debug {
        return unsupported(format!("{shown}d"), format!("{}: a debug build, whose layout differs", m.path));
    }
    let (vaddr, p_offset) = f.load;
    let Some(runtime) = f.runtime else { return unsupported(shown, "no _PyRuntime") };
    // The file's first page is mapped at m.start: that is its p_vaddr (0
    // for a shared object or PIE, the link address for a fixed executable).
    let base = (p_offset == 0).then(|| m.start.checked_sub(vaddr)).flatten();
    let Some(addr) = base.and_then(|b| b.checked_add(runtime.vaddr)) else {
        return unsupported(shown, format!("{}: cannot place _PyRuntime (first PT_LOAD at {vaddr:#x})", m.path));
    };
    let (model, bits, format) = match minor {
        9 => (PYM_FRAMEOBJ, 0, LineFormat::Lnotab),
        10 => (PYM_FRAMEOBJ, 0, LineFormat::Linetable310),
        11 | 12 => (PYM_CFRAME, PYB_NATIVE_TID | PYB_INSTR_PTR, LineFormat::Locations),
        _ => (PYM_IFRAME, PYB_NATIVE_TID | PYB_INSTR_PTR, LineFormat::Locations),
    };
    let layout = Layout {
        runtime: addr,
        state: PY_READY,
        model,
        bits,
        rt_interp: off.rt_interp,
        is_threads: off.is_threads,
        ts_next: off.ts_next,
        ts_tid: off.ts_tid,
        ts_frame: off.ts_frame,
        cf_current: off.cf_current,
        f_back: off.f_back,
        f_code: off.f_code,
        f_instr: off.f_instr,
        f_owner: off.f_owner,
        f_globals: off.f_globals,
        co_name: off.co_name,
        co_file: off.co_file,
        co_lines: off.co_lines,
        co_first: off.co_first,
        u_state: off.u_state,
        u_length: off.u_length,
        u_ascii_size: off.u_ascii_size,
        u_compact_size: off.u_compact_size,
        b_size: off.b_size,
        b_data: off.b_data,
        gil_size: off.gil_size,
        gil_off: off.gil_off,
        ..Layout::default()
    };
    Discovery::Ready(Interp {
        version,
        path: PathBuf::from(&m.path),
        layout,
        format,
        code_adaptive: u32::from(off.co_code_adaptive),
        debug_offsets: from_debug,
        file: (((m.dev >> 32) << 20 | (m.dev & 0xfffff)) as u32, m.inode),
        map_delta: runtime.vaddr.wrapping_sub(vaddr & !(page_size() - 1)),
        entry_delta: runtime.vaddr.wrapping_sub(f.entry),
        in_exe,
    })
}

fn page_size() -> u64 {
    crate::system::page_size() as u64
}

#[cfg(test)]
mod tests {
    use super::super::linetable::line_at;
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Starts a thread that sleeps in a known function, then prints that
    /// thread's ids and stack, innermost first, as sys._current_frames sees
    /// it (f_lasti: the offset in bytes of the frame's instruction).
    const SCRIPT: &str = r#"
import sys, threading, time

def sleeper_in_known_function(ready):
    ready.set()
    time.sleep(600)

ready = threading.Event()
t = threading.Thread(target=sleeper_in_known_function, args=(ready,), daemon=True)
t.start()
ready.wait()
code = sleeper_in_known_function.__code__
while True:
    f = sys._current_frames().get(t.ident)
    if f is not None and f.f_code is code and f.f_lineno == code.co_firstlineno + 2:
        break
    time.sleep(0.01)
time.sleep(0.2)
f = sys._current_frames()[t.ident]
print("thread", t.native_id, t.ident, sep="\t")
while f is not None:
    c = f.f_code
    print("frame", getattr(c, "co_qualname", c.co_name), c.co_filename, c.co_firstlineno, f.f_lineno, f.f_lasti, sep="\t")
    f = f.f_back
print("end", flush=True)
del f
time.sleep(600)
"#;

    #[derive(Debug, PartialEq, Eq)]
    struct Frame {
        name: String,
        file: String,
        first: u32,
        line: Option<u32>,
        /// The offset in bytes of its instruction, where known.
        lasti: Option<i64>,
    }

    struct Py {
        child: Child,
        lines: Vec<Vec<String>>,
    }

    impl Drop for Py {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// Runs `python -c script` (`python`: a command line) and waits for its line "end".
    fn start(python: &[String], script: &str) -> Py {
        let mut child = Command::new(&python[0])
            .args(&python[1..])
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{python:?}: {e}"));
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line == "end" {
                    break;
                }
                lines.push(line.split('\t').map(str::to_string).collect::<Vec<_>>());
            }
            let _ = tx.send(lines);
        });
        let lines = rx.recv_timeout(Duration::from_secs(60));
        let py = Py { child, lines: lines.unwrap_or_default() };
        assert!(!py.lines.is_empty() || script != SCRIPT, "{python:?}: no output");
        py
    }

    /// Reads the process's memory, as the BPF walk does with bpf_probe_read_user.
    struct Mem(fs::File);

    impl Mem {
        fn bytes(&self, addr: u64, len: u64) -> Vec<u8> {
            let mut b = vec![0; len as usize];
            self.0.read_exact_at(&mut b, addr).unwrap_or_else(|e| panic!("{len} bytes at {addr:#x}: {e}"));
            b
        }
        fn u64(&self, addr: u64) -> u64 {
            u64::from_le_bytes(self.bytes(addr, 8).try_into().unwrap())
        }
        fn u32(&self, addr: u64) -> u32 {
            u32::from_le_bytes(self.bytes(addr, 4).try_into().unwrap())
        }
        fn u8(&self, addr: u64) -> u8 {
            self.bytes(addr, 1)[0]
        }

        /// A str object, read as python.bpf.h's py_str does.
        fn str(&self, l: &Layout, obj: u64) -> String {
            let state = self.u32(obj + u64::from(l.u_state));
            let len = self.u64(obj + u64::from(l.u_length));
            assert!(state & (1 << 5) != 0, "not compact");
            let kind = u64::from((state >> 2) & 7);
            let data = obj + u64::from(if state & (1 << 6) != 0 { l.u_ascii_size } else { l.u_compact_size });
            let b = self.bytes(data, len * kind);
            let chars: Vec<u32> = match kind {
                1 => b.iter().map(|&c| u32::from(c)).collect(),
                2 => b.chunks_exact(2).map(|c| u32::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
                4 => b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect(),
                _ => panic!("kind {kind}"),
            };
            chars.into_iter().map(|c| char::from_u32(c).unwrap_or('?')).collect()
        }
    }

    /// The thread state whose `ts_tid` is `want`, then its frames innermost
    /// first: python.bpf.h's py_tstate and py_stack, step for step.
    fn walk(mem: &Mem, l: &Layout, want: u64) -> Vec<(u64, u32)> {
        let off = |base: u64, o: u16| base + u64::from(o);
        let interp = mem.u64(off(l.runtime, l.rt_interp));
        assert_ne!(interp, 0, "no interpreter");
        let mut ts = mem.u64(off(interp, l.is_threads));
        let mut seen = Vec::new();
        while ts != 0 && seen.len() < 64 && mem.u64(off(ts, l.ts_tid)) != want {
            seen.push(mem.u64(off(ts, l.ts_tid)));
            ts = mem.u64(off(ts, l.ts_next));
        }
        assert_ne!(ts, 0, "no thread state has {want:#x}: {seen:x?}");
        let mut f = mem.u64(off(ts, l.ts_frame));
        if l.model == PYM_CFRAME && f != 0 {
            f = mem.u64(off(f, l.cf_current));
        }
        let mut frames = Vec::new();
        for _ in 0..64 {
            if f == 0 {
                break;
            }
            let mut code = mem.u64(off(f, l.f_code));
            let owner = if l.f_owner != NO_OWNER { mem.u8(off(f, l.f_owner)) } else { 0 };
            if l.model == PYM_IFRAME {
                code &= !7;
            }
            if code != 0 && owner != 3 && owner != 4 {
                let instr = if l.bits & PYB_INSTR_PTR != 0 {
                    mem.u64(off(f, l.f_instr)).wrapping_sub(code) as u32
                } else {
                    mem.u32(off(f, l.f_instr))
                };
                frames.push((code, instr));
            }
            f = mem.u64(off(f, l.f_back));
        }
        frames
    }

    /// pthread_self() of a thread: its fs base on x86-64, what the BPF walk
    /// compares 3.9's and 3.10's thread_id with.
    #[cfg(target_arch = "x86_64")]
    fn fs_base(tid: u32) -> u64 {
        let tid = tid as libc::pid_t;
        let none = std::ptr::null_mut::<libc::c_void>();
        // SAFETY: ptrace of a thread of our own child, stopped then let go;
        // regs is plain data that GETREGS fills.
        unsafe {
            assert_eq!(libc::ptrace(libc::PTRACE_SEIZE, tid, none, none), 0, "{}", io::Error::last_os_error());
            assert_eq!(libc::ptrace(libc::PTRACE_INTERRUPT, tid, none, none), 0);
            let mut status = 0;
            assert_eq!(libc::waitpid(tid, &mut status, libc::__WALL), tid);
            let mut regs: libc::user_regs_struct = std::mem::zeroed();
            let got = libc::ptrace(libc::PTRACE_GETREGS, tid, none, &mut regs as *mut _ as *mut libc::c_void);
            libc::ptrace(libc::PTRACE_DETACH, tid, none, none);
            assert_eq!(got, 0);
            regs.fs_base
        }
    }

    /// The interpreters here that have a layout, as command lines: pyenv's
    /// 3.9 and later, the system's (Debian's python3.11 has _PyRuntime in
    /// the executable), and those of the root file system named by
    /// MLTRACE_PYTHON_CHROOT, run in it (Debian sid's python3.14-minimal
    /// with its libc6, zlib1g and libexpat1, extracted with dpkg-deb -x,
    /// was checked so).
    fn interpreters() -> Vec<Vec<String>> {
        let minor_of = |name: &str| -> Option<u8> { name.strip_prefix("3.")?.split('.').next()?.parse().ok() };
        let mut found = Vec::new();
        let pyenv = std::env::var("PYENV_ROOT").unwrap_or_else(|_| "/root/.pyenv".into());
        let mut dirs: Vec<_> = fs::read_dir(Path::new(&pyenv).join("versions"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        dirs.sort();
        for d in dirs {
            let v = d.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if let Some(minor) = minor_of(&v).filter(|m| (9..=14).contains(m)) {
                found.push(vec![d.join(format!("bin/python3.{minor}")).display().to_string()]);
            }
        }
        let system = (9..=14).map(|m| format!("/usr/bin/python3.{m}"));
        found.extend(system.clone().filter(|p| Path::new(p).exists()).map(|p| vec![p]));
        if let Ok(root) = std::env::var("MLTRACE_PYTHON_CHROOT") {
            let inside = system.filter(|p| Path::new(&format!("{root}{p}")).exists());
            found.extend(inside.map(|p| vec!["chroot".into(), root.clone(), p]));
        }
        found
    }

    #[test]
    fn each_interpreter_here_is_found_and_its_threads_stack_walked() {
        let all = interpreters();
        if all.is_empty() {
            eprintln!("note: no CPython 3.9+ here (pyenv or /usr/bin): nothing walked");
        }
        for python in all {
            let py = start(&python, SCRIPT);
            let pid = py.child.id();
            let interp = match discover(pid) {
                Discovery::Ready(i) => i,
                other => panic!("{python:?}: {other:?}"),
            };
            let minor: Option<u8> = python.last().and_then(|p| p.rsplit("python3.").next()?.parse().ok());
            assert_eq!((interp.version.0, Some(interp.version.1)), (3, minor), "{python:?}");

            let head = &py.lines[0];
            assert_eq!(head[0], "thread");
            let (tid, ident): (u32, u64) = (head[1].parse().unwrap(), head[2].parse().unwrap());
            let l = interp.layout;
            let want = if l.bits & PYB_NATIVE_TID != 0 {
                u64::from(tid)
            } else {
                // The BPF side compares with the thread's fs base: check that it is pthread_self.
                #[cfg(target_arch = "x86_64")]
                assert_eq!(fs_base(tid), ident, "{python:?}: fs base and thread_id");
                ident
            };
            let mem = Mem(fs::File::open(format!("/proc/{pid}/mem")).unwrap());
            let walked: Vec<Frame> = walk(&mem, &l, want)
                .into_iter()
                .map(|(code, instr)| {
                    let first = mem.u32(code + u64::from(l.co_first));
                    // The line table as the BPF side sends it (a bytes object's ob_size and ob_sval).
                    let table = mem.u64(code + u64::from(l.co_lines));
                    let len = mem.u64(table + u64::from(l.b_size));
                    assert!(len < 1 << 16, "{python:?}: a line table of {len} bytes");
                    let table = mem.bytes(table + u64::from(l.b_data), len);
                    let offset = interp.byte_offset(instr);
                    Frame {
                        name: mem.str(&l, mem.u64(code + u64::from(l.co_name))),
                        file: mem.str(&l, mem.u64(code + u64::from(l.co_file))),
                        first,
                        line: offset.and_then(|o| line_at(interp.format, &table, first as i32, o)),
                        lasti: offset.map(i64::from),
                    }
                })
                .collect();
            let printed: Vec<Frame> = py.lines[1..]
                .iter()
                .map(|f| Frame {
                    name: f[1].clone(),
                    file: f[2].clone(),
                    first: f[3].parse().unwrap(),
                    line: f[4].parse().ok(),
                    lasti: f[5].parse().ok().filter(|&l: &i64| l >= 0),
                })
                .collect();
            assert_eq!(walked, printed, "{python:?} ({:?})", interp.version);
            assert_eq!(walked[0].name, "sleeper_in_known_function");
            // The GIL where the table has it: its switch interval, 5000 µs unless set.
            assert_eq!(mem.u64(l.runtime + u64::from(l.gil_off)), 5000, "{python:?}: the GIL's interval");
            assert_eq!(walked[0].file, "<string>");
            eprintln!(
                "{python:?}: {:?} {} at {:#x}{}, {} frames walked",
                interp.version,
                interp.path.display(),
                l.runtime,
                if interp.debug_offsets { " (debug offsets)" } else { "" },
                walked.len()
            );
        }
    }

    /// The versions without a layout, where pyenv has them.
    #[test]
    fn older_pythons_are_unsupported_with_their_version() {
        let pyenv = std::env::var("PYENV_ROOT").unwrap_or_else(|_| "/root/.pyenv".into());
        let mut any = false;
        for (dir, minor) in
            fs::read_dir(Path::new(&pyenv).join("versions")).into_iter().flatten().filter_map(|e| e.ok()).filter_map(
                |e| {
                    let v = e.file_name().to_string_lossy().into_owned();
                    let minor: u8 = v.strip_prefix("3.")?.split('.').next()?.parse().ok()?;
                    (minor < 9).then_some((e.path(), minor))
                },
            )
        {
            let python = dir.join(format!("bin/python3.{minor}"));
            let py = start(&[python.display().to_string()], "import time; print('end', flush=True); time.sleep(600)");
            match discover(py.child.id()) {
                Discovery::Unsupported { version, why } => {
                    assert_eq!(version, format!("3.{minor}"), "{why}");
                    eprintln!("{}: {version}: {why}", python.display());
                }
                other => panic!("{}: {other:?}", python.display()),
            }
            any = true;
        }
        if !any {
            eprintln!("note: no pyenv CPython before 3.9 here");
        }
    }

    #[test]
    fn a_program_that_is_not_python_is_not_python() {
        let mut sleep = Command::new("/bin/sleep").arg("600").spawn().unwrap();
        let got = discover(sleep.id());
        let _ = sleep.kill();
        let _ = sleep.wait();
        assert!(matches!(got, Discovery::NotPython), "{got:?}");
        assert!(matches!(discover(u32::MAX), Discovery::NotPython));
    }

    /// Stopped at its exec, before the loader has mapped libpython.
    #[test]
    fn python_before_its_libpython_is_mapped_is_not_yet() {
        use std::os::unix::process::CommandExt;
        let Some(python) = interpreters().into_iter().map(|p| p[0].clone()).find(|p| p.contains("pyenv")) else {
            eprintln!("note: no pyenv CPython (one that links libpython) here");
            return;
        };
        let mut cmd = Command::new(&python);
        cmd.args(["-c", "pass"]);
        // SAFETY: ptrace(PTRACE_TRACEME) is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let none = std::ptr::null_mut::<libc::c_void>();
                if libc::ptrace(libc::PTRACE_TRACEME, 0, none, none) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        let got = discover(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert!(matches!(got, Discovery::NotYet), "{python}: {got:?}");
    }

    /// The ELF files whose `_Py_DebugOffsets` are checked: pyenv's 3.13+
    /// libpython and those named in MLTRACE_PYTHON_ELFS (colon-separated:
    /// Debian sid's python3.14 and libpython3.14.so.1.0, extracted with
    /// dpkg-deb -x, were checked so).
    fn debug_elfs() -> Vec<PathBuf> {
        let pyenv = std::env::var("PYENV_ROOT").unwrap_or_else(|_| "/root/.pyenv".into());
        let mut elfs: Vec<PathBuf> = fs::read_dir(Path::new(&pyenv).join("versions"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let v = e.file_name().to_string_lossy().into_owned();
                let minor: u8 = v.strip_prefix("3.")?.split('.').next()?.parse().ok()?;
                (minor >= 13).then(|| e.path().join(format!("lib/libpython3.{minor}.so.1.0")))
            })
            .collect();
        if let Ok(more) = std::env::var("MLTRACE_PYTHON_ELFS") {
            elfs.extend(more.split(':').filter(|p| !p.is_empty()).map(PathBuf::from));
        }
        elfs.into_iter().filter(|p| p.exists()).collect()
    }

    /// Where a 3.13+ interpreter's own offsets and the table differ, this says so.
    #[test]
    fn debug_offsets_in_the_file_agree_with_the_table() {
        let elfs = debug_elfs();
        if elfs.is_empty() {
            eprintln!("note: no CPython 3.13+ ELF file here: debug offsets not checked");
        }
        for path in elfs {
            let f = read_facts(&path).unwrap();
            let OwnOffsets::Offsets { hex, offsets } = read_debug(&f.runtime_head) else {
                panic!("{}: no readable _Py_DebugOffsets", path.display());
            };
            assert_eq!(Some(hex), f.version_hex, "{}: Py_Version", path.display());
            let table = table((hex >> 16) as u8).unwrap();
            assert_eq!(&offsets, table, "{}: the debug offsets (left) differ from the table (right)", path.display());
            // Placed as if mapped: a PIE at 0x7f0000000000, a fixed executable at its address.
            let start = if f.load.0 == 0 { 0x7f00_0000_0000 } else { f.load.0 };
            let m = Mapping { start, end: start + 4096, offset: 0, dev: 0, inode: 1, path: path.display().to_string() };
            let Discovery::Ready(interp) = ready(&m, &f, named(file_name(&m.path)).as_ref(), false) else {
                panic!("{}: not ready", path.display());
            };
            assert!(interp.debug_offsets);
            assert_eq!(interp.layout.model, PYM_IFRAME);
            assert_eq!(interp.layout.runtime, start - f.load.0 + f.runtime.unwrap().vaddr);
            eprintln!("{}: {:?}, debug offsets as the table", path.display(), interp.version);
        }
    }

    #[test]
    fn debug_offsets_of_a_free_threaded_build_are_refused() {
        let mut head = vec![0u8; 1024];
        head[..8].copy_from_slice(b"xdebugpy");
        head[8..16].copy_from_slice(&0x030d_00f0u64.to_le_bytes());
        head[DEBUG313.free_threaded] = 1;
        assert_eq!(read_debug(&head), OwnOffsets::FreeThreaded { hex: 0x030d_00f0 });
        head[..8].copy_from_slice(b"xdebugpz");
        assert_eq!(read_debug(&head), OwnOffsets::Absent);
        assert_eq!(read_debug(&head[..4]), OwnOffsets::Absent);
    }

    #[test]
    fn names_give_version_and_build() {
        let n = |s| named(s).map(|n| (n.minor, n.free_threaded, n.debug, n.lib));
        assert_eq!(n("libpython3.13t.so.1.0"), Some((13, true, false, true)));
        assert_eq!(n("libpython3.9.so.1.0"), Some((9, false, false, true)));
        assert_eq!(n("libpython3.7m.so"), Some((7, false, false, true)));
        assert_eq!(n("libpython3.12d.so.1.0"), Some((12, false, true, true)));
        assert_eq!(n("python3.13t"), Some((13, true, false, false)));
        assert_eq!(n("python3.11"), Some((11, false, false, false)));
        assert_eq!(n("python3"), None);
        assert_eq!(n("libpython3.so"), None);
        assert_eq!(n("python3.11-config"), None);
        assert_eq!(n("libpython3.11.a"), None);
        assert_eq!(named("libpython3.13t.so").unwrap().version(), "3.13t");
    }

    #[test]
    fn maps_lines_with_spaces_and_deleted_files() {
        let m =
            parse_map_line("7f00-7f10 r--p 00001000 fd:01 1234    /opt/my py/libpython3.12.so.1.0 (deleted)").unwrap();
        assert_eq!((m.start, m.end, m.offset, m.dev, m.inode), (0x7f00, 0x7f10, 0x1000, 0xfd << 32 | 1, 1234));
        assert_eq!(m.path, "/opt/my py/libpython3.12.so.1.0");
        assert!(parse_map_line("7f00-7f10 rw-p 00000000 00:00 0 ").is_none());
        assert!(parse_map_line("7f00-7f10 r-xp 00000000 00:00 0    [vdso]").is_none());
        assert!(parse_map_line("garbage").is_none());
    }

    /// python.bpf.h reads the state word with fixed bits, and events.h's
    /// struct py_layout is 72 bytes (gcc), its fields where to_bytes puts them.
    #[test]
    fn tables_fit_what_the_bpf_side_assumes() {
        for minor in 9..=14 {
            let t = table(minor).unwrap();
            assert_eq!((t.u_kind_shift, t.u_compact_bit, t.u_ascii_bit), (2, 5, 6), "3.{minor}");
            assert_eq!(t.f_owner == NO_OWNER, minor < 11, "3.{minor}");
        }
        assert_eq!(std::mem::size_of::<Layout>(), Layout::SIZE);
        let l = Layout {
            runtime: 1,
            state: PY_READY,
            model: 3,
            bits: 0x102,
            gen: 7,
            rt_interp: 0x1234,
            f_globals: 0xabcd,
            gil_size: 0xd0,
            gil_off: 0x0001_7968,
            ..Layout::default()
        };
        let b = l.to_bytes();
        assert_eq!((b[0], b[16], b[17], b[18], b[19], b[20]), (1, 1, 3, 2, 1, 7));
        assert_eq!((b[24], b[25], b[64], b[65], b[66], b[67]), (0x34, 0x12, 0xcd, 0xab, 0xd0, 0));
        assert_eq!(b[68..], [0x68, 0x79, 0x01, 0]);
    }
}
