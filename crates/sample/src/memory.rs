//! Memory from /proc/meminfo (as `free` reads it) and stall pressure from
//! /proc/pressure (PSI), where the kernel has it.

use std::sync::Arc;

use mltrace_log::CounterUnit;

use crate::{Sample, SampleSink};

/// kB fields of /proc/meminfo we use, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemInfo {
    pub total: u64,
    pub free: u64,
    pub buffers: u64,
    pub cached: u64,
    pub sreclaimable: u64,
    pub dirty: u64,
    pub writeback: u64,
}

pub fn parse_meminfo(text: &str) -> MemInfo {
    let mut m = MemInfo::default();
    for l in text.lines() {
        let mut f = l.split_whitespace();
        let (Some(k), Some(v)) = (f.next(), f.next()) else { continue };
        let v = v.parse::<u64>().unwrap_or(0) * 1024;
        match k {
            "MemTotal:" => m.total = v,
            "MemFree:" => m.free = v,
            "Buffers:" => m.buffers = v,
            "Cached:" => m.cached = v,
            "SReclaimable:" => m.sreclaimable = v,
            "Dirty:" => m.dirty = v,
            "Writeback:" => m.writeback = v,
            _ => {}
        }
    }
    m
}

impl MemInfo {
    /// `free`'s "used": what is neither free nor reclaimable cache.
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free + self.buffers + self.cached + self.sreclaimable)
    }
}

/// `total=` of the `some` line: microseconds some task was stalled.
pub fn parse_pressure_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace().find_map(|kv| kv.strip_prefix("total=")).and_then(|v| v.parse().ok())
}

pub struct MemorySampler {
    group: Arc<str>,
    names: [Arc<str>; 7],
    pressure: Vec<(&'static str, Option<(u64, u64)>)>,
}

impl MemorySampler {
    pub fn new() -> Self {
        MemorySampler {
            group: Arc::from("Memory"),
            names: ["used", "page cache", "dirty", "writeback", "cpu pressure", "memory pressure", "io pressure"]
                .map(Arc::from),
            pressure: vec![("cpu", None), ("memory", None), ("io", None)],
        }
    }

    pub fn sample(&mut self, ts: u64, out: &mut SampleSink) {
        if let Ok(text) = crate::read_text("/proc/meminfo") {
            let m = parse_meminfo(&text);
            for (i, v) in [m.used(), m.cached, m.dirty, m.writeback].into_iter().enumerate() {
                out.push(Sample {
                    ts,
                    group: self.group.clone(),
                    name: self.names[i].clone(),
                    unit: CounterUnit::Bytes,
                    pid: 0,
                    value: v as f64,
                });
            }
        }
        // Share of the interval in which some task was stalled on the resource.
        for (i, (res, prev)) in self.pressure.iter_mut().enumerate() {
            let Some(total) =
                crate::read_text(format!("/proc/pressure/{res}")).ok().and_then(|t| parse_pressure_total(&t))
            else {
                continue;
            };
            if let Some((t0, us0)) = *prev {
                let dt_us = ts.saturating_sub(t0) as f64 / 1000.0;
                if dt_us > 0.0 {
                    out.push(Sample {
                        ts,
                        group: self.group.clone(),
                        name: self.names[4 + i].clone(),
                        unit: CounterUnit::Percent,
                        pid: 0,
                        value: (total.saturating_sub(us0) as f64 * 100.0 / dt_us).min(100.0),
                    });
                }
            }
            *prev = Some((ts, total));
        }
    }
}

impl Default for MemorySampler {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_and_pressure() {
        let m = parse_meminfo(
            "MemTotal:       1000 kB\nMemFree:         100 kB\nBuffers:          50 kB\nCached:          300 kB\nSReclaimable:     50 kB\nDirty:            7 kB\nWriteback:        1 kB\n",
        );
        assert_eq!(m.used(), 500 * 1024);
        assert_eq!((m.dirty, m.writeback), (7 * 1024, 1024));
        let p =
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=99\n";
        assert_eq!(parse_pressure_total(p), Some(123456));
        assert_eq!(parse_pressure_total("garbage"), None);
    }
}
