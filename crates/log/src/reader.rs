//! Reading a log frame by frame, in bounded memory, salvaging what can be
//! read from a damaged or cut log.
//!
//! Problems that still leave the rest readable (a damaged frame, a log cut
//! short because the recorder was killed) are not errors: they become
//! [`Diagnostic`]s, collected on the reader for the caller to print. Errors
//! are reserved for input that is not a readable log at all.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::codec::Decoder;
use crate::error::LogError;
use crate::frame::*;
use crate::header::{Header, Trailer};
use crate::record::{Record, StrId};

/// Something wrong with the log that the reader worked around.
#[derive(Clone, Debug, PartialEq)]
pub enum Diagnostic {
    /// Bytes that were skipped: a frame whose checksum or content is wrong,
    /// or garbage between frames. Times are known when the frame header was
    /// intact.
    Skipped { offset: u64, len: u64, first_ts: Option<u64>, last_ts: Option<u64>, reason: String },
    /// The log ends without its trailer: the recorder was killed or the file
    /// was cut at byte `end`. Everything up to `last_ts` was read; `frame`
    /// is what the cut frame held, when its header was intact.
    Cut { offset: u64, end: u64, last_ts: Option<u64>, reason: String, frame: Option<CutFrame> },
    /// Records of kinds this version does not know (written by a newer mltrace).
    UnknownRecords { count: u64 },
}

/// The frame a cut went through, from its intact header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutFrame {
    /// Bytes the frame has (header and payload) and bytes of it in the file.
    pub len: u64,
    pub present: u64,
    pub records: u32,
    pub first_ts: u64,
    pub last_ts: u64,
    /// The cut frame is the trailer: every event was read, only the
    /// recording's end (exit status, totals) is lost.
    pub trailer: bool,
}

/// Turns BOOTTIME stamps into "+12.345 s (2026-11-22 10:00:01 UTC)" using the
/// header's anchor.
pub fn describe_ts(header: &Header, ts: u64) -> String {
    let a = header.start;
    let rel = (ts as i128 - a.boottime_ns as i128) as f64 / 1e9;
    let wall = a.realtime_ns as i128 + (ts as i128 - a.boottime_ns as i128);
    let secs = wall.div_euclid(1_000_000_000) as i64;
    let nanos = wall.rem_euclid(1_000_000_000) as u32;
    match chrono::DateTime::from_timestamp(secs, nanos) {
        Some(t) if a.realtime_ns != 0 => {
            format!("{rel:+.3} s ({})", t.format("%Y-%m-%d %H:%M:%S%.3f UTC"))
        }
        _ => format!("{rel:+.3} s"),
    }
}

impl Diagnostic {
    /// A one-line, human-readable description; `header` gives times meaning.
    pub fn describe(&self, header: &Header) -> String {
        let t = |ts: Option<u64>| ts.map(|t| describe_ts(header, t)).unwrap_or_else(|| "unknown time".into());
        // What was read before a cut; nothing to say when no frame was.
        let read_to = |ts: &Option<u64>| ts.map(|t| format!("; events up to {} were read", describe_ts(header, t)));
        let read_to = |ts: &Option<u64>| read_to(ts).unwrap_or_default();
        match self {
            Diagnostic::Skipped { offset, len, first_ts, last_ts, reason } => match (first_ts, last_ts) {
                (Some(_), Some(_)) => format!(
                    "skipped {len} damaged bytes at offset {offset} ({reason}); events from {} to {} are missing",
                    t(*first_ts),
                    t(*last_ts)
                ),
                _ => format!("skipped {len} unreadable bytes at offset {offset} ({reason})"),
            },
            Diagnostic::Cut { offset, end, last_ts, reason, frame } => match frame {
                Some(f) if f.trailer => format!(
                    "the log was cut at byte {end}, {} of the {} bytes of its trailer (at offset {offset}) missing: \
                     every event was read (up to {}), only the recording's end (exit status, totals) is lost",
                    f.len - f.present,
                    f.len,
                    t(*last_ts)
                ),
                // Columns follow one another in a frame's payload, so the
                // part before a cut holds no whole record to salvage.
                Some(f) => format!(
                    "the log was cut at byte {end}, {} of the {} bytes of the frame at offset {offset} missing: \
                     its {} events from {} to {} are lost (a cut frame cannot be decoded); \
                     the recording did not finish{}",
                    f.len - f.present,
                    f.len,
                    f.records,
                    t(Some(f.first_ts)),
                    t(Some(f.last_ts)),
                    read_to(last_ts)
                ),
                None if last_ts.is_none() && offset == end => {
                    format!("the log was cut at byte {end} ({reason}): the recording stopped before its first frame was written")
                }
                None if offset == end => {
                    format!(
                        "the log was cut at byte {end} ({reason}): the recording did not finish{}",
                        read_to(last_ts)
                    )
                }
                None => format!(
                    "the log was cut at byte {end} ({reason}, from offset {offset}): the recording did not finish{}",
                    read_to(last_ts)
                ),
            },
            Diagnostic::UnknownRecords { count } => {
                format!("skipped {count} records of kinds this mltrace does not know (written by a newer version)")
            }
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(&Header::default()))
    }
}

/// One frame's records and strings.
pub struct Frame<'a> {
    payload: &'a [u8],
    dec: &'a mut Decoder,
    diags: &'a mut Vec<Diagnostic>,
    header: FrameHeader,
    offset: u64,
    failed: bool,
}

impl Frame<'_> {
    /// The next record; `None` at the end of the frame. A record that cannot
    /// be decoded ends the frame early with a diagnostic.
    #[inline]
    pub fn next_record(&mut self) -> Option<Record> {
        let mut out = Record::Lost(crate::Lost::default());
        self.next_into(&mut out).then_some(out)
    }

    /// [`Frame::next_record`] into `out`, in place (what the passes over
    /// a whole log use: a returned record is copied on its way); `false`
    /// at the end of the frame.
    #[inline]
    pub fn next_into(&mut self, out: &mut Record) -> bool {
        if self.failed {
            return false;
        }
        let Some(got) = self.dec.next_into(self.payload, out) else { return false };
        match got {
            Ok(()) => true,
            Err(e) => {
                self.failed = true;
                self.diags.push(Diagnostic::Skipped {
                    offset: self.offset,
                    len: u64::from(self.header.payload_len) + FRAME_HEADER_LEN as u64,
                    first_ts: Some(self.header.first_ts),
                    last_ts: Some(self.header.last_ts),
                    reason: format!("undecodable record: {}", e.0),
                });
                false
            }
        }
    }

    /// The bytes of a string of this frame (`?` for an id the frame lacks).
    #[inline]
    pub fn str(&self, id: StrId) -> &[u8] {
        self.dec.str(self.payload, id).unwrap_or(b"?")
    }

    pub fn str_lossy(&self, id: StrId) -> Cow<'_, str> {
        String::from_utf8_lossy(self.str(id))
    }

    pub fn records(&self) -> u32 {
        self.header.records
    }

    pub fn first_ts(&self) -> u64 {
        self.header.first_ts
    }

    pub fn last_ts(&self) -> u64 {
        self.header.last_ts
    }

    /// Byte offset of the frame in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// Reads frames handed over before they are compressed: a recording's
/// own frames, read while it runs (the live metrics), with the same
/// decoder as a log's.
pub struct PayloadReader {
    dec: Decoder,
    diags: Vec<Diagnostic>,
}

impl Default for PayloadReader {
    fn default() -> Self {
        PayloadReader { dec: Decoder::new(crate::frame::FORMAT_MAJOR), diags: Vec::new() }
    }
}

impl PayloadReader {
    /// The frame of `payload` (an [`crate::EncodedFrame`]'s), numbered `n`
    /// in messages; an error says what is wrong with it.
    pub fn frame<'a>(
        &'a mut self,
        payload: &'a [u8],
        n: u64,
        first_ts: u64,
        last_ts: u64,
    ) -> Result<Frame<'a>, String> {
        let records = self.dec.reset(payload).map_err(|e| format!("frame {n}: {}", e.0))?;
        let header = FrameHeader {
            kind: FrameKind::Records as u8,
            flags: 0,
            payload_len: payload.len() as u32,
            raw_len: payload.len() as u32,
            records: records as u32,
            payload_crc: 0,
            first_ts,
            last_ts,
        };
        Ok(Frame { payload, dec: &mut self.dec, diags: &mut self.diags, header, offset: n, failed: false })
    }

    /// What could not be decoded so far.
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.diags)
    }
}

/// What [`LogReader::scan_span`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameSpan {
    pub frames: u64,
    pub records: u64,
    pub first_ts: Option<u64>,
    pub last_ts: Option<u64>,
}

/// Reads a log; see the module docs.
pub struct LogReader<R: Read + Seek> {
    name: PathBuf,
    src: R,
    offset: u64,
    /// Where the first frame starts.
    data_start: u64,
    header: Header,
    version: (u16, u16),
    trailer: Option<Trailer>,
    decomp: zstd::bulk::Decompressor<'static>,
    cbuf: Vec<u8>,
    payload: Vec<u8>,
    dec: Decoder,
    diags: Vec<Diagnostic>,
    reported_unknown: u64,
    last_ts: Option<u64>,
    /// Frames of records read intact since the start.
    frames_read: u64,
    done: bool,
}

impl LogReader<BufReader<File>> {
    pub fn open(path: &Path) -> Result<Self, LogError> {
        let f = File::open(path).map_err(|e| LogError::Io { path: path.to_owned(), source: e })?;
        LogReader::new(path, BufReader::with_capacity(1 << 20, f))
    }
}

/// What a file that is not an mltrace log probably is, for the error message.
fn sniff(b: &[u8]) -> &'static str {
    match b {
        [] => "an empty file",
        [0x0a, ..] => "a Perfetto protobuf trace (export output?), not an mltrace log",
        [b'{', ..] | [b'[', ..] => "a JSON file (a Chrome trace?)",
        [0x1f, 0x8b, ..] => "a gzip file",
        [0x28, 0xb5, 0x2f, 0xfd, ..] => "a bare zstd file",
        [0x7f, b'E', b'L', b'F', ..] => "an ELF binary",
        _ if b.iter().all(|&c| c == b'\n' || c == b'\r' || c == b'\t' || (0x20..0x7f).contains(&c)) => {
            "a text file (old bpftrace/mpstat/nvidia-smi output can be converted with `mltrace import`)"
        }
        _ => "not an mltrace log",
    }
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read + Seek> LogReader<R> {
    /// Reads and checks the file header. `name` is only used in messages.
    pub fn new(name: &Path, mut src: R) -> Result<Self, LogError> {
        let name = name.to_owned();
        let io_name = name.clone();
        let io_err = |e| LogError::Io { path: io_name.clone(), source: e };
        let mut fh = [0u8; FILE_HEADER_LEN];
        let n = read_full(&mut src, &mut fh).map_err(io_err)?;
        if n == 0 {
            return Err(LogError::Empty { path: name });
        }
        let magic_len = n.min(8);
        if fh[..magic_len] != FILE_MAGIC[..magic_len] || n < 8 {
            if n < 8 && fh[..n] == FILE_MAGIC[..n] {
                return Err(LogError::TruncatedHeader { path: name, len: n as u64 });
            }
            return Err(LogError::NotALog { path: name, looks_like: sniff(&fh[..n]).to_string() });
        }
        if n < FILE_HEADER_LEN {
            return Err(LogError::TruncatedHeader { path: name, len: n as u64 });
        }
        let major = u16::from_le_bytes([fh[8], fh[9]]);
        let minor = u16::from_le_bytes([fh[10], fh[11]]);
        if !(FORMAT_MAJOR_OLDEST..=FORMAT_MAJOR).contains(&major) {
            return Err(LogError::UnsupportedVersion {
                path: name,
                found: format!("{major}.{minor}"),
                supported: format!("{FORMAT_MAJOR_OLDEST}.x to {FORMAT_MAJOR}.x"),
            });
        }
        let json_len = u32::from_le_bytes(fh[12..16].try_into().unwrap());
        let crc = u32::from_le_bytes(fh[16..20].try_into().unwrap());
        if json_len > MAX_HEADER_JSON {
            return Err(LogError::BadHeader { path: name, reason: format!("header length {json_len} is implausible") });
        }
        let mut json = vec![0u8; json_len as usize];
        let got = read_full(&mut src, &mut json).map_err(io_err)?;
        if got < json.len() {
            return Err(LogError::TruncatedHeader { path: name, len: (FILE_HEADER_LEN + got) as u64 });
        }
        if crc32fast::hash(&json) != crc {
            return Err(LogError::BadHeader { path: name, reason: "header checksum mismatch".into() });
        }
        let header: Header = serde_json::from_slice(&json)
            .map_err(|e| LogError::BadHeader { path: name.clone(), reason: format!("header JSON: {e}") })?;
        Ok(LogReader {
            name,
            src,
            offset: (FILE_HEADER_LEN + json.len()) as u64,
            data_start: (FILE_HEADER_LEN + json.len()) as u64,
            header,
            version: (major, minor),
            trailer: None,
            decomp: zstd::bulk::Decompressor::new().map_err(io_err)?,
            cbuf: Vec::new(),
            payload: Vec::new(),
            dec: Decoder::new(major),
            diags: Vec::new(),
            reported_unknown: 0,
            last_ts: None,
            frames_read: 0,
            done: false,
        })
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn path(&self) -> &Path {
        &self.name
    }

    /// Format version of the file (major, minor).
    pub fn version(&self) -> (u16, u16) {
        self.version
    }

    /// The trailer, once the reader has reached it (`None` for a cut log).
    pub fn trailer(&self) -> Option<&Trailer> {
        self.trailer.as_ref()
    }

    /// Diagnostics gathered so far, removed from the reader.
    pub fn take_diagnostics(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.diags)
    }

    /// The latest timestamp of any frame read intact.
    pub fn last_ts(&self) -> Option<u64> {
        self.last_ts
    }

    /// Goes back to the first frame, to read the log again from the start
    /// (diagnostics, trailer and counts start anew).
    pub fn rewind(&mut self) {
        self.offset = self.data_start;
        self.trailer = None;
        self.dec = Decoder::new(self.version.0);
        self.diags.clear();
        self.reported_unknown = 0;
        self.last_ts = None;
        self.frames_read = 0;
        self.done = false;
    }

    /// The time span and record count of the log's frames, from their
    /// headers alone (nothing is decompressed), without moving the reader.
    /// Stops at the trailer, at the first damaged frame header or at the
    /// end of a cut log: a span from what is intact up to there.
    pub fn scan_span(&mut self) -> Result<FrameSpan, LogError> {
        let mut span = FrameSpan::default();
        let mut at = self.data_start;
        loop {
            self.src.seek(SeekFrom::Start(at)).map_err(|e| self.io(e))?;
            let mut hb = [0u8; FRAME_HEADER_LEN];
            if read_full(&mut self.src, &mut hb).map_err(|e| self.io(e))? < FRAME_HEADER_LEN {
                break;
            }
            let Some(h) = FrameHeader::decode(&hb).filter(|h| h.payload_len <= MAX_PAYLOAD) else { break };
            if h.kind != FrameKind::Records as u8 {
                break;
            }
            span.frames += 1;
            if h.records > 0 {
                span.records += u64::from(h.records);
                span.first_ts = Some(span.first_ts.map_or(h.first_ts, |t| t.min(h.first_ts)));
                span.last_ts = Some(span.last_ts.map_or(h.last_ts, |t| t.max(h.last_ts)));
            }
            at += (FRAME_HEADER_LEN + h.payload_len as usize) as u64;
        }
        Ok(span)
    }

    /// The trailer read ahead, from the frame headers alone (nothing is
    /// decompressed), without moving the reader: `None` for a cut log or
    /// one whose frame headers are damaged before the trailer.
    pub fn peek_trailer(&mut self) -> Result<Option<Trailer>, LogError> {
        let mut at = self.data_start;
        loop {
            self.src.seek(SeekFrom::Start(at)).map_err(|e| self.io(e))?;
            let mut hb = [0u8; FRAME_HEADER_LEN];
            if read_full(&mut self.src, &mut hb).map_err(|e| self.io(e))? < FRAME_HEADER_LEN {
                return Ok(None);
            }
            let Some(h) = FrameHeader::decode(&hb).filter(|h| h.payload_len <= MAX_PAYLOAD) else { return Ok(None) };
            if h.kind == FrameKind::Trailer as u8 {
                let mut buf = vec![0u8; h.payload_len as usize];
                if read_full(&mut self.src, &mut buf).map_err(|e| self.io(e))? < buf.len()
                    || crc32fast::hash(&buf) != h.payload_crc
                {
                    return Ok(None);
                }
                return Ok(serde_json::from_slice(&buf).ok());
            }
            at += (FRAME_HEADER_LEN + h.payload_len as usize) as u64;
        }
    }

    fn io(&self, e: io::Error) -> LogError {
        LogError::Io { path: self.name.clone(), source: e }
    }

    /// Finds the next intact frame header at or after `from`; returns its
    /// offset and header, or `None` at the end of the file.
    fn resync(&mut self, from: u64) -> Result<Option<(u64, FrameHeader)>, LogError> {
        const WIN: usize = 1 << 16;
        let mut buf = vec![0u8; WIN + FRAME_HEADER_LEN];
        let mut base = from;
        loop {
            self.src.seek(SeekFrom::Start(base)).map_err(|e| self.io(e))?;
            let n = read_full(&mut self.src, &mut buf).map_err(|e| self.io(e))?;
            if n < FRAME_HEADER_LEN {
                return Ok(None);
            }
            for i in 0..=(n - FRAME_HEADER_LEN) {
                if buf[i] == FRAME_MAGIC[0] && buf[i..i + 4] == FRAME_MAGIC[..] {
                    let hb: &[u8; FRAME_HEADER_LEN] = buf[i..i + FRAME_HEADER_LEN].try_into().unwrap();
                    if let Some(h) = FrameHeader::decode(hb) {
                        return Ok(Some((base + i as u64, h)));
                    }
                }
            }
            if n < buf.len() {
                return Ok(None);
            }
            base += (n - FRAME_HEADER_LEN + 1) as u64;
        }
    }

    /// Reads the next frame of records. `Ok(None)` at the end of the log
    /// (after the trailer, or where a cut log ends).
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, LogError> {
        loop {
            if self.done {
                if self.dec.unknown_kinds > self.reported_unknown {
                    let count = self.dec.unknown_kinds - self.reported_unknown;
                    self.reported_unknown = self.dec.unknown_kinds;
                    self.diags.push(Diagnostic::UnknownRecords { count });
                }
                return self.end_of_log();
            }
            let at = self.offset;
            self.src.seek(SeekFrom::Start(at)).map_err(|e| self.io(e))?;
            let mut hb = [0u8; FRAME_HEADER_LEN];
            let n = read_full(&mut self.src, &mut hb).map_err(|e| self.io(e))?;
            if n == 0 {
                self.cut(at, at, "no trailer", None);
                continue;
            }
            if n < FRAME_HEADER_LEN {
                let why = format!("{n} of the {FRAME_HEADER_LEN} bytes of a frame header");
                self.cut(at, at + n as u64, &why, None);
                continue;
            }
            let header = FrameHeader::decode(&hb).filter(|h| h.payload_len <= MAX_PAYLOAD && h.raw_len <= MAX_RAW);
            let Some(h) = header else {
                match self.resync(at + 1)? {
                    Some((next, _)) => {
                        self.diags.push(Diagnostic::Skipped {
                            offset: at,
                            len: next - at,
                            first_ts: None,
                            last_ts: None,
                            reason: "no valid frame header".into(),
                        });
                        self.offset = next;
                    }
                    None => {
                        let end = self.src.seek(SeekFrom::End(0)).map_err(|e| self.io(e))?;
                        self.cut(at, end, "garbage after the last intact frame", None)
                    }
                }
                continue;
            };
            let plen = h.payload_len as usize;
            self.cbuf.resize(plen, 0);
            let got = read_full(&mut self.src, &mut self.cbuf).map_err(|e| self.io(e))?;
            if got < plen {
                let frame = CutFrame {
                    len: (FRAME_HEADER_LEN + plen) as u64,
                    present: (FRAME_HEADER_LEN + got) as u64,
                    records: h.records,
                    first_ts: h.first_ts,
                    last_ts: h.last_ts,
                    trailer: h.kind == FrameKind::Trailer as u8,
                };
                self.cut(at, at + frame.present, "the last frame is incomplete", Some(frame));
                continue;
            }
            let next = at + (FRAME_HEADER_LEN + plen) as u64;
            let skipped = |reason: String| Diagnostic::Skipped {
                offset: at,
                len: next - at,
                first_ts: Some(h.first_ts),
                last_ts: Some(h.last_ts),
                reason,
            };
            if crc32fast::hash(&self.cbuf) != h.payload_crc {
                self.diags.push(skipped("checksum mismatch".into()));
                self.offset = next;
                continue;
            }
            self.offset = next;
            match h.kind {
                k if k == FrameKind::Trailer as u8 => {
                    match serde_json::from_slice::<Trailer>(&self.cbuf) {
                        Ok(t) => self.trailer = Some(t),
                        Err(e) => self.diags.push(skipped(format!("trailer JSON: {e}"))),
                    }
                    self.done = true;
                    continue;
                }
                k if k == FrameKind::Records as u8 => {}
                k => {
                    self.diags.push(skipped(format!("frame kind {k} is unknown to this version")));
                    continue;
                }
            }
            self.payload.clear();
            self.payload.reserve(h.raw_len as usize);
            if let Err(e) = self.decomp.decompress_to_buffer(&self.cbuf, &mut self.payload) {
                self.diags.push(skipped(format!("zstd: {e}")));
                continue;
            }
            if self.payload.len() != h.raw_len as usize {
                self.diags.push(skipped("decompressed size differs from the frame header".into()));
                continue;
            }
            match self.dec.reset(&self.payload) {
                Ok(n) if n == h.records as usize => {}
                Ok(n) => {
                    self.diags.push(skipped(format!("{n} records where the header says {}", h.records)));
                    continue;
                }
                Err(e) => {
                    self.diags.push(skipped(e.0));
                    continue;
                }
            }
            if h.records > 0 {
                self.last_ts = Some(self.last_ts.map_or(h.last_ts, |t| t.max(h.last_ts)));
            }
            self.frames_read += 1;
            return Ok(Some(Frame {
                payload: &self.payload,
                dec: &mut self.dec,
                diags: &mut self.diags,
                header: h,
                offset: at,
                failed: false,
            }));
        }
    }

    fn cut(&mut self, offset: u64, end: u64, reason: &str, frame: Option<CutFrame>) {
        self.diags.push(Diagnostic::Cut { offset, end, last_ts: self.last_ts, reason: reason.into(), frame });
        self.done = true;
    }

    /// The end of the log: an error when damage left nothing at all to read
    /// (an empty trace would look like a run that did nothing).
    fn end_of_log(&mut self) -> Result<Option<Frame<'_>>, LogError> {
        let damaged = self.diags.iter().any(|d| matches!(d, Diagnostic::Cut { .. } | Diagnostic::Skipped { .. }));
        if self.frames_read > 0 || !damaged {
            return Ok(None);
        }
        let why: Vec<String> = self
            .diags
            .iter()
            .filter(|d| matches!(d, Diagnostic::Cut { .. } | Diagnostic::Skipped { .. }))
            .map(|d| d.describe(&self.header))
            .collect();
        Err(LogError::NothingReadable { path: self.name.clone(), why: why.join("; ") })
    }
}
