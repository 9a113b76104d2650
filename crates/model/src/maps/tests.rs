use super::*;

const MIB: u64 = 1 << 20;
const A: u64 = 0x7f00_0000_0000;
const DEV: u32 = 254 << 20 | 1;

fn mmap(pid: u32, at: u64, len: u64, offset: u64, ino: u64) -> Record {
    Record::Mapping(Mapping {
        pid,
        tid: pid,
        op: MapOp::Mmap,
        fd: 3,
        kind: FileKind::Regular,
        dev: DEV,
        ino,
        offset,
        len,
        prot: 1,
        flags: 1,
        ret: at as i64,
        ..Default::default()
    })
}

fn munmap(pid: u32, at: u64, len: u64) -> Record {
    Record::Mapping(Mapping { pid, tid: pid, op: MapOp::Munmap, fd: -1, addr: at, len, ..Default::default() })
}

fn mremap(pid: u32, old: u64, old_len: u64, new_len: u64, flags: u32, to: u64) -> Record {
    Record::Mapping(Mapping {
        pid,
        tid: pid,
        op: MapOp::Mremap,
        fd: -1,
        addr: old,
        len: old_len,
        new_len,
        flags,
        ret: to as i64,
        ..Default::default()
    })
}

fn fork(parent: u32, child: u32, thread: bool) -> Record {
    let pid = if thread { parent } else { child };
    Record::Fork(Fork { pid, tid: child, parent_pid: parent, parent_tid: parent, thread, ..Default::default() })
}

/// (start, end, file offset) of each region of `pid`.
fn regions(m: &Maps, pid: u32) -> Vec<(u64, u64, u64)> {
    m.tables.get(&pid).map_or(vec![], |t| t.regions.values().map(|r| (r.start, r.end, r.offset)).collect())
}

fn path(ino: u64) -> Vec<u8> {
    format!("/data/f{ino}").into_bytes()
}

fn apply(m: &mut Maps, r: Record) -> Applied {
    let p = match r {
        Record::Mapping(x) => path(x.ino),
        _ => vec![],
    };
    m.apply_path(&r, &p)
}

#[test]
fn classes() {
    let base = Mapping { op: MapOp::Mmap, kind: FileKind::Regular, prot: 1, flags: 1, ..Default::default() };
    assert_eq!(classify(&base), MapClass::Data);
    assert_eq!(classify(&Mapping { prot: 5, ..base }), MapClass::Code);
    assert_eq!(classify(&Mapping { flags: 0x802, ..base }), MapClass::Code, "ld.so's MAP_DENYWRITE");
    assert_eq!(classify(&Mapping { flags: 0x22, kind: FileKind::Unknown, ..base }), MapClass::Anonymous);
    assert_eq!(classify(&Mapping { file_flags: mapf::MEMORY_FS, ..base }), MapClass::SharedMemory);
    assert_eq!(classify(&Mapping { kind: FileKind::Memfd, ..base }), MapClass::SharedMemory);
    assert_eq!(classify(&Mapping { kind: FileKind::CharDev, ..base }), MapClass::Other);
    assert_eq!(classify(&Mapping { kind: FileKind::BlockDev, ..base }), MapClass::Data);
}

#[test]
fn mmap_then_partial_munmap_splits() {
    let mut m = Maps::default();
    let a = apply(&mut m, mmap(1, A, 16 * MIB, 4096, 7));
    assert_eq!((a.class, a.file.unwrap().path.as_ref()), (Some(MapClass::Data), &b"/data/f7"[..]));
    let u = apply(&mut m, munmap(1, A + 4 * MIB, 2 * MIB));
    assert_eq!((u.class, u.offset), (Some(MapClass::Data), 4096 + 4 * MIB));
    assert_eq!(regions(&m, 1), [(A, A + 4 * MIB, 4096), (A + 6 * MIB, A + 16 * MIB, 4096 + 6 * MIB)]);
    // Lookups: offsets follow the split; the hole is nobody's.
    assert_eq!(m.find(1, A + 6 * MIB + 10).map(|r| r.offset_of(A + 6 * MIB + 10)), Some(4096 + 6 * MIB + 10));
    assert!(m.find(1, A + 5 * MIB).is_none());
    assert!(m.find(1, A + 16 * MIB).is_none());
    assert!(m.maps_file(1, DEV, 7));
    // An unmap across both pieces and beyond; lengths round up to pages.
    apply(&mut m, munmap(1, A + MIB, 6 * MIB + 1));
    assert_eq!(regions(&m, 1), [(A, A + MIB, 4096), (A + 7 * MIB + 4096, A + 16 * MIB, 4096 + 7 * MIB + 4096)]);
    // Unmapping what is not a data mapping touches nothing.
    assert_eq!(apply(&mut m, munmap(1, A - MIB, 4096)).class, None);
    apply(&mut m, munmap(1, A, 16 * MIB));
    assert!(m.is_empty(), "an empty table is dropped");
    assert!(!m.maps_file(1, DEV, 7));
}

#[test]
fn map_fixed_replaces_and_other_classes_are_not_kept() {
    let mut m = Maps::default();
    apply(&mut m, mmap(1, A, 8 * MIB, 0, 7));
    // A library segment mapped over the middle (MAP_FIXED): not data.
    let lib = Record::Mapping(Mapping { prot: 5, flags: 0x812, ..mapping_of(mmap(1, A + MIB, MIB, 0, 9)) });
    assert_eq!(apply(&mut m, lib).class, Some(MapClass::Code));
    assert_eq!(regions(&m, 1), [(A, A + MIB, 0), (A + 2 * MIB, A + 8 * MIB, 2 * MIB)]);
    // Anonymous MAP_FIXED memory too.
    let anon = Record::Mapping(Mapping {
        fd: -1,
        kind: FileKind::Unknown,
        flags: 0x32,
        ..mapping_of(mmap(1, A + 7 * MIB, MIB, 0, 0))
    });
    assert_eq!(apply(&mut m, anon).class, Some(MapClass::Anonymous));
    assert_eq!(regions(&m, 1), [(A, A + MIB, 0), (A + 2 * MIB, A + 7 * MIB, 2 * MIB)]);
    // A failed mmap changes nothing.
    let failed = Record::Mapping(Mapping { ret: -12, ..mapping_of(mmap(1, 0, MIB, 0, 8)) });
    assert_eq!(apply(&mut m, failed).class, Some(MapClass::Data));
    assert_eq!(regions(&m, 1).len(), 2);
}

fn mapping_of(r: Record) -> Mapping {
    match r {
        Record::Mapping(m) => m,
        _ => unreachable!(),
    }
}

#[test]
fn mremap_in_place_and_moving() {
    let mut m = Maps::default();
    apply(&mut m, mmap(1, A, 4 * MIB, 0, 7));
    // Grow in place.
    let g = apply(&mut m, mremap(1, A, 4 * MIB, 6 * MIB, 0, A));
    assert_eq!((g.class, g.grown), (Some(MapClass::Data), 2 * MIB));
    assert_eq!(regions(&m, 1), [(A, A + 6 * MIB, 0)]);
    // Shrink in place.
    assert_eq!(apply(&mut m, mremap(1, A, 6 * MIB, 3 * MIB, 0, A)).grown, 0);
    assert_eq!(regions(&m, 1), [(A, A + 3 * MIB, 0)]);
    // Grow and move (MREMAP_MAYMOVE): the file offsets move along.
    let b = A + 64 * MIB;
    apply(&mut m, mremap(1, A, 3 * MIB, 5 * MIB, 1, b));
    assert_eq!(regions(&m, 1), [(b, b + 5 * MIB, 0)]);
    assert_eq!(m.find(1, b + 4 * MIB).map(|r| r.offset_of(b + 4 * MIB)), Some(4 * MIB));
    // Move the second half of a split mapping somewhere else, shrinking it.
    apply(&mut m, munmap(1, b + MIB, MIB));
    let c = A + 128 * MIB;
    apply(&mut m, mremap(1, b + 2 * MIB, 3 * MIB, MIB, 3, c));
    assert_eq!(regions(&m, 1), [(b, b + MIB, 0), (c, c + MIB, 2 * MIB)]);
    // A failed mremap and one of anonymous memory change nothing.
    let failed = Record::Mapping(Mapping { ret: -14, ..mapping_of(mremap(1, b, MIB, 2 * MIB, 1, 0)) });
    assert_eq!(apply(&mut m, failed).class, None);
    assert_eq!(apply(&mut m, mremap(1, A + 256 * MIB, MIB, 2 * MIB, 1, A + 512 * MIB)).class, None);
    assert_eq!(regions(&m, 1), [(b, b + MIB, 0), (c, c + MIB, 2 * MIB)]);
}

#[test]
fn mremap_that_keeps_the_old_mapping() {
    let mut m = Maps::default();
    apply(&mut m, mmap(1, A, 2 * MIB, 0, 7));
    // old_len 0 on a shared mapping: a second mapping of the same pages.
    let d = apply(&mut m, mremap(1, A, 0, MIB, 1, A + 16 * MIB));
    assert_eq!(d.grown, MIB);
    assert_eq!(regions(&m, 1), [(A, A + 2 * MIB, 0), (A + 16 * MIB, A + 17 * MIB, 0)]);
    // MREMAP_DONTUNMAP (4): moved, and the old range stays mapped.
    apply(&mut m, mremap(1, A + MIB, MIB, MIB, 1 | 4, A + 32 * MIB));
    assert_eq!(regions(&m, 1).len(), 3);
    assert_eq!(m.find(1, A + 32 * MIB).map(|r| r.offset), Some(MIB));
}

#[test]
fn fork_copies_exec_clears_exit_drops() {
    let mut m = Maps::default();
    apply(&mut m, mmap(10, A, 256 * MIB, 0, 7));
    // A thread shares its process's table; a process gets a copy.
    assert_eq!(apply(&mut m, fork(10, 11, true)).inherited, 0);
    assert!(m.find(11, A).is_none());
    assert_eq!(apply(&mut m, fork(10, 12, false)).inherited, 256 * MIB);
    assert_eq!(m.find(12, A + 4096).map(|r| r.file.path.as_ref()), Some(&b"/data/f7"[..]));
    // The copy is the child's own: its munmap leaves the parent's alone.
    apply(&mut m, munmap(12, A, 128 * MIB));
    assert!(m.find(12, A).is_none() && m.find(10, A).is_some());
    // A process that maps nothing and forks: nothing to copy.
    assert_eq!(apply(&mut m, fork(99, 13, false)).inherited, 0);
    assert!(!m.tables.contains_key(&13));
    // exec empties the table; the last thread's exit drops it.
    apply(&mut m, Record::Exec(Exec { pid: 12, tid: 12, ..Default::default() }));
    assert!(m.find(12, A + 200 * MIB).is_none());
    assert_eq!(m.len(), 1);
    apply(&mut m, Record::Exit(Exit { pid: 10, tid: 11, process_exit: false, ..Default::default() }));
    assert_eq!(m.len(), 1, "a thread's exit keeps the table");
    apply(&mut m, Record::Exit(Exit { pid: 10, tid: 10, process_exit: true, ..Default::default() }));
    assert!(m.is_empty());
    // A pid reused by a new fork gets its parent's table, not the old one's.
    apply(&mut m, mmap(12, A, MIB, 0, 8));
    apply(&mut m, fork(1, 12, false));
    assert!(m.is_empty());
}

#[test]
fn anonymous_summaries_and_other_records_change_nothing() {
    let mut m = Maps::default();
    apply(&mut m, mmap(1, A, MIB, 0, 7));
    let summary =
        Record::Mapping(Mapping { pid: 1, op: MapOp::Anonymous, len: 1 << 30, ret: 500, ..Default::default() });
    assert_eq!(apply(&mut m, summary).class, None);
    assert_eq!(apply(&mut m, Record::Lost(Lost::default())).class, None);
    assert_eq!(regions(&m, 1), [(A, A + MIB, 0)]);
}
