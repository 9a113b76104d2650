//! The io_uring and libaio table, and their fields in `stats --json`.

impl crate::Stats {
    /// The io_uring and libaio table, for logs that have any.
    pub(crate) fn render_async(&self, o: &mut String) {
        use crate::bytes;
        use crate::show::render::{q, table};
        use std::fmt::Write as _;

        let procs: Vec<_> = self.processes.iter().filter(|p| p.uring.any() || p.aio.any()).collect();
        let ops = self.trailer.as_ref().map(|t| t.uring_ops.as_slice()).unwrap_or_default();
        if !ops.is_empty() {
            let list: Vec<String> = ops.iter().map(|o| format!("{} {}", o.name, o.count)).collect();
            let _ = writeln!(o, "\nio_uring submissions by opcode (reads and writes are drawn): {}", list.join(", "));
        }
        if procs.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\nio_uring requests (submission to completion) and libaio calls: not read/write calls, not in the \
             kernel's syscr/rchar; total = calls + io_uring + libaio events:"
        );
        let mut rows = vec![[
            "process",
            "pid",
            "uring reads",
            "read",
            "p50",
            "p99",
            "uring writes",
            "written",
            "p50",
            "p99",
            "io_submit",
            "iocbs",
            "aio read",
            "aio written",
            "total read",
            "total written",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        for p in procs {
            let (u, a) = (&p.uring, &p.aio);
            let lower = if a.lower_bound { "+" } else { "" };
            rows.push(vec![
                p.name.clone(),
                p.pid.to_string(),
                u.reads.count.to_string(),
                bytes(u.reads.bytes),
                q(&u.reads.latency, 0.5),
                q(&u.reads.latency, 0.99),
                u.writes.count.to_string(),
                bytes(u.writes.bytes),
                q(&u.writes.latency, 0.5),
                q(&u.writes.latency, 0.99),
                a.submits.to_string(),
                a.iocbs.to_string(),
                format!("{}{lower}", bytes(a.read_bytes)),
                format!("{}{lower}", bytes(a.write_bytes)),
                bytes(p.total_read_bytes()),
                bytes(p.total_write_bytes()),
            ]);
        }
        o.push_str(&table(&rows));
    }
}

/// A process's io_uring and libaio fields in `stats --json`.
pub(crate) fn json_fields(p: &crate::ProcStats, v: &mut serde_json::Value) {
    use serde_json::json;

    let q = |h: &crate::Histogram, q: f64| h.quantile(q);
    let more = json!({
        "uring_reads": p.uring.reads.count,
        "uring_read_bytes": p.uring.reads.bytes,
        "uring_writes": p.uring.writes.count,
        "uring_write_bytes": p.uring.writes.bytes,
        "uring_errors": p.uring.reads.errors + p.uring.writes.errors,
        "uring_read_p50_ns": q(&p.uring.reads.latency, 0.5),
        "uring_read_p99_ns": q(&p.uring.reads.latency, 0.99),
        "uring_write_p50_ns": q(&p.uring.writes.latency, 0.5),
        "uring_write_p99_ns": q(&p.uring.writes.latency, 0.99),
        "aio_submits": p.aio.submits,
        "aio_iocbs": p.aio.iocbs,
        "aio_submit_errors": p.aio.submit_errors,
        "aio_requested_read_bytes": p.aio.requested_read_bytes,
        "aio_requested_write_bytes": p.aio.requested_write_bytes,
        "aio_getevents": p.aio.getevents,
        "aio_events": p.aio.events,
        "aio_failed_events": p.aio.failed_events,
        "aio_read_bytes": p.aio.read_bytes,
        "aio_write_bytes": p.aio.write_bytes,
        "aio_bytes_lower_bound": p.aio.lower_bound,
        "total_read_bytes": p.total_read_bytes(),
        "total_write_bytes": p.total_write_bytes(),
    });
    if let (Some(v), serde_json::Value::Object(m)) = (v.as_object_mut(), more) {
        v.extend(m);
    }
}
