//! Block I/O capture on the real disk: exact requests for O_DIRECT calls,
//! attribution of buffered I/O, totals against /proc/diskstats, and the
//! Perfetto export's lanes and flows.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mltrace_log::*;
use mltrace_tests::*;

const MIB: usize = 1 << 20;

struct BlockRun {
    _dir: tempfile::TempDir,
    log: PathBuf,
    kv: HashMap<String, i64>,
    extents: Vec<(u64, u64, u64)>,
    recs: Vec<Rec>,
}

/// Runs tests/workloads/direct_io.c on the disk holding the build
/// directory (not a tmpfs: O_DIRECT and block requests need a real disk).
fn run_direct_io(extra: &[&str]) -> BlockRun {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bin = compile_workload("direct_io", dir.path());
    let random = |n: usize| -> Vec<u8> {
        let mut s = 0x1234_5678_9abc_def0u64;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s as u8
            })
            .collect()
    };
    std::fs::write(dir.path().join("scratch.bin"), random(MIB)).unwrap();
    std::fs::write(dir.path().join("cold.bin"), random(MIB)).unwrap();
    // Written and on disk, then out of the page cache.
    let st = std::process::Command::new("sync").status().unwrap();
    assert!(st.success());
    std::fs::write("/proc/sys/vm/drop_caches", "3").unwrap();
    let log = dir.path().join("run.bin");
    let mut args = vec!["record", "-q", "-o", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.extend(["--", bin.to_str().unwrap()]);
    let out = mltrace(&args, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains(" 0 lost"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let extents = stdout
        .lines()
        .filter_map(|l| {
            let v: Vec<u64> = l.strip_prefix("extent ")?.split(' ').map(|x| x.parse().unwrap()).collect();
            Some((v[0], v[1], v[2]))
        })
        .collect();
    let recs = read_log(&log);
    BlockRun { kv: key_values(&stdout), extents, recs, log, _dir: dir }
}

fn blocks(recs: &[Rec]) -> Vec<Block> {
    recs.iter().filter_map(|r| if let Record::Block(b) = r.rec { Some(b) } else { None }).collect()
}

/// The 512-byte sector on the whole disk where byte `off` of the file lives.
fn sector_of(run: &BlockRun, off: u64) -> u64 {
    let (maj, min) = (run.kv["dev_major"], run.kv["dev_minor"]);
    // A partition's sectors are relative to its start on the disk.
    let start: u64 = std::fs::read_to_string(format!("/sys/dev/block/{maj}:{min}/start"))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0);
    let &(logical, physical, _) =
        run.extents.iter().find(|(l, _, len)| off >= *l && off < l + len).expect("offset in an extent");
    start + (physical + off - logical) / 512
}

/// The syscalls of `pid` on files ending in `name`, with what block I/O they caused.
fn calls_on<'a>(recs: &'a [Rec], pid: u32, name: &str) -> Vec<&'a Rec> {
    recs.iter().filter(|r| matches!(r.rec, Record::Io(x) if x.pid == pid) && r.strs[0].ends_with(name)).collect()
}

fn caused_by<'a>(blocks: &'a [Block], io: &Io) -> Vec<&'a Block> {
    let mut v: Vec<&Block> = blocks.iter().filter(|b| b.cause_ts == io.ts && b.tid == io.tid).collect();
    v.sort_by_key(|b| b.cause_idx);
    v
}

fn check_direct_io(run: &BlockRun) {
    let pid = run.kv["pid"] as u32;
    let blocks = blocks(&run.recs);
    let direct: Vec<Io> = calls_on(&run.recs, pid, "/scratch.bin")
        .iter()
        .map(|r| if let Record::Io(x) = r.rec { x } else { unreachable!() })
        .collect();
    let want: [(IoOp, u64, u64); 6] = [
        (IoOp::Pwrite64, 4096, 0),
        (IoOp::Pwrite64, 16384, 65536),
        (IoOp::Pwrite64, 65536, 131072),
        (IoOp::Pread64, 8192, 4096),
        (IoOp::Pread64, 32768, 262144),
        (IoOp::Pread64, 4096, 1044480),
    ];
    assert_eq!(direct.len(), want.len());
    for (io, (op, len, off)) in direct.iter().zip(want) {
        assert_eq!((io.op, io.ret, io.offset), (op, len as i64, off));
        let reqs = caused_by(&blocks, io);
        assert!(io.block_reqs > 0 && reqs.len() == io.block_reqs as usize, "{io:?}: {reqs:?}");
        // The requests cover exactly the bytes asked for, where the file
        // lives on the disk, as the right operation, in our process.
        let mut expect_sector = sector_of(run, off);
        for (k, b) in reqs.iter().enumerate() {
            assert_eq!(b.cause_idx, k as u32);
            assert_eq!(b.op, if op == IoOp::Pwrite64 { BlockOp::Write } else { BlockOp::Read });
            assert_eq!((b.pid, b.tid), (pid, pid));
            assert!(b.flags & blk::TRACED != 0 && b.flags & blk::KTHREAD == 0);
            assert_eq!(b.sector, expect_sector, "request {k} of {io:?}");
            assert_eq!(b.error, 0);
            assert!(b.device > 0);
            expect_sector += b.bytes / 512;
        }
        assert_eq!(reqs.iter().map(|b| b.bytes).sum::<u64>(), len);
    }
}

#[test]
fn block_requests_are_exact_attributed_and_match_diskstats() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let run = run_direct_io(&[]);
    check_direct_io(&run);
    let pid = run.kv["pid"] as u32;
    let blocks = blocks(&run.recs);

    // Buffered read of uncached data: readahead, in our context, caused by
    // our read calls, covering the whole file.
    let cold_reads: u64 = calls_on(&run.recs, pid, "/cold.bin")
        .iter()
        .map(
            |r| if let Record::Io(x) = r.rec { caused_by(&blocks, &x).iter().map(|b| b.bytes).sum::<u64>() } else { 0 },
        )
        .sum();
    assert_eq!(cold_reads, MIB as u64, "readahead of cold.bin");
    // Buffered write + fsync: the data goes to disk in fsync, in our context.
    let fsync = calls_on(&run.recs, pid, "/warm.bin")
        .into_iter()
        .find_map(|r| if let Record::Io(x) = r.rec { (x.op == IoOp::Fsync).then_some(x) } else { None })
        .expect("fsync record");
    let written: u64 = caused_by(&blocks, &fsync).iter().filter(|b| b.op == BlockOp::Write).map(|b| b.bytes).sum();
    assert!(written >= 262144, "fsync wrote {written} bytes");

    // Every completion of the recording against the kernel's own counters:
    // what completed between the two snapshots is in both.
    let h = LogReader::open(&run.log).unwrap().header().clone();
    let mut r = LogReader::open(&run.log).unwrap();
    while r.next_frame().unwrap().is_some() {}
    let t = r.trailer().unwrap().clone();
    let (s0, s1) = (h.diskstats.expect("start snapshot"), t.diskstats.expect("end snapshot"));
    let mut checked = 0;
    for d1 in &s1.disks {
        let Some(d0) = s0.disks.iter().find(|d| d.major == d1.major && d.minor == d1.minor) else { continue };
        let dev = (d1.major << 20) | d1.minor;
        let on_disk: Vec<&Block> = blocks.iter().filter(|b| b.dev == dev).collect();
        if on_disk.is_empty() && d1.read_sectors == d0.read_sectors && d1.write_sectors == d0.write_sectors {
            continue; // an idle disk, or a partition (requests are per disk)
        }
        let sum = |lo: u64, hi: u64, write: bool| -> u64 {
            on_disk
                .iter()
                .filter(|b| (lo..=hi).contains(&b.end_ts()))
                .filter(|b| {
                    let op = b.op as u8;
                    b.op != BlockOp::Discard && if write { op & 1 == 1 } else { op == 0 }
                })
                .map(|b| b.bytes / 512)
                .sum()
        };
        for (write, delta) in [(false, d1.read_sectors - d0.read_sectors), (true, d1.write_sectors - d0.write_sectors)]
        {
            // Completions inside the snapshots' own read windows may be on
            // either side; outside them, the counts must agree exactly.
            let (sure, maybe) = (sum(s0.ts_after, s1.ts_before, write), sum(s0.ts_before, s1.ts_after, write));
            assert!(
                sure <= delta && delta <= maybe,
                "{}: {} sectors: diskstats {delta}, traced {sure}..={maybe}",
                d1.name,
                if write { "written" } else { "read" }
            );
        }
        checked += 1;
    }
    assert!(checked >= 1, "the disk under the build directory was checked");

    // The Perfetto export: lanes never overlap, and flows lead from each
    // O_DIRECT call to its requests, and from there to the disk's.
    let Some(tp) = perfetto_tp() else { return };
    let trace = run.log.with_extension("perfetto-trace");
    let out = mltrace(&["export", run.log.to_str().unwrap(), "-o", trace.to_str().unwrap()], Path::new("."));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows = tp_query(
        &tp,
        &trace,
        &[
            "select count(*) from slice where dur < 0 or depth > 0",
            "select count(*) from slice s join track t on s.track_id = t.id where t.name = 'requests'",
            &format!(
                "select a.name, count(*) from flow f join slice a on a.id = f.slice_out join slice b on b.id = f.slice_in \
                 join thread_track ta on a.track_id = ta.id join thread using(utid) join process p using(upid) \
                 join track tb on b.track_id = tb.id \
                 where p.pid = {pid} and tb.name = 'block I/O' and a.name like 'p%64%' group by a.name order by a.name"
            ),
            "select count(*) from flow f join slice a on a.id = f.slice_out join slice b on b.id = f.slice_in \
             join track ta on a.track_id = ta.id join track tb on b.track_id = tb.id \
             where ta.name = 'block I/O' and tb.name = 'requests'",
            "select count(*) from counter_track where name glob 'Disk * · in flight'",
        ],
    );
    assert_eq!(rows[0], vec![vec!["0".to_string()]]);
    assert_eq!(rows[1], vec![vec![blocks.len().to_string()]]);
    let n_req = |op: IoOp| -> usize {
        calls_on(&run.recs, pid, "/scratch.bin")
            .iter()
            .filter_map(
                |r| if let Record::Io(x) = r.rec { (x.op == op).then_some(x.block_reqs as usize) } else { None },
            )
            .sum()
    };
    let by_name: HashMap<String, usize> = rows[2].iter().map(|r| (r[0].clone(), r[1].parse().unwrap())).collect();
    let count = |prefix: &str| by_name.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, v)| v).sum::<usize>();
    assert_eq!(count("pwrite64"), n_req(IoOp::Pwrite64), "{by_name:?}");
    assert_eq!(count("pread64"), n_req(IoOp::Pread64), "{by_name:?}");
    let traced = blocks.iter().filter(|b| b.flags & blk::TRACED != 0).count();
    assert_eq!(rows[3], vec![vec![traced.to_string()]]);
    let disks: std::collections::BTreeSet<u32> = blocks.iter().map(|b| b.dev).collect();
    assert_eq!(rows[4], vec![vec![disks.len().to_string()]]);
}

#[test]
fn older_kernels_route_attributes_the_same() {
    let Some(_turn) = require_root!() else {
        return;
    };
    // block_rq_insert/issue instead of block_io_start, as on kernels < 6.5.
    let run = run_direct_io(&["--block-probes", "rq-insert"]);
    let h = LogReader::open(&run.log).unwrap().header().clone();
    assert!(
        h.probes.iter().any(|p| p.subsystem == "block" && p.detail.starts_with("block_rq_insert")),
        "{:?}",
        h.probes
    );
    check_direct_io(&run);
}

#[test]
fn block_probes_can_be_turned_off() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let run = run_direct_io(&["--block-probes", "off"]);
    assert!(blocks(&run.recs).is_empty());
    let h = LogReader::open(&run.log).unwrap().header().clone();
    assert!(h.probes.iter().all(|p| p.subsystem != "block") && h.diskstats.is_none());
}
