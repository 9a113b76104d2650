//! The file offsets of a shared library's functions, read from its symbol
//! tables: the CUDA and NCCL uprobes are attached by offset.
//!
//! Why not libbpf's own lookup by name: in a library stripped of
//! `.symtab` (as NVIDIA ships `libcuda.so`; `.dynsym` and a version table
//! only) it found none of the entry points, and said nothing. On an H200
//! host (driver 580.159.04) a real PyTorch job was recorded with no CUDA
//! call at all; a stand-in library linked with `-s` does the same, and the
//! tests' stand-ins are built so. Reading the tables here also lets
//! `doctor` say how many entry points each copy has.
//!
//! The Python stack walk uses the same tables for data: where CPython's
//! `_PyRuntime` is, and its initial bytes in the file.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const SHT_DYNAMIC: u32 = 6;
const SHT_NOBITS: u32 = 8;
const STT_OBJECT: u8 = 1;
const PT_LOAD: u32 = 1;
const DT_NEEDED: u64 = 1;
const STT_FUNC: u8 = 2;
const STB_WEAK: u8 = 2;
const SHN_UNDEF: u16 = 0;
const SHN_LORESERVE: u16 = 0xff00;
/// A symbol table or string table larger than this is not read (a
/// damaged header must not make us allocate gigabytes).
const MAX_TABLE: u64 = 512 << 20;

#[derive(Clone, Copy)]
struct Section {
    kind: u32,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
}

fn u16le(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

fn u32le(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

fn u64le(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

fn invalid(path: &Path, what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {what}", path.display()))
}

fn read_at(f: &File, path: &Path, offset: u64, len: u64, what: &str) -> io::Result<Vec<u8>> {
    if len > MAX_TABLE {
        return Err(invalid(path, format!("{what} of {len} bytes at offset {offset}: larger than expected")));
    }
    let mut buf = vec![0; len as usize];
    f.read_exact_at(&mut buf, offset)
        .map_err(|e| invalid(path, format!("{what}: {len} bytes at offset {offset}: {e}")))?;
    Ok(buf)
}

/// An ELF file's section headers, read once for the lookups below.
struct Elf {
    f: File,
    sections: Vec<Section>,
}

fn open(path: &Path) -> io::Result<Elf> {
    let f = File::open(path)?;
    let eh = read_at(&f, path, 0, 64, "ELF header")?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return Err(invalid(path, "not a 64-bit little-endian ELF file".into()));
    }
    let (shoff, shentsize, shnum) = (u64le(&eh[0x28..]), u64::from(u16le(&eh[0x3a..])), u64::from(u16le(&eh[0x3c..])));
    if shnum == 0 || shentsize < 64 {
        return Err(invalid(path, format!("{shnum} section headers of {shentsize} bytes: no symbol tables")));
    }
    let raw = read_at(&f, path, shoff, shentsize * shnum, "section headers")?;
    let sections = raw
        .chunks_exact(shentsize as usize)
        .map(|s| Section {
            kind: u32le(&s[4..]),
            addr: u64le(&s[0x10..]),
            offset: u64le(&s[0x18..]),
            size: u64le(&s[0x20..]),
            link: u32le(&s[0x28..]),
        })
        .collect();
    Ok(Elf { f, sections })
}

/// One defined symbol of a table: its name (without a `@VER`), `st_info`,
/// section, value and size.
struct Sym<'a> {
    name: &'a [u8],
    info: u8,
    section: Section,
    value: u64,
    size: u64,
}

impl Elf {
    /// Calls `each` for every symbol defined in a section, in the tables of `kind`.
    fn symbols(&self, path: &Path, kind: u32, mut each: impl FnMut(Sym)) -> io::Result<()> {
        for table in self.sections.iter().filter(|s| s.kind == kind) {
            let Some(strings) = self.sections.get(table.link as usize) else {
                return Err(invalid(
                    path,
                    format!("a symbol table names string table {}, which is not there", table.link),
                ));
            };
            let syms = read_at(&self.f, path, table.offset, table.size, "symbol table")?;
            let strs = read_at(&self.f, path, strings.offset, strings.size, "string table")?;
            for sym in syms.chunks_exact(24) {
                let (info, shndx, value, size) = (sym[4], u16le(&sym[6..]), u64le(&sym[8..]), u64le(&sym[16..]));
                if shndx == SHN_UNDEF || shndx >= SHN_LORESERVE {
                    continue;
                }
                let start = u32le(sym) as usize;
                let Some(name) = strs.get(start..).and_then(|s| s.split(|&b| b == 0).next()) else { continue };
                let name = name.split(|&b| b == b'@').next().unwrap_or(name);
                let Some(&section) = self.sections.get(usize::from(shndx)) else { continue };
                each(Sym { name, info, section, value, size });
            }
        }
        Ok(())
    }
}

/// The offsets in the file of the functions named `names` that it
/// defines (those it lacks are left out), from `.dynsym`, else `.symtab`.
/// A name may carry a version in `.symtab` (`f@VER`, `f@@VER`). Where a
/// name is defined twice, a global definition wins over a weak one.
pub fn function_offsets(path: &Path, names: &[&str]) -> io::Result<HashMap<String, u64>> {
    let elf = open(path)?;
    // name -> (offset, weak)
    let mut found: HashMap<String, (u64, bool)> = HashMap::new();
    for kind in [SHT_DYNSYM, SHT_SYMTAB] {
        elf.symbols(path, kind, |sym| {
            if sym.info & 0xf != STT_FUNC {
                return;
            }
            let Some(&want) = names.iter().find(|n| n.as_bytes() == sym.name) else { return };
            let Some(offset) = sym.value.checked_sub(sym.section.addr).map(|d| d + sym.section.offset) else {
                return;
            };
            let weak = sym.info >> 4 == STB_WEAK;
            match found.get(want) {
                // Kept unless a global one replaces a weak one.
                Some(&(_, was_weak)) if !was_weak || weak => {}
                _ => {
                    found.insert(want.to_string(), (offset, weak));
                }
            }
        })?;
    }
    Ok(found.into_iter().map(|(k, (o, _))| (k, o)).collect())
}

/// A data object that a file defines (CPython's `_PyRuntime`, `Py_Version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataSymbol {
    /// `st_value`: its address before the file's load base is added.
    pub vaddr: u64,
    pub size: u64,
    /// Where its initial bytes are in the file; `None` in `.bss` (zeros, not in the file).
    pub file_offset: Option<u64>,
}

/// The data objects named `names` that the file defines (those it lacks
/// are left out), from `.dynsym`, else `.symtab`; a global definition wins
/// over a weak one.
pub fn data_symbols(path: &Path, names: &[&str]) -> io::Result<HashMap<String, DataSymbol>> {
    let elf = open(path)?;
    let mut found: HashMap<String, (DataSymbol, bool)> = HashMap::new();
    for kind in [SHT_DYNSYM, SHT_SYMTAB] {
        if found.len() == names.len() {
            break; // a stripped-down `.dynsym` often has them all: `.symtab` is the big one
        }
        elf.symbols(path, kind, |sym| {
            if sym.info & 0xf != STT_OBJECT {
                return;
            }
            let Some(&want) = names.iter().find(|n| n.as_bytes() == sym.name) else { return };
            let file_offset = (sym.section.kind != SHT_NOBITS)
                .then(|| sym.value.checked_sub(sym.section.addr).map(|d| d + sym.section.offset))
                .flatten();
            let data = DataSymbol { vaddr: sym.value, size: sym.size, file_offset };
            let weak = sym.info >> 4 == STB_WEAK;
            match found.get(want) {
                Some(&(_, was_weak)) if !was_weak || weak => {}
                _ => {
                    found.insert(want.to_string(), (data, weak));
                }
            }
        })?;
    }
    Ok(found.into_iter().map(|(k, (d, _))| (k, d)).collect())
}

/// The libraries the file names as `DT_NEEDED` in its dynamic section.
pub fn needed_libraries(path: &Path) -> io::Result<Vec<String>> {
    let elf = open(path)?;
    let mut needed = Vec::new();
    for dynamic in elf.sections.iter().filter(|s| s.kind == SHT_DYNAMIC) {
        let Some(strings) = elf.sections.get(dynamic.link as usize) else { continue };
        let entries = read_at(&elf.f, path, dynamic.offset, dynamic.size, "dynamic section")?;
        let strs = read_at(&elf.f, path, strings.offset, strings.size, "dynamic string table")?;
        for e in entries.chunks_exact(16) {
            if u64le(e) != DT_NEEDED {
                continue;
            }
            let Some(name) = usize::try_from(u64le(&e[8..])).ok().and_then(|s| strs.get(s..)) else { continue };
            let name = name.split(|&b| b == 0).next().unwrap_or(name);
            needed.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok(needed)
}

/// The first `PT_LOAD` segment's `(p_vaddr, p_offset)`: with the address
/// the file is mapped at, its load base (0 for a file not built PIE).
pub fn first_load(path: &Path) -> io::Result<(u64, u64)> {
    let f = File::open(path)?;
    let eh = read_at(&f, path, 0, 64, "ELF header")?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return Err(invalid(path, "not a 64-bit little-endian ELF file".into()));
    }
    let (phoff, phentsize, phnum) = (u64le(&eh[0x20..]), u64::from(u16le(&eh[0x36..])), u64::from(u16le(&eh[0x38..])));
    if phentsize < 56 {
        return Err(invalid(path, format!("program headers of {phentsize} bytes")));
    }
    let raw = read_at(&f, path, phoff, phentsize * phnum, "program headers")?;
    raw.chunks_exact(phentsize as usize)
        .find(|p| u32le(p) == PT_LOAD)
        .map(|p| (u64le(&p[0x10..]), u64le(&p[0x08..])))
        .ok_or_else(|| invalid(path, "no PT_LOAD segment".into()))
}

#[cfg(test)]
mod tests {
    use super::{data_symbols, first_load, function_offsets, needed_libraries};
    use std::path::Path;

    /// The path of this test binary's libc, as its maps name it.
    fn libc_path(maps: &str) -> &str {
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.rsplit('/').next().unwrap().starts_with("libc.so"))
            .expect("libc mapped")
    }

    /// This test binary's own libc: `getpid` is there, at the offset the
    /// dynamic linker maps it from.
    #[test]
    fn libc_functions_are_found_where_they_are_mapped() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let path = libc_path(&maps);
        let got = function_offsets(Path::new(path), &["getpid", "no_such_function_here"]).unwrap();
        assert_eq!(got.len(), 1, "{got:?}");
        // The address the process calls, back to a file offset through the
        // executable mapping that holds it.
        // SAFETY: a C string and the default handle.
        let addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"getpid".as_ptr()) } as u64;
        assert_ne!(addr, 0);
        let off = maps
            .lines()
            .filter(|l| l.ends_with(path) && l.split_whitespace().nth(1).is_some_and(|p| p.contains('x')))
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let (range, _, off) = (f.next()?, f.next()?, f.next()?);
                let (lo, hi) = range.split_once('-')?;
                let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
                (lo..hi).contains(&addr).then(|| addr - lo + u64::from_str_radix(off, 16).unwrap())
            })
            .expect("getpid in an executable mapping of libc");
        assert_eq!(got["getpid"], off);
    }

    /// libc's `environ`, in `.bss`: at the load base (from the mapping at
    /// file offset 0 and the first `PT_LOAD`) plus its value.
    #[test]
    fn data_symbols_are_found_where_they_are_mapped() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let path = libc_path(&maps);
        let got = data_symbols(Path::new(path), &["environ", "getpid"]).unwrap();
        assert_eq!(got.len(), 1, "a function is not data: {got:?}");
        assert_eq!(got["environ"].size, 8);
        assert_eq!(got["environ"].file_offset, None, "in .bss");
        let start = maps
            .lines()
            .filter(|l| l.ends_with(path))
            .find_map(|l| {
                let mut f = l.split_whitespace();
                let (range, _, off) = (f.next()?, f.next()?, f.next()?);
                (u64::from_str_radix(off, 16).ok()? == 0)
                    .then(|| u64::from_str_radix(range.split_once('-')?.0, 16).ok())?
            })
            .expect("libc mapped at file offset 0");
        let (vaddr, offset) = first_load(Path::new(path)).unwrap();
        assert_eq!(offset, 0);
        // SAFETY: a C string and the default handle.
        let addr = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"environ".as_ptr()) } as u64;
        assert_eq!(start - vaddr + got["environ"].vaddr, addr);
        assert!(needed_libraries(Path::new(path)).unwrap().iter().any(|n| n.starts_with("ld-linux")));
    }

    #[test]
    fn a_file_that_is_not_elf_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("libcuda.so.1");
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        let e = function_offsets(&p, &["cuInit"]).unwrap_err().to_string();
        assert!(e.contains("libcuda.so.1"), "{e}");
        std::fs::write(&p, [0x7f, b'E', b'L', b'F', 2, 1]).unwrap();
        let e = function_offsets(&p, &["cuInit"]).unwrap_err().to_string();
        assert!(e.contains("ELF header"), "{e}");
    }
}
