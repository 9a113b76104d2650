//! `mltrace stats --json`: the same tables for scripts. The names are a
//! contract (docs/stats-json.md): add fields, never rename or reuse
//! one. What a log cannot say is `null`, never a made-up 0.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};

use crate::acc::kernel::Check;
use crate::acc::mapped::{Count, ProcMaps};
use crate::{BlockStats, CacheFill, Histogram, ProcStats, Stats};
use mltrace_log::acct;
use mltrace_log::local_pid;
use std::collections::HashMap;

fn q(h: &Histogram, q: f64) -> Value {
    h.quantile(q).map_or(Value::Null, Value::from)
}

fn block(b: &BlockStats) -> Value {
    json!({
        "requests": b.requests,
        "read_bytes": b.read_bytes,
        "write_bytes": b.write_bytes,
        "other": b.other,
        "errors": b.errors,
        "p50_ns": q(&b.latency, 0.5),
        "p99_ns": q(&b.latency, 0.99),
        "max_ns": if b.requests > 0 { Value::from(b.latency.max()) } else { Value::Null },
        "device_p50_ns": q(&b.device, 0.5),
    })
}

fn cache(c: &CacheFill, read_bytes: u64) -> Value {
    json!({
        "during_reads": c.during_reads,
        "faults": c.faults,
        "other": c.other,
        "filled_by_writes": c.writes,
        "transfers": c.transfers,
        "hit_ratio": c.hit_ratio(read_bytes),
    })
}

fn count(c: &Count) -> Value {
    json!({ "calls": c.calls, "bytes": c.bytes })
}

fn mappings(m: &ProcMaps) -> Value {
    json!({
        "data": count(&m.data),
        "code": count(&m.code),
        "shared_memory": count(&m.shared_memory),
        "anonymous": count(&m.anonymous),
        "other": count(&m.other),
        "inherited_bytes": m.inherited_bytes,
        "munmaps": m.munmaps,
        "mremaps": m.mremaps,
        "failed": m.failed,
    })
}

/// The `files` array, made one file at a time as it is written: a
/// dataset of a million files is a million entries, which as one
/// `Value` tree took 7 KiB each.
struct Files<'a> {
    listed: Vec<(&'a str, &'a crate::FileStats)>,
    has: Has,
}

/// Which probes the log had: a figure of one it lacks is null, never 0.
#[derive(Clone, Copy)]
struct Has {
    page_cache: bool,
    mappings: bool,
    faults: bool,
}

impl Serialize for Files<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.listed.iter().map(|(path, f)| file_json(path, f, self.has)))
    }
}

/// The document: `rest`'s keys in their order, `files` streamed in its place.
struct Whole<'a> {
    rest: Value,
    files: Files<'a>,
}

impl Serialize for Whole<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let obj = self.rest.as_object().expect("the document is an object");
        let mut m = s.serialize_map(Some(obj.len()))?;
        for (k, v) in obj {
            if k == "files" {
                m.serialize_entry(k, &self.files)?;
            } else {
                m.serialize_entry(k, v)?;
            }
        }
        m.end()
    }
}

/// One entry of `files`.
fn file_json(path: &str, f: &crate::FileStats, has: Has) -> Value {
    let (pc, maps, faults) = (has.page_cache, has.mappings, has.faults);
    let opt = |on: bool, v: u64| if on { Value::from(v) } else { Value::Null };
    json!({
        "path": path,
        "opens": f.opens,
        "reads": f.reads,
        "read_bytes": f.read_bytes,
        "writes": f.writes,
        "write_bytes": f.write_bytes,
        "storage_read_bytes": opt(pc, f.cache.storage_read_bytes()),
        "page_cache": if pc { cache(&f.cache, f.read_bytes) } else { Value::Null },
        "mapped_bytes": opt(maps, f.maps.mapped_bytes),
        "major_faults": opt(faults, f.maps.major_faults),
        // Through mappings: needs both the mappings and the page cache.
        "mapped_storage_read_bytes": opt(maps && pc, f.maps.storage_read_bytes),
        "mmaps": opt(maps, f.maps.mmaps),
        "uring_reads": f.uring_reads,
        "uring_read_bytes": f.uring_read_bytes,
        "uring_writes": f.uring_writes,
        "uring_write_bytes": f.uring_write_bytes,
        "total_read_bytes": f.total_read_bytes(),
        "total_write_bytes": f.total_write_bytes(),
    })
}

impl Stats {
    /// The report as one JSON document (for tests and small logs: the
    /// CLI writes it with [`Stats::write_json`]).
    pub fn to_json(&self) -> Value {
        let whole = self.whole();
        let mut v = whole.rest;
        v["files"] = whole.files.listed.iter().map(|(path, f)| file_json(path, f, whole.files.has)).collect();
        v
    }

    /// Writes the report as pretty JSON, the files one at a time.
    pub fn write_json<W: std::io::Write>(&self, w: W) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(w, &self.whole())
    }

    /// Every file, by bytes moved.
    fn files(&self) -> Files<'_> {
        let mut listed = self.top_files(usize::MAX);
        // top_files orders by bytes moved by calls; files only mapped come after.
        listed.sort_by(|a, b| {
            let moved =
                |f: &crate::FileStats| f.total_read_bytes() + f.total_write_bytes() + f.cache.storage_read_bytes();
            moved(b.1).cmp(&moved(a.1)).then(a.0.cmp(b.0))
        });
        let has =
            Has { page_cache: self.has_page_cache(), mappings: self.has_mappings(), faults: self.has_major_faults() };
        Files { listed, has }
    }

    /// Threads other than the main one with scheduling times, by pid.
    fn threads_by_pid(&self) -> HashMap<u32, Vec<u32>> {
        let mut by: HashMap<u32, Vec<u32>> = HashMap::new();
        for (&tid, &(pid, _)) in &self.sched.thread_times {
            by.entry(pid).or_default().push(tid);
        }
        by
    }

    /// Where each of `p`'s threads' time went: its main thread, then the
    /// others by tid; `tids` are the others with scheduling times.
    fn thread_rows(&self, p: &ProcStats, tids: &[u32]) -> Value {
        let mut tids = tids.to_vec();
        tids.sort_unstable();
        let main = self.sched.main_thread.get(&p.pid).map(|t| (p.pid, t));
        let others = tids.iter().filter_map(|tid| self.sched.thread_times.get(tid).map(|t| (*tid, &t.1)));
        let rows: Vec<Value> = main
            .into_iter()
            .chain(others)
            .map(|(tid, t)| {
                let name = p.thread_names.iter().find(|n| n.0 == tid).map_or(p.label(), |n| n.1.as_str());
                let role = if tid == p.pid {
                    "main"
                } else if p.loader_threads.contains(&tid) {
                    "loader"
                } else if p.collective_threads.contains(&tid) {
                    "collective"
                } else {
                    "other"
                };
                let read_ns = self.thread_reads.get(tid).read_ns;
                json!({
                    "tid": local_pid(tid),
                    "name": name,
                    "role": role,
                    "cpu_fraction": t.fraction(t.cpu),
                    "runnable_fraction": t.fraction(t.runnable),
                    "read_fraction": t.fraction(read_ns).map(|f| f.min(1.0)),
                    "io_wait_fraction": t.fraction(t.io_wait),
                    "sleep_fraction": t.fraction(t.sleep),
                })
            })
            .collect();
        rows.into()
    }

    /// Everything but the files' entries (`files` is null there).
    fn whole(&self) -> Whole<'_> {
        let pc = self.has_page_cache();
        let storage = |c: &CacheFill| if pc { Value::from(c.storage_read_bytes()) } else { Value::Null };
        let page_cache = |c: &CacheFill, read: u64| if pc { cache(c, read) } else { Value::Null };
        let lossy = self.total_lost() > 0 || !self.diagnostics.is_empty();
        let has_sched = self.has_sched();
        let feeders = &self.fed;
        let (maps, faults) = (self.has_mappings(), self.has_major_faults());
        let mapped = |v: u64| if maps { Value::from(v) } else { Value::Null };
        let faulted = |v: u64| if faults { Value::from(v) } else { Value::Null };
        // Through mappings: needs both the mappings and the page cache.
        let via_maps = |v: u64| if maps && pc { Value::from(v) } else { Value::Null };
        let threads_of = self.threads_by_pid();
        let processes: Vec<Value> = self
            .processes
            .iter()
            .map(|p| {
                let kernel = p.kernel.as_ref().map_or(Value::Null, |k| {
                    let c = &k.counts;
                    let chars = |v: u64| if k.have & acct::CHARS != 0 { Value::from(v) } else { Value::Null };
                    let by = |v: u64| if k.have & acct::BYTES != 0 { Value::from(v) } else { Value::Null };
                    let t = &p.traced_io;
                    let check = self.check_of(p, k, lossy);
                    json!({
                        "rchar": chars(c.rchar),
                        "wchar": chars(c.wchar),
                        "syscr": chars(c.syscr),
                        "syscw": chars(c.syscw),
                        "read_bytes": by(c.read_bytes),
                        "write_bytes": by(c.write_bytes),
                        "cancelled_write_bytes": by(c.cancelled_write_bytes),
                        "since": if k.since_exec {
                            Value::from("exec")
                        } else if Stats::started_before(p, k) {
                            Value::Null
                        } else {
                            Value::from("fork")
                        },
                        "threads": k.threads,
                        "traced": {
                            "rchar": t.rchar,
                            "wchar": t.wchar,
                            "syscr_min": t.syscr_min,
                            "syscr_max": t.syscr_max,
                            "syscw_min": t.syscw_min,
                            "syscw_max": t.syscw_max,
                        },
                        "check": match &check {
                            Check::Match => "match",
                            Check::Mismatch(_) => "mismatch",
                            Check::Unchecked(why) => why,
                        },
                        "differences": match check {
                            Check::Mismatch(d) => d,
                            _ => Vec::new(),
                        },
                    })
                });
                let mut v = json!({
                    "pid": p.pid,
                    "parent": if p.parent == 0 { Value::Null } else { Value::from(p.parent) },
                    "name": p.name,
                    "trace_name": p.trace_name,
                    "thread_count": p.threads,
                    "threads": [],
                    "exit_status": p.exit_status,
                    "reads": p.reads.count,
                    "read_bytes": p.reads.bytes,
                    "read_errors": p.reads.errors,
                    "read_p50_ns": q(&p.reads.latency, 0.5),
                    "read_p99_ns": q(&p.reads.latency, 0.99),
                    "writes": p.writes.count,
                    "write_bytes": p.writes.bytes,
                    "write_errors": p.writes.errors,
                    "write_p50_ns": q(&p.writes.latency, 0.5),
                    "write_p99_ns": q(&p.writes.latency, 0.99),
                    "opens": p.opens.count,
                    "failed_opens": p.opens.errors,
                    "closes": p.closes,
                    "net_send_bytes": p.sockets.send_bytes,
                    "net_recv_bytes": p.sockets.recv_bytes,
                    "files": p.files_touched(),
                    "block": block(&p.block),
                    "storage_read_bytes": storage(&p.cache),
                    "page_cache": page_cache(&p.cache, p.reads.bytes),
                    "mapped_bytes": mapped(p.maps.mapped_bytes()),
                    "major_faults": faulted(p.maps.major_faults),
                    "mapped_storage_read_bytes": via_maps(p.maps.storage_read_bytes),
                    "major_faults_other": faulted(p.maps.major_faults_other),
                    "mappings": if maps { mappings(&p.maps) } else { Value::Null },
                    "kernel": kernel,
                    "cpu_fraction": Value::Null,
                    "runnable_fraction": Value::Null,
                    "io_wait_fraction": Value::Null,
                    "sleep_fraction": Value::Null,
                    "gpu_wait_fraction": Value::Null,
                    "own_io_fraction": Value::Null,
                    "data_wait_fraction": Value::Null,
                    "collective_wait_fraction": Value::Null,
                });
                crate::show::async_io::json_fields(p, &mut v);
                v
            })
            .zip(&self.processes)
            .map(|(mut v, p)| {
                // Scheduling shares over its threads' time together; null
                // when the log has none (never a guess).
                if let (true, Some(t)) = (has_sched, self.sched.procs.get(&p.pid)) {
                    v["cpu_fraction"] = t.fraction(t.cpu).into();
                    v["runnable_fraction"] = t.fraction(t.runnable).into();
                    v["io_wait_fraction"] = t.fraction(t.io_wait).into();
                    v["sleep_fraction"] = t.fraction(t.sleep).into();
                    // Time in calls over its threads' time (a call can
                    // begin before the first scheduling record: at most 1).
                    v["gpu_wait_fraction"] = t.fraction(p.gpu_wait_ns).map(|f| f.min(1.0)).into();
                    v["own_io_fraction"] = t.fraction(p.own_io_ns).map(|f| f.min(1.0)).into();
                    // Its main thread's, as the breakdown's share.
                    v["collective_wait_fraction"] = self.collective_wait_fraction(p).into();
                    if self.sched.gil_seen {
                        v["gil_wait_fraction"] = self.gil_wait_fraction(p).into();
                    }
                    v["threads"] = self.thread_rows(p, threads_of.get(&p.pid).map_or(&[], |v| v.as_slice()));
                }
                if let Some(h) = self.header.hosts.get(mltrace_log::host_of(p.pid)) {
                    v["host"] = h.name.clone().into();
                    v["host_pid"] = mltrace_log::local_pid(p.pid).into();
                }
                // Every process that waits on workers (the trainer, or each
                // rank under torchrun); null for the others.
                if p.pid == self.trainer || feeders.contains(&p.pid) {
                    v["data_wait_fraction"] = self.data_wait_fraction(p).into();
                }
                v
            })
            .collect();
        let disks: Vec<Value> = self
            .disks
            .iter()
            .map(|d| {
                let mut v = block(&d.block);
                v["name"] = d.name.clone().into();
                v["dev"] = format!("{}:{}", d.dev >> 20, d.dev & 0xfffff).into();
                v
            })
            .collect();
        let mut warnings: Vec<String> = self.diagnostics.clone();
        warnings.extend(self.kernel_warnings());
        warnings.extend(self.split_warnings());
        let ranks = self.ranks();
        let mut rest = json!({
            "command": self.header.command,
            "attach": self.header.attach.as_ref().map(|a| json!({
                "pids": a.pids,
                "all": a.all,
                "comm": a.comm,
                "cgroup": a.cgroup,
                "path": a.path,
                "duration_ns": a.duration_ns,
            })),
            "host": self.header.host,
            "kernel": self.header.kernel,
            "records": self.records,
            "log_format": format!("{}.{}", self.format.0, self.format.1),
            "detail": if self.header.is_summary() { "summary" } else { "full" },
            "slow_ns": self.slow_ns(),
            "time_resolution_ns": self.time_resolution_ns(),
            "duration_ns": self.span().map(|(a, b)| b - a),
            "exit_status": self.trailer.as_ref().and_then(|t| t.exit_status),
            "complete": self.trailer.is_some(),
            "processes": processes,
            "files": Value::Null,
            "disks": disks,
            "network": self.network.iter().map(|n| {
                let mut v = n.to_json();
                v["host"] = self.header.hosts.get(n.host).map_or(Value::Null, |h| h.name.clone().into());
                v
            }).collect::<Vec<_>>(),
            "ranks": ranks.iter().map(|r| self.rank_json(r)).collect::<Vec<_>>(),
            "clock_check": self.clock_check_json(&ranks),
            "checkpoints": self.checkpoints.iter().map(|c| {
                let t0 = self.first_ts.unwrap_or(c.start);
                json!({
                    "path": c.path,
                    "pid": c.pid,
                    "start_s": c.start.saturating_sub(t0) as f64 / 1e9,
                    "duration_s": c.end.saturating_sub(c.start) as f64 / 1e9,
                    "bytes": c.bytes,
                    "files": c.files,
                })
            }).collect::<Vec<_>>(),
            "hosts": self.hosts_json(),
            "lost": self.total_lost(),
            "switch_ins_untraced": self.sched.switch_ins_untraced,
            "untraced": self.untraced.iter().map(|(pid, ts, text)| json!({
                "pid": mltrace_log::local_pid(*pid),
                "ts": ts,
                "text": text,
            })).collect::<Vec<_>>(),
            "lost_by_kind": self.lost.iter().map(|(k, n)| (k.name().to_string(), Value::from(*n))).collect::<serde_json::Map<_, _>>(),
            "gpu_events": self.gpu_events.iter().map(|(g, k, n)| json!({"gpu": g, "kind": k.name(), "count": n})).collect::<Vec<_>>(),
            "warnings": warnings,
            "uring_opcodes": self.trailer.as_ref().map(|t| {
                t.uring_ops.iter().map(|o| (o.name.clone(), Value::from(o.count))).collect::<serde_json::Map<_, _>>()
            }),
            "verdict": self.verdict_with(&ranks).to_json(),
        });
        if let Value::Object(m) = &mut rest {
            self.tables.json(m);
            self.python_json(m);
        }
        Whole { rest, files: self.files() }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;

    use mltrace_log::*;

    use crate::Stats;

    fn io(pid: u32, op: IoOp, ret: i64, e: &mut FrameEncoder) -> Record {
        Record::Io(Io {
            ts: 10,
            dur: 1000,
            pid,
            tid: pid,
            op,
            fd: 3,
            path: e.intern(b"/data/a.bin"),
            kind: FileKind::Regular,
            requested: 4096,
            ret,
            ..Default::default()
        })
    }

    fn acct(pid: u32, at: AcctPoint, syscr: u64, rchar: u64) -> Record {
        Record::IoAccounting(IoAccounting {
            ts: 20,
            pid,
            tid: pid,
            at,
            have: acct::CHARS | acct::BYTES,
            rchar,
            syscr,
            read_bytes: 8192,
            ..Default::default()
        })
    }

    #[test]
    fn names_values_and_nulls() {
        let header = Header { root_pid: 10, command: vec!["train".into()], ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        w.push(&Record::Fork(Fork { ts: 1, pid: 10, tid: 10, parent_pid: 1, parent_tid: 1, thread: false })).unwrap();
        w.push(&Record::Fork(Fork { ts: 2, pid: 11, tid: 11, parent_pid: 10, parent_tid: 10, thread: false })).unwrap();
        // 10: exec'd (baseline 5 calls, 100 bytes), then two reads; 11: one read, counted wrong.
        w.push(&acct(10, AcctPoint::Exec, 5, 100)).unwrap();
        w.push_with(|e| io(10, IoOp::Read, 4096, e)).unwrap();
        w.push_with(|e| io(10, IoOp::Pread64, 100, e)).unwrap();
        w.push_with(|e| io(10, IoOp::Write, -9, e)).unwrap();
        w.push_with(|e| io(11, IoOp::Read, 7, e)).unwrap();
        w.push(&acct(10, AcctPoint::Exit, 7, 4296)).unwrap();
        w.push(&Record::Exit(Exit { ts: 30, pid: 10, tid: 10, status: 0, process_exit: true })).unwrap();
        w.push(&acct(11, AcctPoint::Exit, 2, 7)).unwrap();
        w.push(&Record::Exit(Exit { ts: 31, pid: 11, tid: 11, status: 0, process_exit: true })).unwrap();
        let log = w.finish(&Trailer { exit_status: Some(0), ..Default::default() }).unwrap();
        let s = Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap();
        let j = s.to_json();
        let p = &j["processes"];
        assert_eq!(p.as_array().unwrap().len(), 2);
        assert_eq!((p[0]["pid"].as_u64(), p[0]["parent"].as_u64()), (Some(10), Some(1)));
        assert_eq!(p[0]["name"], "train");
        assert_eq!((p[0]["reads"].as_u64(), p[0]["read_bytes"].as_u64()), (Some(2), Some(4196)));
        assert_eq!((p[0]["writes"].as_u64(), p[0]["write_bytes"].as_u64()), (Some(1), Some(0)));
        for k in ["storage_read_bytes", "page_cache", "mapped_bytes", "major_faults"] {
            assert!(p[0][k].is_null(), "{k}: not in this log: null, never 0");
            assert!(j["files"][0][k].is_null(), "{k}");
        }
        let k = &p[0]["kernel"];
        assert_eq!(
            (k["syscr"].as_u64(), k["rchar"].as_u64(), k["read_bytes"].as_u64()),
            (Some(2), Some(4196), Some(0))
        );
        assert_eq!((k["wchar"].as_u64(), k["syscw"].as_u64(), k["write_bytes"].as_u64()), (Some(0), Some(0), Some(0)));
        assert_eq!((k["since"].as_str(), k["check"].as_str()), (Some("exec"), Some("match")));
        let k = &p[1]["kernel"];
        assert_eq!((k["since"].as_str(), k["check"].as_str()), (Some("fork"), Some("mismatch")));
        assert_eq!(k["differences"][0], "syscr: kernel 2, traced 1");
        assert_eq!(j["warnings"].as_array().unwrap().len(), 1);
        assert_eq!(j["files"][0]["path"], "/data/a.bin");
        assert_eq!((j["files"][0]["reads"].as_u64(), j["files"][0]["read_bytes"].as_u64()), (Some(3), Some(4203)));
        // What the CLI writes (files streamed) is the same document.
        let mut out = Vec::new();
        s.write_json(&mut out).unwrap();
        assert_eq!(serde_json::from_slice::<serde_json::Value>(&out).unwrap(), j);
        assert_eq!(j["lost"].as_u64(), Some(0));
        assert_eq!(j["disks"].as_array().unwrap().len(), 0);
    }

    /// io_uring and libaio bytes have fields of their own and totals; the
    /// kernel does not count them, so the exact check still matches.
    #[test]
    fn uring_and_aio_apart_from_calls() {
        let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
        w.push(&acct(10, AcctPoint::Exec, 0, 0)).unwrap();
        w.push_with(|e| io(10, IoOp::Read, 100, e)).unwrap();
        for (op, ret) in [(UringOp::Read, 65536), (UringOp::Readv, 4096), (UringOp::Write, 7), (UringOp::Read, -125)] {
            w.push_with(|e| {
                Record::IoUring(IoUring {
                    ts: 11,
                    dur: 5000,
                    pid: 10,
                    tid: 10,
                    op,
                    fd: 3,
                    path: e.intern(b"/data/a.bin"),
                    kind: FileKind::Regular,
                    ret,
                    ..Default::default()
                })
            })
            .unwrap();
        }
        for (op, ret, rd, wr) in [(AioOp::Submit, 2, 8192, 100), (AioOp::Getevents, 2, 8000, 100)] {
            w.push_with(|e| {
                Record::Aio(Aio {
                    ts: 12,
                    pid: 10,
                    tid: 10,
                    op,
                    fd: 3,
                    path: e.intern(b"/data/a.bin"),
                    kind: FileKind::Regular,
                    ret,
                    read_bytes: rd,
                    write_bytes: wr,
                    errors: 1,
                    ..Default::default()
                })
            })
            .unwrap();
        }
        w.push(&acct(10, AcctPoint::Exit, 1, 100)).unwrap();
        w.push(&Record::Exit(Exit { ts: 30, pid: 10, tid: 10, status: 0, process_exit: true })).unwrap();
        let log = w.finish(&Trailer::default()).unwrap();
        let s = Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap();
        let j = s.to_json();
        let p = &j["processes"][0];
        let n = |k: &str| p[k].as_u64().unwrap_or_else(|| panic!("{k}: {}", p[k]));
        assert_eq!((n("reads"), n("read_bytes")), (1, 100), "calls alone");
        assert_eq!((n("uring_reads"), n("uring_read_bytes"), n("uring_errors")), (3, 69632, 1));
        assert_eq!((n("uring_writes"), n("uring_write_bytes")), (1, 7));
        assert_eq!((n("aio_submits"), n("aio_iocbs"), n("aio_requested_read_bytes")), (1, 2, 8192));
        assert_eq!((n("aio_getevents"), n("aio_events"), n("aio_read_bytes"), n("aio_failed_events")), (1, 2, 8000, 1));
        assert_eq!((n("total_read_bytes"), n("total_write_bytes")), (100 + 69632 + 8000, 7 + 100));
        assert_eq!(p["kernel"]["check"], "match");
        let f = &j["files"][0];
        assert_eq!(
            (f["reads"].as_u64(), f["uring_reads"].as_u64(), f["total_read_bytes"].as_u64()),
            (Some(1), Some(3), Some(69732))
        );
        let text = s.render(5);
        assert!(text.contains("io_uring requests") && text.contains("68.0 KiB"), "{text}");
    }

    fn probe(subsystem: &str) -> Probe {
        Probe { subsystem: subsystem.into(), ..Default::default() }
    }

    /// A process maps a 256 MiB file, forks a worker that faults it in,
    /// unmaps half and maps a library and anonymous memory.
    #[test]
    fn mappings_faults_and_storage_through_them() {
        const A: u64 = 0x7f00_0000_0000;
        const MIB: u64 = 1 << 20;
        let probes = vec![probe("page cache"), probe("mappings"), probe("major faults")];
        let header = Header { root_pid: 10, probes, ..Default::default() };
        let mut w = RecordWriter::new(Vec::new(), &header).unwrap();
        let map = |e: &mut FrameEncoder, pid: u32, path: &[u8], len: u64, prot: u32, flags: u32, ret: i64| {
            Record::Mapping(Mapping {
                ts: 5,
                pid,
                tid: pid,
                op: MapOp::Mmap,
                fd: 3,
                path: e.intern(path),
                kind: FileKind::Regular,
                dev: 1 << 20,
                ino: if path == b"/d/x.arrow" { 7 } else { 8 },
                len,
                prot,
                flags,
                ret,
                ..Default::default()
            })
        };
        w.push(&Record::Fork(Fork { ts: 1, pid: 10, tid: 10, parent_pid: 1, parent_tid: 1, thread: false })).unwrap();
        w.push_with(|e| map(e, 10, b"/d/x.arrow", 256 * MIB, 1, 1, A as i64)).unwrap();
        w.push_with(|e| map(e, 10, b"/lib/libc.so.6", 2 * MIB, 5, 0x812, (A - 4 * MIB) as i64)).unwrap();
        w.push_with(|e| map(e, 10, b"/d/x.arrow", MIB, 1, 1, -12)).unwrap();
        w.push(&Record::Fork(Fork { ts: 6, pid: 11, tid: 11, parent_pid: 10, parent_tid: 10, thread: false })).unwrap();
        for k in 0..4u64 {
            let addr = A + k * 64 * MIB;
            w.push(&Record::MajorFault(MajorFault { ts: 7, pid: 11, tid: 11, addr, ..Default::default() })).unwrap();
            w.push_with(|e| {
                Record::PageCache(PageCache {
                    ts: 7,
                    pid: 11,
                    tid: 11,
                    dev: 1 << 20,
                    ino: 7,
                    path: e.intern(b"/d/x.arrow"),
                    offset: k * 64 * MIB,
                    bytes: 2 * MIB,
                    during: CacheDuring::Fault,
                })
            })
            .unwrap();
        }
        // Not through a mapping: the parent reads it, and a fault on the library.
        w.push_with(|e| {
            Record::PageCache(PageCache {
                ts: 8,
                pid: 10,
                tid: 10,
                dev: 1 << 20,
                ino: 9,
                path: e.intern(b"/d/other"),
                bytes: MIB,
                during: CacheDuring::Fault,
                ..Default::default()
            })
        })
        .unwrap();
        w.push(&Record::MajorFault(MajorFault { ts: 9, pid: 10, tid: 10, addr: A - 3 * MIB, ..Default::default() }))
            .unwrap();
        let unmap =
            Mapping { ts: 9, pid: 11, tid: 11, op: MapOp::Munmap, addr: A, len: 128 * MIB, ..Default::default() };
        w.push(&Record::Mapping(unmap)).unwrap();
        let anon =
            Mapping { ts: 10, pid: 11, tid: 11, op: MapOp::Anonymous, len: 3 * MIB, ret: 40, ..Default::default() };
        w.push(&Record::Mapping(anon)).unwrap();
        let log = w.finish(&Trailer::default()).unwrap();
        let s = Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap();
        let j = s.to_json();
        let (main, worker) = (&j["processes"][0], &j["processes"][1]);
        assert_eq!(main["mapped_bytes"].as_u64(), Some(256 * MIB));
        assert_eq!(main["mappings"]["code"]["calls"].as_u64(), Some(1));
        assert_eq!(main["mappings"]["failed"].as_u64(), Some(1));
        assert_eq!((main["major_faults"].as_u64(), main["major_faults_other"].as_u64()), (Some(0), Some(1)));
        assert_eq!(main["mapped_storage_read_bytes"].as_u64(), Some(0));
        assert_eq!(worker["mapped_bytes"].as_u64(), Some(0), "inherited, not mapped by it");
        assert_eq!(worker["mappings"]["inherited_bytes"].as_u64(), Some(256 * MIB));
        assert_eq!(worker["major_faults"].as_u64(), Some(4));
        assert_eq!(worker["mapped_storage_read_bytes"].as_u64(), Some(8 * MIB));
        assert_eq!(worker["mappings"]["munmaps"].as_u64(), Some(1));
        assert_eq!(worker["mappings"]["anonymous"]["calls"].as_u64(), Some(40));
        assert_eq!(worker["mappings"]["anonymous"]["bytes"].as_u64(), Some(3 * MIB));
        let file = |p: &str| j["files"].as_array().unwrap().iter().find(|f| f["path"] == p).unwrap().clone();
        let x = file("/d/x.arrow");
        assert_eq!((x["mapped_bytes"].as_u64(), x["mmaps"].as_u64()), (Some(256 * MIB), Some(1)));
        assert_eq!((x["major_faults"].as_u64(), x["mapped_storage_read_bytes"].as_u64()), (Some(4), Some(8 * MIB)));
        assert_eq!(file("/d/other")["mapped_storage_read_bytes"].as_u64(), Some(0));
        assert!(!j["files"].as_array().unwrap().iter().any(|f| f["path"] == "/lib/libc.so.6"), "a library is not data");
        let text = s.render(10);
        assert!(text.contains("top 1 mapped files") && text.contains("1 (2.0 MiB)"), "{text}");
    }

    #[test]
    fn a_log_without_counters_has_null_kernel() {
        let mut w = RecordWriter::new(Vec::new(), &Header::default()).unwrap();
        w.push_with(|e| io(4, IoOp::Read, 1, e)).unwrap();
        w.push(&Record::Lost(Lost { ts: 5, kind: LostKind::RingFull, count: 3 })).unwrap();
        let log = w.finish(&Trailer::default()).unwrap();
        let s = Stats::from_reader(&mut LogReader::new(Path::new("t"), Cursor::new(log)).unwrap()).unwrap();
        let j = s.to_json();
        assert!(j["processes"][0]["kernel"].is_null());
        assert!(j["processes"][0]["parent"].is_null());
        assert_eq!(j["lost"].as_u64(), Some(3));
        assert_eq!(j["lost_by_kind"]["ring buffer full"].as_u64(), Some(3));
    }
}
