//! The line a Python frame is executing, from its code object's line table.
//!
//! BPF sends each code object's raw line table and `co_firstlineno` once,
//! and each frame's instruction byte offset; this does in user space what
//! CPython's `PyCode_Addr2Line` does in the interpreter, for each of the
//! three table formats (see CPython's `Objects/lnotab_notes.txt` and, for
//! 3.11+, `Objects/locations.md`). Tables read from another process may be
//! cut short or damaged: nothing here panics, whatever the bytes.

/// Which encoding a code object's line table uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFormat {
    /// 3.9 and earlier: co_lnotab, (byte offset delta, line delta) pairs.
    Lnotab,
    /// 3.10: co_linetable, (byte delta, line delta) pairs with -128 = no line.
    Linetable310,
    /// 3.11+: the location table (PEP 657): varint-coded entries, in code units.
    Locations,
}

/// The line executing at `byte_offset` (bytes from the start of the
/// bytecode), or None when the table says the instruction has no line or
/// the table is cut short before the offset.
///
/// A 3.9 table does not mark where the bytecode ends: like CPython, an
/// offset past its last pair gets the last line, so a table cut at a pair
/// boundary cannot be told from a whole one (a cut mid-pair can).
pub fn line_at(format: LineFormat, table: &[u8], first_line: i32, byte_offset: u32) -> Option<u32> {
    let (first, offset) = (i64::from(first_line), i64::from(byte_offset));
    let line = match format {
        LineFormat::Lnotab => lnotab_line(table, first, offset),
        LineFormat::Linetable310 => linetable310_line(table, first, offset),
        LineFormat::Locations => locations_line(table, first, offset),
    }?;
    // Negative lines only come from damaged tables.
    u32::try_from(line).ok()
}

/// 3.9's `PyCode_Addr2Line`: sum the line deltas of the pairs whose
/// address is at or before the offset.
fn lnotab_line(table: &[u8], first_line: i64, offset: i64) -> Option<i64> {
    let mut line = first_line;
    let mut addr = 0i64;
    let mut pairs = table.chunks_exact(2);
    for pair in &mut pairs {
        addr += i64::from(pair[0]);
        if addr > offset {
            return Some(line);
        }
        line += i64::from(pair[1] as i8);
    }
    match pairs.remainder() {
        // Half a pair: its line delta is lost, so only offsets before its address are known.
        [delta] if addr + i64::from(*delta) <= offset => None,
        _ => Some(line),
    }
}

/// 3.10's `_PyCode_CheckLineNumber`: each pair covers the next `bdelta`
/// bytes; the first range that ends past the offset holds it (empty ranges,
/// which spell line jumps over 127, hold no offset but still move the line).
fn linetable310_line(table: &[u8], first_line: i64, offset: i64) -> Option<i64> {
    let mut computed = first_line;
    let mut end = 0i64;
    for pair in table.chunks_exact(2) {
        end += i64::from(pair[0]);
        let delta = pair[1] as i8;
        let line = if delta == -128 {
            None
        } else {
            computed += i64::from(delta);
            Some(computed)
        };
        if end > offset {
            return line;
        }
    }
    None
}

/// 3.11+'s `_PyCode_CheckLineNumber` over the location table. Each entry
/// starts with a byte `1cccclll`: code `cccc`, covering `lll + 1` code
/// units; only the line delta is read here, the columns are skipped.
fn locations_line(table: &[u8], first_line: i64, offset: i64) -> Option<i64> {
    let mut computed = first_line;
    let mut end = 0i64;
    let mut at = 0;
    while let Some(&head) = table.get(at) {
        let rest = &table[at + 1..];
        let delta = match (head >> 3) & 15 {
            // The no-column (13) and long (14) forms start with the line delta.
            13 | 14 => signed_varint(rest)?,
            // The one-line forms: delta 0, 1 or 2.
            code @ 10..=12 => i64::from(code - 10),
            // Short forms (0-9) and no location (15) keep the line.
            _ => 0,
        };
        computed = computed.wrapping_add(delta);
        end += (i64::from(head & 7) + 1) * 2;
        if end > offset {
            // 15 is "no location"; CPython tests the whole byte, bit 7 included.
            return if head >> 3 == 0x1f { None } else { Some(computed) };
        }
        // The next entry starts at the next byte with bit 7 set.
        at += 1 + rest.iter().position(|b| b & 0x80 != 0).unwrap_or(rest.len());
    }
    None
}

/// CPython's `scan_signed_varint`: a varint in 6-bit groups, low first,
/// bit 6 set while more follow; the low bit of the value is the sign.
/// None when the table ends inside it.
fn signed_varint(bytes: &[u8]) -> Option<i64> {
    let mut value = 0u32;
    let mut shift = 0u32;
    for &b in bytes {
        // Garbage may run on past 32 bits; CPython's C shift is undefined there, drop the bits.
        value |= u32::from(b & 63).checked_shl(shift).unwrap_or(0);
        shift = shift.saturating_add(6);
        if b & 64 == 0 {
            let magnitude = i64::from(value >> 1);
            return Some(if value & 1 == 1 { -magnitude } else { magnitude });
        }
    }
    None
}

/// A CPython string's characters: `kind` is PyUnicode's kind (1 =
/// latin-1/ASCII, 2 = UCS-2, 4 = UCS-4, little endian), `data` its raw
/// bytes (may be cut mid-character: drop the partial one). Never panics;
/// invalid code points become U+FFFD, and an unknown kind gives "".
pub fn decode_str(kind: u8, data: &[u8]) -> String {
    // Python strings can hold lone surrogates, which char rejects: they become U+FFFD too.
    let char_of = |c: u32| char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
    match kind {
        1 => data.iter().map(|&b| char::from(b)).collect(),
        2 => data.chunks_exact(2).map(|c| char_of(u16::from_le_bytes([c[0], c[1]]).into())).collect(),
        4 => data.chunks_exact(4).map(|c| char_of(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_str, line_at, LineFormat};

    /// Fixtures from real interpreters: see testdata/gen_linetables.py.
    const FIXTURES: [(&str, LineFormat, &str); 5] = [
        ("py39.json", LineFormat::Lnotab, include_str!("testdata/py39.json")),
        ("py310.json", LineFormat::Linetable310, include_str!("testdata/py310.json")),
        ("py311.json", LineFormat::Locations, include_str!("testdata/py311.json")),
        ("py312.json", LineFormat::Locations, include_str!("testdata/py312.json")),
        ("py313.json", LineFormat::Locations, include_str!("testdata/py313.json")),
    ];

    /// Just enough JSON for the fixtures.
    #[derive(Debug)]
    enum Json {
        Null,
        Num(i64),
        Str(String),
        Arr(Vec<Json>),
        Obj(Vec<(String, Json)>),
    }

    impl Json {
        fn get(&self, key: &str) -> &Json {
            let Json::Obj(fields) = self else { panic!("not an object: {self:?}") };
            &fields.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no {key}")).1
        }
        fn num(&self) -> i64 {
            let Json::Num(n) = self else { panic!("not a number: {self:?}") };
            *n
        }
        fn str(&self) -> &str {
            let Json::Str(s) = self else { panic!("not a string: {self:?}") };
            s
        }
        fn arr(&self) -> &[Json] {
            let Json::Arr(a) = self else { panic!("not an array: {self:?}") };
            a
        }
    }

    fn parse(text: &str) -> Json {
        let mut p = Parser { s: text.as_bytes(), at: 0 };
        let value = p.value();
        p.skip_ws();
        assert_eq!(p.at, p.s.len(), "trailing bytes");
        value
    }

    struct Parser<'a> {
        s: &'a [u8],
        at: usize,
    }

    impl Parser<'_> {
        fn skip_ws(&mut self) {
            while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
                self.at += 1;
            }
        }
        fn next(&mut self) -> u8 {
            self.skip_ws();
            self.at += 1;
            self.s[self.at - 1]
        }
        /// Items up to `close`, comma separated.
        fn items<T>(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> T) -> Vec<T> {
            let mut out = Vec::new();
            self.skip_ws();
            if self.s[self.at] == close {
                self.at += 1;
                return out;
            }
            loop {
                out.push(item(self));
                match self.next() {
                    b',' => {}
                    c if c == close => return out,
                    c => panic!("unexpected {:?} at {}", c as char, self.at),
                }
            }
        }
        fn string(&mut self) -> String {
            assert_eq!(self.next(), b'"');
            let mut out = Vec::new();
            loop {
                match self.s[self.at] {
                    b'"' => break,
                    b'\\' => {
                        // The fixtures are ASCII: only \" and \\ occur.
                        out.push(self.s[self.at + 1]);
                        self.at += 2;
                    }
                    c => {
                        out.push(c);
                        self.at += 1;
                    }
                }
            }
            self.at += 1;
            String::from_utf8(out).unwrap()
        }
        fn value(&mut self) -> Json {
            self.skip_ws();
            match self.s[self.at] {
                b'{' => {
                    self.at += 1;
                    Json::Obj(self.items(b'}', |p| {
                        let key = p.string();
                        assert_eq!(p.next(), b':');
                        (key, p.value())
                    }))
                }
                b'[' => {
                    self.at += 1;
                    Json::Arr(self.items(b']', Self::value))
                }
                b'"' => Json::Str(self.string()),
                b'n' => {
                    self.at += 4;
                    Json::Null
                }
                _ => {
                    let start = self.at;
                    while self.s.get(self.at).is_some_and(|c| *c == b'-' || c.is_ascii_digit()) {
                        self.at += 1;
                    }
                    Json::Num(std::str::from_utf8(&self.s[start..self.at]).unwrap().parse().unwrap())
                }
            }
        }
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    struct Code {
        name: String,
        first: i32,
        table: Vec<u8>,
        /// The line of each 2-byte code unit, a few past the end included.
        lines: Vec<Option<u32>>,
    }

    fn load(file: &str, format: LineFormat, text: &str) -> Vec<Code> {
        let doc = parse(text);
        assert_eq!(doc.get("format").str(), format!("{format:?}"), "{file}");
        doc.get("code")
            .arr()
            .iter()
            .map(|c| {
                let mut lines = Vec::new();
                for run in c.get("lines").arr() {
                    let line = match &run.arr()[0] {
                        Json::Null => None,
                        n => Some(u32::try_from(n.num()).unwrap()),
                    };
                    lines.resize(lines.len() + run.arr()[1].num() as usize, line);
                }
                assert!(lines.len() > c.get("units").num() as usize, "{file}: lines cover the code");
                Code {
                    name: c.get("name").str().to_string(),
                    first: c.get("first").num() as i32,
                    table: unhex(c.get("table").str()),
                    lines,
                }
            })
            .collect()
    }

    #[test]
    fn every_offset_matches_cpython() {
        for (file, format, text) in FIXTURES {
            let codes = load(file, format, text);
            let mut offsets = 0;
            for code in &codes {
                for (unit, &want) in code.lines.iter().enumerate() {
                    // Both bytes of a code unit are in the same instruction.
                    for byte in [2 * unit, 2 * unit + 1] {
                        let got = line_at(format, &code.table, code.first, byte as u32);
                        assert_eq!(got, want, "{file} {} at byte {byte}", code.name);
                        offsets += 1;
                    }
                }
            }
            eprintln!("{file}: {} code objects, {offsets} offsets", codes.len());
            assert!(codes.len() >= 60 && offsets >= 6000, "{file}: too few vectors");
        }
    }

    /// A table cut short never gives a wrong line, only None (and cuts do
    /// lose lines).
    #[test]
    fn cut_tables_give_none_not_wrong_lines() {
        for (file, format, text) in FIXTURES {
            let mut lost = 0;
            for code in load(file, format, text) {
                let len = code.table.len();
                // A handful of cuts per table; a 3.9 table cut at a pair boundary looks whole (see line_at).
                let step = (len / 8).max(1);
                for cut in (1..len).step_by(step).chain([len.saturating_sub(1)]) {
                    let cut = if format == LineFormat::Lnotab { cut | 1 } else { cut };
                    if cut == 0 || cut >= len {
                        continue;
                    }
                    for (unit, &want) in code.lines.iter().enumerate() {
                        let got = line_at(format, &code.table[..cut], code.first, 2 * unit as u32);
                        assert!(got.is_none() || got == want, "{file} {} cut at {cut}: {got:?}", code.name);
                        lost += usize::from(got.is_none() && want.is_some());
                    }
                }
            }
            assert!(lost > 0, "{file}: cuts should lose lines");
        }
    }

    #[test]
    fn lnotab_by_hand() {
        let f = LineFormat::Lnotab;
        // Bytes 0-5 line 10; 6-305 line 11 (a byte jump over 255); then back to line 9.
        let table = [6, 1, 255, 0, 45, 0xfe];
        assert_eq!(line_at(f, &table, 10, 0), Some(10));
        assert_eq!(line_at(f, &table, 10, 5), Some(10));
        assert_eq!(line_at(f, &table, 10, 6), Some(11));
        assert_eq!(line_at(f, &table, 10, 305), Some(11));
        assert_eq!(line_at(f, &table, 10, 306), Some(9));
        // Past the end: the last line, as in CPython.
        assert_eq!(line_at(f, &table, 10, u32::MAX), Some(9));
        // Half a pair: known before its address, unknown after.
        assert_eq!(line_at(f, &table[..5], 10, 305), Some(11));
        assert_eq!(line_at(f, &table[..5], 10, 306), None);
        assert_eq!(line_at(f, &[], 7, 100), Some(7));
        assert_eq!(line_at(f, &[2, 0x80], 0, 4), None, "line below zero");
    }

    #[test]
    fn linetable310_by_hand() {
        let f = LineFormat::Linetable310;
        // 4 bytes at line 5, a 200-line jump in two pairs (one empty), 2 bytes of no line, 2 back at 200.
        let table = [4, 0, 0, 127, 6, 73, 2, 0x80, 2, 0xf1];
        assert_eq!(line_at(f, &table, 5, 0), Some(5));
        assert_eq!(line_at(f, &table, 5, 3), Some(5));
        assert_eq!(line_at(f, &table, 5, 4), Some(205));
        assert_eq!(line_at(f, &table, 5, 9), Some(205));
        assert_eq!(line_at(f, &table, 5, 10), None);
        // -128 leaves the running line alone: 205 - 15.
        assert_eq!(line_at(f, &table, 5, 12), Some(190));
        assert_eq!(line_at(f, &table, 5, 14), None, "past the end");
        assert_eq!(line_at(f, &table[..9], 5, 12), None, "cut mid-pair");
    }

    #[test]
    fn locations_by_hand() {
        let f = LineFormat::Locations;
        let table = [
            // Short form (code 0), 1 unit, columns in the next byte: line 100.
            0x80, 0x05, //
            // One-line form +2 (code 12), 2 units, two column bytes: line 102.
            0xe1, 3, 9, //
            // No location (15), 1 unit.
            0xf8, //
            // Long form (14), 3 units: line delta -70 as a two-byte varint (141 = 13 + 2*64),
            // end line delta 0, columns 1 and 2.
            0xf2, 0x4d, 0x02, 0x00, 0x01, 0x02, //
            // No columns (13), 8 units: line delta +1.
            0xef, 0x02,
        ];
        let lines: Vec<_> = (0..32).map(|b| line_at(f, &table, 100, b)).collect();
        let mut want = vec![Some(100); 2];
        want.extend([Some(102); 4]);
        want.extend([None; 2]);
        want.extend([Some(32); 6]);
        want.extend([Some(33); 16]);
        want.extend([None; 2]); // past the end
        assert_eq!(lines, want);
        assert_eq!(line_at(f, &table, 20, 8), None, "line below zero");
        // Cut inside the long form's varint: its line is unknown, the earlier ones are not.
        assert_eq!(line_at(f, &table[..8], 100, 8), None);
        assert_eq!(line_at(f, &table[..8], 100, 4), Some(102));
    }

    #[test]
    fn strings() {
        assert_eq!(decode_str(1, b"f.<locals>.g"), "f.<locals>.g");
        assert_eq!(decode_str(1, &[0x63, 0x61, 0x66, 0xe9]), "café");
        let utf16: Vec<u8> = "λ_名".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert_eq!(decode_str(2, &utf16), "λ_名");
        assert_eq!(decode_str(2, &utf16[..utf16.len() - 1]), "λ_", "half a character dropped");
        assert_eq!(decode_str(2, &[0x00, 0xd8, 0x41, 0x00]), "\u{fffd}A", "lone surrogate");
        let utf32: Vec<u8> = "a🐍".chars().flat_map(|c| u32::from(c).to_le_bytes()).collect();
        assert_eq!(decode_str(4, &utf32), "a🐍");
        assert_eq!(decode_str(4, &utf32[..7]), "a");
        assert_eq!(decode_str(4, &[0, 0, 0x11, 0, 0xff, 0xff, 0xff, 0xff]), "\u{fffd}\u{fffd}");
        assert_eq!(decode_str(3, b"abc"), "");
        assert_eq!(decode_str(1, b""), "");
    }

    /// Random bytes: no panic, whatever the table, line or offset.
    #[test]
    fn random_input_never_panics() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let firsts = [0, 1, -1, i32::MAX, i32::MIN];
        for round in 0..50_000 {
            let len = (rand() % 48) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| rand() as u8).collect();
            let first = if round % 3 == 0 { firsts[round % 5] } else { rand() as i32 };
            let offset = match round % 4 {
                0 => u32::MAX,
                1 => rand() as u32,
                _ => (rand() % 256) as u32,
            };
            for format in [LineFormat::Lnotab, LineFormat::Linetable310, LineFormat::Locations] {
                line_at(format, &bytes, first, offset);
            }
            decode_str((rand() % 6) as u8, &bytes);
        }
        // Long varints and all-continuation bytes.
        let long = [0xf0, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x3f];
        line_at(LineFormat::Locations, &long, 0, 0);
        line_at(LineFormat::Locations, &[0x7f; 64], i32::MAX, 1000);
        line_at(LineFormat::Lnotab, &[0x7f; 64], i32::MAX, u32::MAX);
        line_at(LineFormat::Linetable310, &[0xff; 64], i32::MIN, u32::MAX);
    }
}
