//! Byte layout of the file header and of each frame header.
//!
//! ```text
//! file:   "MLTRACE\0" | major u16 | minor u16 | json_len u32 | json_crc u32 | header JSON
//! frame:  "MLTF" | kind u8 | flags u8 | 0u16 | payload_len u32 | raw_len u32
//!         | records u32 | payload_crc u32 | first_ts u64 | last_ts u64 | header_crc u32
//!         | payload (zstd for records, plain JSON for the trailer)
//! ```
//! All integers little-endian, CRC-32 (IEEE). The frame header has its own
//! CRC so that a reader can trust the lengths and time range of a frame whose
//! payload is damaged, skip exactly that frame and say which time it lost.
//! The magic lets a reader find the next frame after a damaged header.

pub const FILE_MAGIC: &[u8; 8] = b"MLTRACE\0";
/// Format 2: kinds declared once, predictions per thread. Format 1 is
/// still read ([`FORMAT_MAJOR_OLDEST`]).
pub const FORMAT_MAJOR: u16 = 2;
pub const FORMAT_MAJOR_OLDEST: u16 = 1;
pub const FORMAT_MINOR: u16 = 0;
pub const FILE_HEADER_LEN: usize = 20;

pub const FRAME_MAGIC: &[u8; 4] = b"MLTF";
pub const FRAME_HEADER_LEN: usize = 44;
/// Upper bounds a reader accepts, so a damaged length cannot make it allocate
/// gigabytes.
pub const MAX_PAYLOAD: u32 = 256 << 20;
pub const MAX_RAW: u32 = 256 << 20;
pub const MAX_HEADER_JSON: u32 = 16 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    Records = 1,
    Trailer = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub kind: u8,
    pub flags: u8,
    pub payload_len: u32,
    pub raw_len: u32,
    pub records: u32,
    pub payload_crc: u32,
    pub first_ts: u64,
    pub last_ts: u64,
}

impl FrameHeader {
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..4].copy_from_slice(FRAME_MAGIC);
        b[4] = self.kind;
        b[5] = self.flags;
        b[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        b[16..20].copy_from_slice(&self.records.to_le_bytes());
        b[20..24].copy_from_slice(&self.payload_crc.to_le_bytes());
        b[24..32].copy_from_slice(&self.first_ts.to_le_bytes());
        b[32..40].copy_from_slice(&self.last_ts.to_le_bytes());
        let crc = crc32fast::hash(&b[..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// `None` when the magic or the header CRC do not match.
    pub fn decode(b: &[u8; FRAME_HEADER_LEN]) -> Option<FrameHeader> {
        if &b[0..4] != FRAME_MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        if crc32fast::hash(&b[..40]) != u32_at(40) {
            return None;
        }
        Some(FrameHeader {
            kind: b[4],
            flags: b[5],
            payload_len: u32_at(8),
            raw_len: u32_at(12),
            records: u32_at(16),
            payload_crc: u32_at(20),
            first_ts: u64_at(24),
            last_ts: u64_at(32),
        })
    }
}

pub fn encode_file_header(json: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(FILE_HEADER_LEN + json.len());
    b.extend_from_slice(FILE_MAGIC);
    b.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    b.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
    b.extend_from_slice(&(json.len() as u32).to_le_bytes());
    b.extend_from_slice(&crc32fast::hash(json).to_le_bytes());
    b.extend_from_slice(json);
    b
}
