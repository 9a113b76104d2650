//! Per-disk throughput, IOPS and utilisation from /proc/diskstats, for
//! whole disks (partitions add nothing the disk does not show).

use std::collections::HashMap;
use std::sync::Arc;

use mltrace_log::CounterUnit;

use crate::{Sample, SampleSink};

/// Fields of one /proc/diskstats line that the rates need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskLine {
    pub reads: u64,
    pub read_sectors: u64,
    pub writes: u64,
    pub write_sectors: u64,
    /// Milliseconds the device had requests in flight.
    pub io_ticks: u64,
}

pub fn parse_line(l: &str) -> Option<(u32, u32, &str, DiskLine)> {
    let f: Vec<&str> = l.split_whitespace().collect();
    if f.len() < 14 {
        return None;
    }
    let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
    Some((
        f[0].parse().ok()?,
        f[1].parse().ok()?,
        f[2],
        DiskLine { reads: n(3), read_sectors: n(5), writes: n(7), write_sectors: n(9), io_ticks: n(12) },
    ))
}

/// A whole disk, not a partition, and not an unused loop or ram device.
fn is_disk(name: &str) -> bool {
    std::path::Path::new("/sys/block").join(name).exists()
}

pub const NAMES: [&str; 5] = ["read", "write", "read IOPS", "write IOPS", "utilisation"];

pub struct DiskSampler {
    prev: HashMap<(u32, u32), (u64, DiskLine)>,
    /// Each device's name and whether it is a whole disk ([`is_disk`]: a
    /// path lookup in sysfs, once a device rather than every round).
    kinds: HashMap<(u32, u32), (String, bool)>,
    groups: HashMap<(u32, u32), Arc<str>>,
    names: [Arc<str>; 5],
}

impl DiskSampler {
    pub fn new() -> Self {
        DiskSampler { prev: HashMap::new(), kinds: HashMap::new(), groups: HashMap::new(), names: NAMES.map(Arc::from) }
    }

    pub fn sample(&mut self, ts: u64, out: &mut SampleSink) {
        let Ok(text) = crate::read_text("/proc/diskstats") else { return };
        for l in text.lines() {
            let Some((maj, min, name, now)) = parse_line(l) else { continue };
            let key = (maj, min);
            let disk = match self.kinds.get(&key) {
                Some((was, disk)) if was == name => *disk,
                _ => {
                    let disk = is_disk(name);
                    self.kinds.insert(key, (name.to_string(), disk));
                    disk
                }
            };
            if !disk {
                continue;
            }
            if let Some((t0, was)) = self.prev.get(&key) {
                let dt = ts.saturating_sub(*t0) as f64 / 1e9;
                // Idle loop and ram devices would only add flat lines.
                let idle_virtual =
                    (name.starts_with("loop") || name.starts_with("ram") || name.starts_with("zram")) && now == *was;
                if dt > 0.0 && !idle_virtual {
                    // Named like the block I/O export's disk groups, so both land together.
                    let group = self
                        .groups
                        .entry(key)
                        .or_insert_with(|| Arc::from(format!("Disk {name} ({maj}:{min})")))
                        .clone();
                    let d = |a: u64, b: u64| b.saturating_sub(a) as f64;
                    let vals = [
                        (d(was.read_sectors, now.read_sectors) * 512.0 / dt, CounterUnit::BytesPerSec),
                        (d(was.write_sectors, now.write_sectors) * 512.0 / dt, CounterUnit::BytesPerSec),
                        (d(was.reads, now.reads) / dt, CounterUnit::PerSec),
                        (d(was.writes, now.writes) / dt, CounterUnit::PerSec),
                        ((d(was.io_ticks, now.io_ticks) / 10.0 / dt).min(100.0), CounterUnit::Percent),
                    ];
                    for (i, (v, unit)) in vals.into_iter().enumerate() {
                        out.push(Sample {
                            ts,
                            group: group.clone(),
                            name: self.names[i].clone(),
                            unit,
                            pid: 0,
                            value: v,
                        });
                    }
                }
            }
            self.prev.insert(key, (ts, now));
        }
    }
}

impl Default for DiskSampler {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_line() {
        let (maj, min, name, d) =
            parse_line(" 254       0 vda 3507 1043 382342 1186 4109 3393 143824 6218 0 5548 8149 12 0 4608 3").unwrap();
        assert_eq!((maj, min, name), (254, 0, "vda"));
        assert_eq!(
            d,
            DiskLine { reads: 3507, read_sectors: 382342, writes: 4109, write_sectors: 143824, io_ticks: 5548 }
        );
        assert!(parse_line("short line").is_none());
    }
}
