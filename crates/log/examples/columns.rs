//! Where a log's bytes go: writes its records again in the current format
//! and prints each column's share, each column compressed on its own (an
//! estimate: zstd compresses the frame whole). `columns LOG [FRAME_RECORDS]`.

use std::collections::BTreeMap;
use std::path::Path;

use mltrace_log::*;

fn varint(b: &[u8], pos: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let x = b[*pos];
        *pos += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let mut r = LogReader::open(Path::new(&args[1]))?;
    let per_frame: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_FRAME_RECORDS);
    let mut enc = FrameEncoder::new();
    let mut out = EncodedFrame::default();
    let mut sizes: BTreeMap<(u8, u64), (u64, u64)> = BTreeMap::new();
    type Fields = (&'static [&'static str], &'static [u8]);
    let mut names: BTreeMap<u8, (&'static str, Fields)> = BTreeMap::new();
    let mut n = 0u64;
    let mut flush = |enc: &mut FrameEncoder, sizes: &mut BTreeMap<(u8, u64), (u64, u64)>| {
        enc.finish_into(&mut out);
        let p = &out.payload;
        let mut pos = 0;
        let _ = (varint(p, &mut pos), varint(p, &mut pos));
        let cols = varint(p, &mut pos);
        let dir: Vec<(u64, u64)> = (0..cols).map(|_| (varint(p, &mut pos), varint(p, &mut pos))).collect();
        for (id, len) in dir {
            let col = &p[pos..pos + len as usize];
            pos += len as usize;
            let z = zstd::bulk::compress(col, 3).unwrap().len() as u64;
            let key = if id < 3 { (0, id) } else { ((id >> 5) as u8, id & 31) };
            let e = sizes.entry(key).or_default();
            e.0 += len;
            e.1 += z;
        }
    };
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            let mut rec = rec;
            rec.map_strs(|id| enc.intern(f.str(id)));
            names.entry(rec.code()).or_insert((rec.kind_name(), rec.fields()));
            enc.push(&rec);
            n += 1;
            if enc.len() >= per_frame {
                flush(&mut enc, &mut sizes);
            }
        }
    }
    flush(&mut enc, &mut sizes);
    let total: u64 = sizes.values().map(|v| v.1).sum();
    println!("{n} records, {:.2} B/record with columns compressed apart", total as f64 / n as f64);
    let mut rows: Vec<_> = sizes.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .1));
    for ((k, f), (raw, z)) in rows.into_iter().take(40) {
        let name = match k {
            0 => ["kinds", "string lengths", "string bytes"][f as usize].to_string(),
            _ => names
                .get(&k)
                .map(|(kn, (fs, cs))| {
                    let i = cs.iter().position(|&c| u64::from(c) == f);
                    format!("{kn}.{}", i.map(|i| fs[i]).unwrap_or("?"))
                })
                .unwrap_or_default(),
        };
        println!("{name:>28} {:>8.3} B/record ({:.2} raw)", z as f64 / n as f64, raw as f64 / n as f64);
    }
    Ok(())
}
