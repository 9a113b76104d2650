//! How far a log's times could shrink: each time column of the busiest
//! kinds coded against other predictions than the format's (the record
//! before, whoever's), each compressed on its own at zstd level 3, with an
//! order-0 entropy estimate beside it. `predictors LOG [FRAME_RECORDS]`:
//! predictions restart every FRAME_RECORDS records, as a frame's do.
//!
//! On `make bench`'s long run, the record before wins for every kind but
//! a call's start, which is better told from the same thread's last
//! switch-in or call end (see docs/performance.md).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use mltrace_log::*;

/// One candidate column: its varints and an entropy estimate's counts.
#[derive(Default)]
struct Column {
    bytes: Vec<u8>,
    /// (bit length, the 3 bits below the top one) -> values.
    buckets: HashMap<(u32, u64), u64>,
}

impl Column {
    fn push(&mut self, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let bits = 64 - z.leading_zeros();
        let top = if bits > 4 { (z >> (bits - 4)) & 7 } else { z };
        *self.buckets.entry((bits, top)).or_default() += 1;
        while z >= 0x80 {
            self.bytes.push(z as u8 | 0x80);
            z >>= 7;
        }
        self.bytes.push(z as u8);
    }

    /// Bytes after zstd, and the order-0 estimate: a bucket's entropy plus
    /// the bits below its top four, taken as uniform.
    fn sizes(&self) -> (usize, f64) {
        let z = self.bytes.chunks(1 << 20).map(|c| zstd::bulk::compress(c, 3).map_or(c.len(), |v| v.len())).sum();
        let n: u64 = self.buckets.values().sum();
        let bits: f64 = self
            .buckets
            .iter()
            .map(|(&(b, _), &c)| {
                let p = c as f64 / n as f64;
                -p * p.log2() + p * f64::from(b.saturating_sub(4))
            })
            .sum();
        (z, bits / 8.0 * n as f64)
    }
}

/// What one thread did last.
#[derive(Default, Clone, Copy)]
struct Thread {
    /// Its last call's end, switch-in or switch-out, or wake-up.
    last: u64,
    /// Its last wake-up and the one before.
    woke: [u64; 2],
    /// When it was last switched out.
    out: u64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).ok_or("usage: predictors LOG [FRAME_RECORDS]")?;
    let per_frame: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(DEFAULT_FRAME_RECORDS);
    let mut r = LogReader::open(Path::new(path))?;
    let mut cols: BTreeMap<&'static str, Column> = BTreeMap::new();
    let mut push = |k: &'static str, v: u64| cols.entry(k).or_default().push(v as i64);
    let mut threads: HashMap<u32, Thread> = HashMap::new();
    let (mut last, mut n) = (0u64, 0usize);
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            if n % per_frame == 0 {
                threads.clear();
                last = 0;
            }
            n += 1;
            let or_last = |t: u64| if t == 0 { last } else { t };
            match rec {
                Record::Io(io) => {
                    let end = io.ts.wrapping_add(io.dur);
                    let t = threads.entry(io.tid).or_default();
                    push("io end - record before (format 2)", end.wrapping_sub(last));
                    push("io start - thread's last", io.ts.wrapping_sub(or_last(t.last)));
                    push("io duration", io.dur);
                    t.last = end;
                    last = end;
                }
                Record::SchedSwitch(s) => {
                    let prev = threads.get(&s.prev_tid).copied().unwrap_or_default();
                    let next = threads.get(&s.next_tid).copied().unwrap_or_default();
                    push("switch - record before (format 2)", s.ts.wrapping_sub(last));
                    push("switch - prev thread's last", s.ts.wrapping_sub(or_last(prev.last)));
                    push("switch - next thread's wake-up", s.ts.wrapping_sub(or_last(next.woke[0])));
                    let p = threads.entry(s.prev_tid).or_default();
                    p.last = s.ts;
                    p.out = s.ts;
                    threads.entry(s.next_tid).or_default().last = s.ts;
                    last = s.ts;
                }
                Record::SchedWake(w) => {
                    let t = threads.entry(w.tid).or_default();
                    push("wake - record before (format 2)", w.ts.wrapping_sub(last));
                    let periodic = if t.woke[1] != 0 { 2 * t.woke[0] - t.woke[1] } else { last };
                    push("wake - thread's period", w.ts.wrapping_sub(periodic));
                    push("wake - thread's switch-out", w.ts.wrapping_sub(or_last(t.out)));
                    t.woke = [w.ts, t.woke[0]];
                    t.last = w.ts;
                    last = w.ts;
                }
                other => last = other.end_ts(),
            }
        }
    }
    println!("{n} records; B/record after zstd, and an order-0 estimate:");
    for (k, c) in &cols {
        let (z, est) = c.sizes();
        println!("{k:>36} {:>6.3} {:>6.3}", z as f64 / n as f64, est / n as f64);
    }
    Ok(())
}
