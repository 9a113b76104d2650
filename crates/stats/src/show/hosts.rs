//! A merged log's hosts: the table in `stats`, the list in `stats --json`.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::show::render::table;
use crate::{bytes, Stats};

impl Stats {
    pub(crate) fn render_hosts(&self, o: &mut String) {
        let totals = self.host_totals();
        if totals.is_empty() {
            return;
        }
        let _ = writeln!(o, "\nhosts ({}; clocks aligned through each log's REALTIME anchor):", totals.len());
        let mut rows = vec![[
            "host",
            "kernel",
            "clock offset",
            "processes",
            "reads",
            "read",
            "writes",
            "written",
            "net rx",
            "net tx",
            "lost",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        for (t, h) in totals.iter().zip(&self.header.hosts) {
            rows.push(vec![
                h.name.clone(),
                h.kernel.clone(),
                format!("{:+.3} ms", h.clock_offset_ns as f64 / 1e6),
                t.processes.to_string(),
                t.reads.to_string(),
                bytes(t.read_bytes),
                t.writes.to_string(),
                bytes(t.write_bytes),
                bytes(t.rx_bytes as u64),
                bytes(t.tx_bytes as u64),
                t.lost.to_string(),
            ]);
        }
        o.push_str(&table(&rows));
    }

    pub(crate) fn hosts_json(&self) -> Value {
        let totals = self.host_totals();
        Value::Array(
            totals
                .iter()
                .zip(&self.header.hosts)
                .enumerate()
                .map(|(i, (t, h))| {
                    json!({
                        "index": i,
                        "name": h.name,
                        "boot_id": h.boot_id,
                        "kernel": h.kernel,
                        "cpus": h.cpu_count,
                        "file": h.file,
                        "command": h.header.command,
                        "clock_offset_ns": h.clock_offset_ns,
                        "manual_offset_ns": h.manual_offset_ns,
                        "processes": t.processes,
                        "reads": t.reads,
                        "read_bytes": t.read_bytes,
                        "writes": t.writes,
                        "write_bytes": t.write_bytes,
                        "opens": t.opens,
                        "network_rx_bytes": t.rx_bytes.round() as u64,
                        "network_tx_bytes": t.tx_bytes.round() as u64,
                        "lost": t.lost,
                        "exit_status": h.trailer.as_ref().and_then(|t| t.exit_status),
                    })
                })
                .collect(),
        )
    }
}
