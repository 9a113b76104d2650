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

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
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

/// The offsets in the file of the functions named `names` that it
/// defines (those it lacks are left out), from `.dynsym`, else `.symtab`.
/// A name may carry a version in `.symtab` (`f@VER`, `f@@VER`). Where a
/// name is defined twice, a global definition wins over a weak one.
pub fn function_offsets(path: &Path, names: &[&str]) -> io::Result<HashMap<String, u64>> {
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
    let sections: Vec<Section> = raw
        .chunks_exact(shentsize as usize)
        .map(|s| Section {
            kind: u32le(&s[4..]),
            addr: u64le(&s[0x10..]),
            offset: u64le(&s[0x18..]),
            size: u64le(&s[0x20..]),
            link: u32le(&s[0x28..]),
        })
        .collect();
    // name -> (offset, weak)
    let mut found: HashMap<String, (u64, bool)> = HashMap::new();
    for kind in [SHT_DYNSYM, SHT_SYMTAB] {
        for table in sections.iter().filter(|s| s.kind == kind) {
            let Some(strings) = sections.get(table.link as usize) else {
                return Err(invalid(
                    path,
                    format!("a symbol table names string table {}, which is not there", table.link),
                ));
            };
            let syms = read_at(&f, path, table.offset, table.size, "symbol table")?;
            let strs = read_at(&f, path, strings.offset, strings.size, "string table")?;
            for sym in syms.chunks_exact(24) {
                let (info, shndx, value) = (sym[4], u16le(&sym[6..]), u64le(&sym[8..]));
                if info & 0xf != STT_FUNC || shndx == SHN_UNDEF || shndx >= SHN_LORESERVE {
                    continue;
                }
                let start = u32le(sym) as usize;
                let Some(name) = strs.get(start..).and_then(|s| s.split(|&b| b == 0).next()) else { continue };
                let base = name.split(|&b| b == b'@').next().unwrap_or(name);
                let Some(&want) = names.iter().find(|n| n.as_bytes() == base) else { continue };
                let Some(sec) = sections.get(usize::from(shndx)) else { continue };
                let Some(offset) = value.checked_sub(sec.addr).map(|d| d + sec.offset) else { continue };
                let weak = info >> 4 == STB_WEAK;
                match found.get(want) {
                    // Kept unless a global one replaces a weak one.
                    Some(&(_, was_weak)) if !was_weak || weak => {}
                    _ => {
                        found.insert(want.to_string(), (offset, weak));
                    }
                }
            }
        }
    }
    Ok(found.into_iter().map(|(k, (o, _))| (k, o)).collect())
}

#[cfg(test)]
mod tests {
    use super::function_offsets;
    use std::path::Path;

    /// This test binary's own libc: `getpid` is there, at the offset the
    /// dynamic linker maps it from.
    #[test]
    fn libc_functions_are_found_where_they_are_mapped() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| l.split_whitespace().nth(5).is_some_and(|p| p.rsplit('/').next().unwrap().starts_with("libc.so")))
            .expect("libc mapped");
        let path = line.split_whitespace().nth(5).unwrap();
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
