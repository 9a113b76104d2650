//! Writing a log: [`FrameEncoder`] turns records into a frame payload (cheap,
//! on the producer's thread), [`LogWriter`] compresses and writes payloads
//! (on a writer thread in `record`). [`RecordWriter`] glues both together for
//! importers and tests.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{self, Write};

use crate::codec::Columns;
use crate::declare::Encode;
use crate::frame::{encode_file_header, FrameHeader, FrameKind};
use crate::header::{Header, Trailer};
use crate::record::{Record, StrId};
use crate::varint::put_u64;

/// A frame is cut after this many records even if a second has not passed:
/// big enough for zstd to find the patterns, small enough to bound memory.
pub const DEFAULT_FRAME_RECORDS: usize = 1 << 18;

/// FxHash-style hashing of byte strings; strings are paths and names and the
/// table is cleared every frame, so HashDoS is not a concern.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(c.try_into().unwrap())).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;

/// Fx's hash of a byte string: the frame's interner's, and the one the
/// recorder and stats key paths by.
pub fn hash_bytes(s: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    h.write(s);
    h.0
}

/// Per-frame string table. Interning a string already in the frame costs one
/// hash and one compare, and never allocates once the tables have grown.
#[derive(Default)]
struct Interner {
    by_hash: HashMap<u64, u32, FxBuild>,
    offsets: Vec<(u32, u32)>,
    lens: Vec<u8>,
    bytes: Vec<u8>,
}

impl Interner {
    fn intern(&mut self, s: &[u8]) -> StrId {
        let h = hash_bytes(s);
        if let Some(&id) = self.by_hash.get(&h) {
            let (a, b) = self.offsets[id as usize];
            if &self.bytes[a as usize..b as usize] == s {
                return StrId(id);
            }
            // A hash collision: store the string again under a new id.
            return self.add(s);
        }
        let id = self.add(s);
        self.by_hash.insert(h, id.0);
        id
    }

    fn add(&mut self, s: &[u8]) -> StrId {
        let id = self.offsets.len() as u32;
        let a = self.bytes.len() as u32;
        self.bytes.extend_from_slice(s);
        self.offsets.push((a, self.bytes.len() as u32));
        put_u64(&mut self.lens, s.len() as u64);
        StrId(id)
    }

    fn clear(&mut self) {
        self.by_hash.clear();
        self.offsets.clear();
        self.lens.clear();
        self.bytes.clear();
    }
}

/// A finished, uncompressed frame payload.
#[derive(Default, Debug)]
pub struct EncodedFrame {
    pub payload: Vec<u8>,
    pub records: u32,
    pub first_ts: u64,
    pub last_ts: u64,
}

/// Accumulates the records of one frame.
pub struct FrameEncoder {
    cols: Columns,
    strings: Interner,
    first_ts: u64,
    last_ts: u64,
    generation: u64,
    /// `record --time-resolution` in ns (1: times as measured).
    resolution: u64,
}

impl Default for FrameEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameEncoder {
    pub fn new() -> Self {
        FrameEncoder {
            cols: Columns::new(),
            strings: Interner::default(),
            first_ts: u64::MAX,
            last_ts: 0,
            generation: 0,
            resolution: 1,
        }
    }

    /// Rounds every record's times to multiples of `ns` from now on (see
    /// [`Record::round_times`]); the header says so in `time_resolution_ns`.
    pub fn set_time_resolution(&mut self, ns: u64) {
        self.resolution = ns.max(1);
    }

    /// Interns `s` in the current frame. Ids are only valid until the frame
    /// is finished; [`FrameEncoder::generation`] tells callers that cache ids
    /// when that happened.
    #[inline]
    pub fn intern(&mut self, s: &[u8]) -> StrId {
        self.strings.intern(s)
    }

    /// Changes every time a frame is finished.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Adds a record to the frame: a [`Record`], or one kind's struct
    /// where the kind is known (see [`Encode`]).
    #[inline]
    pub fn push<T: Encode>(&mut self, rec: &T) {
        if self.resolution > 1 {
            let mut r = *rec;
            r.round_times(self.resolution);
            return self.push_exact(&r);
        }
        self.push_exact(rec)
    }

    #[inline]
    fn push_exact<T: Encode>(&mut self, rec: &T) {
        let ts = rec.ts();
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(rec.span_end());
        self.cols.push(rec);
    }

    pub fn len(&self) -> usize {
        self.cols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cols.len() == 0
    }

    /// Rough uncompressed size so far.
    pub fn approx_bytes(&self) -> usize {
        self.cols.approx_bytes() + self.strings.bytes.len()
    }

    /// Moves the frame into `out` (its buffer is reused) and starts the next.
    pub fn finish_into(&mut self, out: &mut EncodedFrame) {
        out.payload.clear();
        out.records = self.cols.len() as u32;
        out.first_ts = if out.records == 0 { 0 } else { self.first_ts };
        out.last_ts = self.last_ts;
        self.cols.finish(self.strings.offsets.len(), &self.strings.lens, &self.strings.bytes, &mut out.payload);
        self.strings.clear();
        self.first_ts = u64::MAX;
        self.last_ts = 0;
        self.generation += 1;
    }
}

/// Compresses frames and writes them after the file header.
pub struct LogWriter<W: Write> {
    out: W,
    compressor: zstd::bulk::Compressor<'static>,
    cbuf: Vec<u8>,
    bytes: u64,
    frames: u64,
    records: u64,
}

impl<W: Write> LogWriter<W> {
    pub fn new(mut out: W, header: &Header, zstd_level: i32) -> io::Result<Self> {
        let json = serde_json::to_vec(header).map_err(io::Error::other)?;
        let b = encode_file_header(&json);
        out.write_all(&b)?;
        Ok(LogWriter {
            out,
            compressor: zstd::bulk::Compressor::new(zstd_level)?,
            cbuf: Vec::new(),
            bytes: b.len() as u64,
            frames: 0,
            records: 0,
        })
    }

    /// Compresses and writes one frame; flushes the underlying writer so a
    /// killed recorder loses at most the frame being built.
    pub fn write_frame(&mut self, f: &EncodedFrame) -> io::Result<()> {
        if f.records == 0 {
            return Ok(());
        }
        let bound = zstd::zstd_safe::compress_bound(f.payload.len());
        self.cbuf.clear();
        self.cbuf.reserve(bound);
        self.compressor.compress_to_buffer(&f.payload, &mut self.cbuf)?;
        let h = FrameHeader {
            kind: FrameKind::Records as u8,
            flags: 0,
            payload_len: self.cbuf.len() as u32,
            raw_len: f.payload.len() as u32,
            records: f.records,
            payload_crc: crc32fast::hash(&self.cbuf),
            first_ts: f.first_ts,
            last_ts: f.last_ts,
        };
        self.out.write_all(&h.encode())?;
        self.out.write_all(&self.cbuf)?;
        self.out.flush()?;
        self.bytes += (crate::frame::FRAME_HEADER_LEN + self.cbuf.len()) as u64;
        self.frames += 1;
        self.records += u64::from(f.records);
        Ok(())
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    /// Writes the trailer (which marks the log as complete) and returns the
    /// underlying writer.
    pub fn finish(mut self, trailer: &Trailer) -> io::Result<W> {
        let mut t = trailer.clone();
        t.records = self.records;
        t.frames = self.frames;
        let json = serde_json::to_vec(&t).map_err(io::Error::other)?;
        let h = FrameHeader {
            kind: FrameKind::Trailer as u8,
            flags: 0,
            payload_len: json.len() as u32,
            raw_len: json.len() as u32,
            records: 0,
            payload_crc: crc32fast::hash(&json),
            first_ts: t.end.boottime_ns,
            last_ts: t.end.boottime_ns,
        };
        self.out.write_all(&h.encode())?;
        self.out.write_all(&json)?;
        self.out.flush()?;
        self.bytes += (crate::frame::FRAME_HEADER_LEN + json.len()) as u64;
        Ok(self.out)
    }
}

/// Encoder and writer in one, cutting frames by record count. For importers,
/// tests and tools; `record` splits the two across threads instead.
pub struct RecordWriter<W: Write> {
    enc: FrameEncoder,
    frame: EncodedFrame,
    writer: LogWriter<W>,
    frame_records: usize,
}

impl<W: Write> RecordWriter<W> {
    pub fn new(out: W, header: &Header) -> io::Result<Self> {
        Self::with_level(out, header, 3)
    }

    /// As [`RecordWriter::new`], compressing at zstd level `level`. Times
    /// are rounded as the header's `time_resolution_ns` says.
    pub fn with_level(out: W, header: &Header, level: i32) -> io::Result<Self> {
        let mut enc = FrameEncoder::new();
        enc.set_time_resolution(header.time_resolution_ns.unwrap_or(1));
        Ok(RecordWriter {
            enc,
            frame: EncodedFrame::default(),
            writer: LogWriter::new(out, header, level)?,
            frame_records: DEFAULT_FRAME_RECORDS,
        })
    }

    pub fn with_frame_records(mut self, n: usize) -> Self {
        self.frame_records = n.max(1);
        self
    }

    /// Writes the record `build` returns; `build` interns the record's
    /// strings in the frame the record lands in.
    pub fn push_with(&mut self, build: impl FnOnce(&mut FrameEncoder) -> Record) -> io::Result<()> {
        let rec = build(&mut self.enc);
        self.push(&rec)
    }

    /// Writes a record that holds no strings (or strings interned by
    /// [`RecordWriter::push_with`]'s closure in the same frame).
    pub fn push(&mut self, rec: &Record) -> io::Result<()> {
        self.enc.push(rec);
        if self.enc.len() >= self.frame_records {
            self.cut()?;
        }
        Ok(())
    }

    /// Ends the current frame now.
    pub fn cut(&mut self) -> io::Result<()> {
        if self.enc.is_empty() {
            return Ok(());
        }
        self.enc.finish_into(&mut self.frame);
        self.writer.write_frame(&self.frame)
    }

    pub fn bytes_written(&self) -> u64 {
        self.writer.bytes_written()
    }

    pub fn finish(mut self, trailer: &Trailer) -> io::Result<W> {
        self.cut()?;
        self.writer.finish(trailer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind's struct pushed as itself writes the frame the enum does:
    /// the same code, columns, times and rounding (`Encode`'s two impls).
    #[test]
    fn a_kinds_struct_encodes_as_its_record_does() {
        for resolution in [1, 1000] {
            for &code in Record::CODES {
                let mut seed = u64::from(code) * 0x9e37_79b9;
                let rec = Record::build(code, |_| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    seed >> 40
                })
                .unwrap();
                let (mut by_enum, mut by_kind) = (FrameEncoder::new(), FrameEncoder::new());
                let (mut a, mut b) = (EncodedFrame::default(), EncodedFrame::default());
                for (enc, out, as_kind) in [(&mut by_enum, &mut a, false), (&mut by_kind, &mut b, true)] {
                    enc.set_time_resolution(resolution);
                    for _ in 0..3 {
                        if as_kind {
                            rec.push_as_kind(enc);
                        } else {
                            enc.push(&rec);
                        }
                    }
                    enc.finish_into(out);
                }
                let what = format!("{} at {resolution} ns", rec.kind_name());
                assert_eq!((a.records, a.first_ts, a.last_ts), (b.records, b.first_ts, b.last_ts), "{what}");
                assert_eq!(a.payload, b.payload, "{what}");
            }
        }
    }
}
