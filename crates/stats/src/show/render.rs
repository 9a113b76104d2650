//! Rendering the tables as text (`mltrace stats`).

use crate::*;

impl Stats {
    /// Checkpoints: big files (or directories of shards) written in one burst.
    fn render_checkpoints(&self, o: &mut String, top: usize) {
        if self.checkpoints.is_empty() {
            return;
        }
        let _ = writeln!(o, "\ncheckpoints (64 MiB or more written in one burst):");
        let t0 = self.first_ts.unwrap_or(0);
        let mut rows = vec![["start", "duration", "size", "MB/s", "pid", "path"].map(String::from).to_vec()];
        for c in self.checkpoints.iter().take(top) {
            rows.push(vec![
                format!("+{}", duration(c.start.saturating_sub(t0))),
                duration(c.end.saturating_sub(c.start)),
                bytes(c.bytes),
                format!("{:.0}", c.mb_per_s()),
                c.pid.to_string(),
                c.path.clone(),
            ]);
        }
        o.push_str(&table(&rows));
        if self.checkpoints.len() > top {
            let _ = writeln!(o, "  ({} more)", self.checkpoints.len() - top);
        }
    }

    /// Traffic per interface and RDMA port (idle ones counted, not listed).
    fn render_network(&self, o: &mut String) {
        let busy: Vec<_> = self.network.iter().filter(|n| !n.idle()).collect();
        if self.network.is_empty() {
            return;
        }
        let idle = self.network.len() - busy.len();
        if busy.is_empty() {
            let _ = writeln!(o, "\nnetwork, whole machine: no traffic on the {idle} interfaces sampled");
            return;
        }
        let _ = writeln!(
            o,
            "\nnetwork, whole machine, not only the traced processes (from the sampled counters{}):",
            if idle > 0 { format!("; {idle} idle interfaces not listed") } else { String::new() }
        );
        let mut rows = vec![["interface", "received", "sent", "rx packets", "tx packets", "rx peak/s", "tx peak/s"]
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()];
        for n in busy {
            let label = if n.kind() == "infiniband" { format!("{} (InfiniBand)", n.label()) } else { n.label().into() };
            let label = match self.header.hosts.get(n.host) {
                Some(h) => format!("{}:{label}", h.name),
                None => label,
            };
            rows.push(vec![
                label,
                bytes(n.totals[0] as u64),
                bytes(n.totals[1] as u64),
                format!("{:.0}", n.totals[2]),
                format!("{:.0}", n.totals[3]),
                bytes(n.peaks[0] as u64),
                bytes(n.peaks[1] as u64),
            ]);
        }
        if rows.len() > 1 {
            o.push_str(&table(&rows));
        }
    }
}

pub(crate) fn q(h: &Histogram, q: f64) -> String {
    h.quantile(q).map(duration).unwrap_or_else(|| "-".into())
}

/// "kernel / traced", the traced side a range when failed calls may or may not count.
fn versus(kernel: u64, min: u64, max: u64) -> String {
    if min == max {
        format!("{kernel} / {min}")
    } else {
        format!("{kernel} / {min}-{max}")
    }
}

fn versus_bytes(kernel: u64, traced: u64) -> String {
    if kernel == traced {
        bytes(kernel)
    } else {
        format!("{} / {}", bytes(kernel), bytes(traced))
    }
}

impl Stats {
    fn render_page_cache(&self, o: &mut String, top: usize) {
        if !self.has_page_cache() {
            return;
        }
        let _ = writeln!(
            o,
            "\nbytes from storage (pages brought into the page cache; hit = share of the bytes read by calls \
             that the cache already held):"
        );
        let head = |first: &str| {
            [first, "read by calls", "from storage", "during reads", "hit", "faults/other", "filled by writes"]
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
        };
        let row = |label: String, read: u64, c: &CacheFill| {
            vec![
                label,
                bytes(read),
                bytes(c.storage_read_bytes()),
                bytes(c.during_reads),
                pct_or_dash(c.hit_ratio(read)),
                bytes(c.faults + c.other),
                bytes(c.writes + c.transfers),
            ]
        };
        let mut rows = vec![head("process")];
        for p in &self.processes {
            rows.push(row(format!("{} [{}]", p.label(), p.pid), p.reads.bytes, &p.cache));
        }
        o.push_str(&table(&rows));
        let files = self.top_storage_files(top);
        if !files.is_empty() {
            let _ = writeln!(o, "\ntop {} files by bytes from storage:", files.len());
            let mut rows = vec![head("file")];
            for (path, f) in files {
                rows.push(row(shorten(path, 60), f.read_bytes, &f.cache));
            }
            o.push_str(&table(&rows));
        }
    }

    fn render_kernel(&self, o: &mut String) {
        let checks: Vec<_> = self.kernel_checks().collect();
        if checks.is_empty() {
            return;
        }
        let _ = writeln!(
            o,
            "\nkernel's own I/O accounting against the trace (kernel / traced; per process, from its exec or fork, \
             reaped children not included):"
        );
        let mut rows = vec![[
            "process",
            "pid",
            "read calls",
            "read",
            "write calls",
            "written",
            "from storage",
            "dirtied",
            "check",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        for (p, k, c) in checks {
            let (c_, t) = (&k.counts, &p.traced_io);
            let chars = k.have & acct::CHARS != 0;
            let na = || "-".to_string();
            let by = k.have & acct::BYTES != 0;
            rows.push(vec![
                p.label().to_string(),
                p.pid.to_string(),
                if chars { versus(c_.syscr, t.syscr_min, t.syscr_max) } else { na() },
                if chars { versus_bytes(c_.rchar, t.rchar) } else { na() },
                if chars { versus(c_.syscw, t.syscw_min, t.syscw_max) } else { na() },
                if chars { versus_bytes(c_.wchar, t.wchar) } else { na() },
                if by { bytes(c_.read_bytes) } else { na() },
                if by { bytes(c_.write_bytes) } else { na() },
                c.label().to_string(),
            ]);
        }
        o.push_str(&table(&rows));
    }
}

fn block_header(first: &str) -> Vec<String> {
    [first, "requests", "read", "written", "other", "errors", "p50", "p99", "max", "device p50"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn block_row(label: String, b: &BlockStats) -> Vec<String> {
    vec![
        label,
        b.requests.to_string(),
        bytes(b.read_bytes),
        bytes(b.write_bytes),
        b.other.to_string(),
        b.errors.to_string(),
        q(&b.latency, 0.5),
        q(&b.latency, 0.99),
        duration(b.latency.max()),
        q(&b.device, 0.5),
    ]
}

/// Left-aligns the first column and right-aligns the others.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..cols).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in rows {
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            if c == 0 {
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str("  ");
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

impl Stats {
    /// What a summary recording holds, in a line (`None` for a full one).
    pub fn detail_line(&self) -> Option<String> {
        let slow = self.slow_ns()?;
        Some(format!(
            "summary: reads, writes, syncs and closes summed per thread, file and second in the kernel; \
             only those that took {} or more, or failed, recorded one by one",
            duration(slow)
        ))
    }

    /// The report `mltrace stats` prints.
    pub fn render(&self, top: usize) -> String {
        let mut o = String::new();
        let h = &self.header;
        let ranks = self.ranks();
        let verdict = self.verdict_with(&ranks);
        let _ = writeln!(o, "verdict:  {}", verdict.text);
        crate::show::verdict::render_suggestions(&verdict, &mut o);
        let _ = writeln!(o, "command:  {}", h.command.join(" "));
        if let Some(a) = &h.attach {
            let _ = writeln!(o, "attached: record {}", a.describe());
        }
        if h.is_merged() {
            let _ = writeln!(o, "hosts:    {} (merged; pids below are host:pid)", h.host_names().join(", "));
        } else if !h.host.is_empty() {
            let _ = writeln!(o, "host:     {} (kernel {}, {} CPUs)", h.host, h.kernel, h.cpu_count);
        }
        if let Some((a, b)) = self.span() {
            let _ = writeln!(o, "recorded: {}, starting {}", duration(b - a), describe_ts(h, a));
        }
        let status = match self.trailer.as_ref().and_then(|t| t.exit_status) {
            Some(s) if s & 0x7f == 0 => format!("exited with {}", (s >> 8) & 0xff),
            Some(s) => format!("killed by signal {}", s & 0x7f),
            None if self.trailer.is_none() => "unknown (the log was cut)".into(),
            None if h.attach.is_some() => "none (attached: mltrace did not start it)".into(),
            None => "unknown (recording stopped first)".into(),
        };
        let _ = writeln!(o, "status:   {status}");
        let lost = if self.lost.is_empty() {
            "0".to_string()
        } else {
            format!(
                "{} ({})",
                self.total_lost(),
                self.lost.iter().map(|(k, n)| format!("{n} {}", k.name())).collect::<Vec<_>>().join(", ")
            )
        };
        let untraced = match self.sched.switch_ins_untraced {
            0 => String::new(),
            n => format!("; the kernel's trace lacked {n} switch-ins (placed by the run time it gave)"),
        };
        let _ = writeln!(o, "events:   {} records, lost {lost}{untraced}", self.records);
        let _ = writeln!(
            o,
            "log:      format {}.{}{}",
            self.format.0,
            self.format.1,
            if h.mltrace_version.is_empty() {
                String::new()
            } else {
                format!(", written by mltrace {}", h.mltrace_version)
            }
        );
        if let Some(line) = self.detail_line() {
            let _ = writeln!(o, "detail:   {line}");
        }
        let grid = self.time_resolution_ns();
        if grid > 1 {
            let _ = writeln!(
                o,
                "times:    rounded to {} (record --time-resolution): a call shorter than that may show as 0",
                duration(grid)
            );
        }
        for d in &self.diagnostics {
            let _ = writeln!(o, "warning:  {d}");
        }
        // Not root: processes let go as they became another user or group.
        for (_, _, text) in &self.untraced {
            let _ = writeln!(o, "let go:   {text}");
        }
        for w in self.kernel_warnings().into_iter().chain(self.split_warnings()) {
            let _ = writeln!(o, "warning:  {w}");
        }
        o.push('\n');
        self.render_epochs(&verdict, &mut o);
        Stats::render_step_waits(&verdict, &mut o);
        self.render_python_lines(&mut o);

        let mut rows = vec![[
            "process",
            "pid",
            "reads",
            "read",
            "read p50",
            "read p99",
            "writes",
            "written",
            "write p50",
            "write p99",
            "opens",
            "failed",
            "files",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
        for p in &self.processes {
            rows.push(vec![
                p.label().to_string(),
                self.pid_label(p.pid),
                p.reads.count.to_string(),
                bytes(p.reads.bytes),
                q(&p.reads.latency, 0.5),
                q(&p.reads.latency, 0.99),
                p.writes.count.to_string(),
                bytes(p.writes.bytes),
                q(&p.writes.latency, 0.5),
                q(&p.writes.latency, 0.99),
                p.opens.count.to_string(),
                p.opens.errors.to_string(),
                p.files_touched().to_string(),
            ]);
        }
        o.push_str(&table(&rows));
        self.render_async(&mut o);
        self.render_page_cache(&mut o, top);
        self.render_maps(&mut o, top);
        self.render_kernel(&mut o);
        if !self.utilisation.is_empty() {
            // /proc/stat, /proc/meminfo and NVML count everyone's use.
            let _ = writeln!(o, "\nutilisation, whole machine, not only the traced processes (sampled):");
            let mut rows = vec![["counter", "mean", "max"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
            let rank = |g: &str| {
                if g == "CPU" {
                    0
                } else if g == "Memory" {
                    1
                } else {
                    2
                }
            };
            let mut u: Vec<_> = self.utilisation.iter().collect();
            u.sort_by_key(|((g, _, _), _)| rank(g));
            for ((g, n, unit), (sum, count, max)) in u {
                rows.push(vec![format!("{g} {n}"), value(sum / *count as f64, *unit), value(*max, *unit)]);
            }
            o.push_str(&table(&rows));
        }
        if !self.gpu_events.is_empty() {
            let _ = writeln!(o, "\nGPU events:");
            let mut rows = vec![["gpu", "event", "count"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
            for (g, k, n) in &self.gpu_events {
                rows.push(vec![g.clone(), k.name().to_string(), n.to_string()]);
            }
            o.push_str(&table(&rows));
        }
        if !self.disks.is_empty() {
            let _ = writeln!(o, "\nblock I/O by disk, whole machine (latency = queue + device):");
            let mut rows = vec![block_header("disk")];
            for d in &self.disks {
                let label = format!("{} ({}:{})", d.name, d.dev >> 20, d.dev & 0xfffff);
                rows.push(block_row(label, &d.block));
            }
            o.push_str(&table(&rows));
            let _ = writeln!(o, "\nblock I/O by who started it:");
            let mut rows = vec![block_header("process")];
            for p in self.processes.iter().filter(|p| p.block.requests > 0) {
                rows.push(block_row(format!("{} [{}]", p.label(), p.pid), &p.block));
            }
            for (who, b) in &self.block_others {
                rows.push(block_row(format!("{who} (not traced)"), b));
            }
            o.push_str(&table(&rows));
        }
        self.render_checkpoints(&mut o, top);
        self.render_ranks(&ranks, &mut o);
        let who = |pid| match self.processes.iter().rfind(|p| p.pid == pid) {
            Some(p) => format!("{} [{pid}]", p.label()),
            None => format!("[{pid}]"),
        };
        self.tables.render(&mut o, top, &who);
        self.render_network(&mut o);
        self.render_hosts(&mut o);
        let files = self.top_files(top);
        if !files.is_empty() {
            let uring = files.iter().any(|(_, f)| f.uring_reads + f.uring_writes > 0);
            let by = if uring { " (calls and io_uring requests)" } else { "" };
            let _ = writeln!(o, "\ntop {} files by bytes{by}:", files.len());
            let mut rows =
                vec![["file", "read", "reads", "written", "writes", "opens"].iter().map(|s| s.to_string()).collect()];
            for (path, f) in files {
                rows.push(vec![
                    shorten(path, 60),
                    bytes(f.total_read_bytes()),
                    (f.reads + f.uring_reads).to_string(),
                    bytes(f.total_write_bytes()),
                    (f.writes + f.uring_writes).to_string(),
                    f.opens.to_string(),
                ]);
            }
            o.push_str(&table(&rows));
        }
        o
    }
}
