//! LEB128 varints and zigzag, the only integer encodings inside a frame.

#[inline]
pub fn put_u64(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[inline]
pub fn put_i64(buf: &mut Vec<u8>, v: i64) {
    put_u64(buf, zigzag(v));
}

/// Reads one varint from `buf` at `*pos`; `None` when the bytes end early or
/// the value does not fit 64 bits (both mean a corrupt column).
#[inline]
pub fn get_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_edges() {
        let vals = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX];
        let mut buf = Vec::new();
        for v in vals {
            put_u64(&mut buf, v);
        }
        let mut pos = 0;
        for v in vals {
            assert_eq!(get_u64(&buf, &mut pos), Some(v));
        }
        assert_eq!(get_u64(&buf, &mut pos), None);
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -4096] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn overlong_is_rejected() {
        let buf = [0xffu8; 11];
        assert_eq!(get_u64(&buf, &mut 0), None);
        // 10th byte may only carry the top bit
        let mut b = vec![0xffu8; 9];
        b.push(0x02);
        assert_eq!(get_u64(&b, &mut 0), None);
    }
}
