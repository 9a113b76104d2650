//! Writing trace events one by one into a buffered stream.
//!
//! Everything is written with `write!` into a `BufWriter`; strings go through
//! serde_json's escaping, which writes non-ASCII as UTF-8 (never surrogate
//! escapes, which make trace_processor v52 drop the event) and escapes only
//! quotes, backslashes and control characters. v52 decodes escapes only in
//! strings that also hold a `\"`, so it shows e.g. a tab in a path as `\t`;
//! the file itself is standard JSON.

use std::io::{self, BufWriter, Write};

use serde_json::Value;

/// Counts the bytes that reach the inner writer.
struct Counted<W: Write> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Category and name of every flow event: trace_processor matches v1 flow
/// ends to starts by (id, cat, name).
const FLOW_CAT: &str = "mltrace";
const FLOW_NAME: &str = "block I/O";

pub struct Sink<W: Write> {
    w: BufWriter<Counted<W>>,
    pub events: u64,
    /// Whether the current event has an `args` object open, and whether
    /// it has an arg yet.
    in_args: bool,
    first_arg: bool,
}

/// Writes ns as microseconds with up to 3 decimals, exactly: trace_processor
/// reads the decimal text, not a double (checked with v52 at 10^14 ns).
fn write_us<W: Write>(w: &mut W, ns: u64) -> io::Result<()> {
    let (us, frac) = (ns / 1000, ns % 1000);
    match frac {
        0 => write!(w, "{us}"),
        _ if frac % 100 == 0 => write!(w, "{us}.{}", frac / 100),
        _ if frac % 10 == 0 => write!(w, "{us}.{:02}", frac / 10),
        _ => write!(w, "{us}.{frac:03}"),
    }
}

fn write_str<W: Write>(w: &mut W, s: &str) -> io::Result<()> {
    match s.strip_suffix('\\') {
        // trace_processor v52 takes the quote in `\\"` for an escaped one
        // and loses the rest of the file: end with `\u005c` instead.
        Some(head) => {
            let mut v = serde_json::to_vec(head)?;
            v.pop();
            w.write_all(&v)?;
            w.write_all(b"\\u005c\"")
        }
        None => Ok(serde_json::to_writer(w, s)?),
    }
}

/// A JSON value with [`write_str`]'s strings (serde_json's own writer
/// would end a string in `\\"`).
fn write_value<W: Write>(w: &mut W, v: &Value) -> io::Result<()> {
    match v {
        Value::Null => w.write_all(b"null"),
        Value::Bool(b) => write!(w, "{b}"),
        Value::Number(n) => write!(w, "{n}"),
        Value::String(s) => write_str(w, s),
        Value::Array(a) => {
            w.write_all(b"[")?;
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write_value(w, x)?;
            }
            w.write_all(b"]")
        }
        Value::Object(o) => {
            w.write_all(b"{")?;
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write_str(w, k)?;
                w.write_all(b":")?;
                write_value(w, x)?;
            }
            w.write_all(b"}")
        }
    }
}

impl<W: Write> Sink<W> {
    pub fn new(out: W) -> Self {
        Sink {
            w: BufWriter::with_capacity(1 << 16, Counted { inner: out, bytes: 0 }),
            events: 0,
            in_args: false,
            first_arg: true,
        }
    }

    /// Opens the file: a `metadata` object (ignored by importers) before
    /// the event array, so the header is there even in a cut file.
    pub fn begin_file(&mut self, metadata: &Value) -> io::Result<()> {
        self.w.write_all(b"{\"metadata\":")?;
        write_value(&mut self.w, metadata)?;
        self.w.write_all(b",\n\"traceEvents\":[\n")
    }

    /// Closes the event array; `trailer` goes after it. Returns the bytes written.
    pub fn end_file(&mut self, trailer: &Value) -> io::Result<u64> {
        self.w.write_all(b"\n],\n\"mltraceTrailer\":")?;
        write_value(&mut self.w, trailer)?;
        self.w.write_all(b"}\n")?;
        self.w.flush()?;
        Ok(self.w.get_ref().bytes)
    }

    pub fn into_inner(self) -> io::Result<W> {
        Ok(self.w.into_inner().map_err(|e| e.into_error())?.inner)
    }

    /// Starts an event: `{"ph":..,"pid":..,"tid":..` and `ts` unless None.
    pub fn begin(&mut self, ph: char, pid: u32, tid: u32, ts: Option<u64>) -> io::Result<()> {
        if self.events > 0 {
            self.w.write_all(b",\n")?;
        }
        self.events += 1;
        write!(self.w, "{{\"ph\":\"{ph}\",\"pid\":{pid},\"tid\":{tid}")?;
        if let Some(ts) = ts {
            self.w.write_all(b",\"ts\":")?;
            write_us(&mut self.w, ts)?;
        }
        Ok(())
    }

    pub fn dur(&mut self, ns: u64) -> io::Result<()> {
        self.w.write_all(b",\"dur\":")?;
        write_us(&mut self.w, ns)
    }

    pub fn name(&mut self, name: &str) -> io::Result<()> {
        self.w.write_all(b",\"name\":")?;
        write_str(&mut self.w, name)
    }

    /// A field whose key and value need no escaping.
    pub fn raw(&mut self, key: &str, value: &str) -> io::Result<()> {
        write!(self.w, ",\"{key}\":\"{value}\"")
    }

    fn arg_key(&mut self, key: &str) -> io::Result<()> {
        if !self.in_args {
            self.in_args = true;
            self.first_arg = true;
            self.w.write_all(b",\"args\":{")?;
        }
        if !self.first_arg {
            self.w.write_all(b",")?;
        }
        self.first_arg = false;
        // Keys are our own constants or escaped like any string.
        write_str(&mut self.w, key)?;
        self.w.write_all(b":")
    }

    pub fn arg_str(&mut self, key: &str, v: &str) -> io::Result<()> {
        self.arg_key(key)?;
        write_str(&mut self.w, v)
    }

    /// Bytes from the log (paths...): invalid UTF-8 becomes U+FFFD.
    pub fn arg_bytes(&mut self, key: &str, v: &[u8]) -> io::Result<()> {
        self.arg_str(key, &String::from_utf8_lossy(v))
    }

    /// A NUL-separated argv as an array of strings.
    pub fn arg_argv(&mut self, key: &str, argv: &[u8]) -> io::Result<()> {
        self.arg_key(key)?;
        self.w.write_all(b"[")?;
        let argv = argv.strip_suffix(b"\0").unwrap_or(argv);
        if !argv.is_empty() {
            for (i, a) in argv.split(|&b| b == 0).enumerate() {
                if i > 0 {
                    self.w.write_all(b",")?;
                }
                write_str(&mut self.w, &String::from_utf8_lossy(a))?;
            }
        }
        self.w.write_all(b"]")
    }

    pub fn arg_i64(&mut self, key: &str, v: i64) -> io::Result<()> {
        self.arg_key(key)?;
        write!(self.w, "{v}")
    }

    /// Above i64::MAX as the i64 of the same bits, as trace_processor shows
    /// the Perfetto export's uint args (and reads larger JSON integers as
    /// doubles); such values are kernel sentinels, e.g. a flush's sector -1.
    pub fn arg_u64(&mut self, key: &str, v: u64) -> io::Result<()> {
        self.arg_key(key)?;
        write!(self.w, "{}", v as i64)
    }

    /// Non-finite values as strings ("NaN", "inf"): JSON has no literal
    /// for them, and the importer parses these for counters.
    pub fn arg_f64(&mut self, key: &str, v: f64) -> io::Result<()> {
        self.arg_key(key)?;
        if v.is_finite() {
            write!(self.w, "{v}")
        } else {
            write!(self.w, "\"{v}\"")
        }
    }

    /// Ends the event (and its args).
    pub fn end(&mut self) -> io::Result<()> {
        if self.in_args {
            self.in_args = false;
            self.w.write_all(b"}}")
        } else {
            self.w.write_all(b"}")
        }
    }

    /// A flow start ("s") or end ("f", bound to the enclosing slice).
    pub fn flow(&mut self, ph: char, pid: u32, tid: u32, ts: u64, id: u64) -> io::Result<()> {
        self.begin(ph, pid, tid, Some(ts))?;
        // Hex string: ids use all 64 bits, more than a JSON number keeps in JS.
        write!(self.w, ",\"cat\":\"{FLOW_CAT}\",\"name\":\"{FLOW_NAME}\",\"id\":\"0x{id:x}\"")?;
        if ph == 'f' {
            self.w.write_all(b",\"bp\":\"e\"")?;
        }
        self.end()
    }

    /// A metadata event (process_name, thread_name, *_sort_index).
    pub fn meta_name(&mut self, pid: u32, tid: u32, what: &str, name: &str) -> io::Result<()> {
        self.begin('M', pid, tid, None)?;
        self.name(what)?;
        self.arg_str("name", name)?;
        self.end()
    }

    pub fn meta_sort(&mut self, pid: u32, tid: u32, what: &str, index: i64) -> io::Result<()> {
        self.begin('M', pid, tid, None)?;
        self.name(what)?;
        self.arg_i64("sort_index", index)?;
        self.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(f: impl FnOnce(&mut Sink<Vec<u8>>) -> io::Result<()>) -> String {
        let mut s = Sink::new(Vec::new());
        f(&mut s).unwrap();
        s.w.flush().unwrap();
        String::from_utf8(s.w.get_ref().inner.clone()).unwrap()
    }

    #[test]
    fn timestamps_keep_nanoseconds() {
        let out = event(|s| {
            s.begin('X', 1, 2, Some(7_000_000_123_463))?;
            s.dur(3_000)?;
            s.end()
        });
        assert_eq!(out, r#"{"ph":"X","pid":1,"tid":2,"ts":7000000123.463,"dur":3}"#);
        let out = event(|s| {
            s.begin('X', 1, 2, Some(1_005))?;
            s.dur(40)?;
            s.end()
        });
        assert!(out.ends_with(r#""ts":1.005,"dur":0.04}"#), "{out}");
        let out = event(|s| {
            s.begin('X', 1, 2, Some(1_500))?;
            s.dur(3_000)?;
            s.end()
        });
        assert!(out.ends_with(r#""ts":1.5,"dur":3}"#), "{out}");
    }

    #[test]
    fn strings_are_escaped() {
        let out = event(|s| {
            s.begin('i', 1, 1, Some(0))?;
            s.name("a\"b")?;
            s.arg_bytes("path", b"/x\\y\n\t\x01\xff\xe9.bin")?;
            s.arg_argv("command", b"python3\0train.py\0")?;
            s.arg_u64("big", u64::MAX)?;
            s.arg_f64("nan", f64::NAN)?;
            s.arg_f64("x", 0.1)?;
            s.end()
        });
        assert_eq!(
            out,
            "{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"ts\":0,\"name\":\"a\\\"b\",\"args\":{\"path\":\"/x\\\\y\\n\\t\\u0001\u{fffd}\u{fffd}.bin\",\
             \"command\":[\"python3\",\"train.py\"],\"big\":-1,\"nan\":\"NaN\",\"x\":0.1}}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["args"]["path"], "/x\\y\n\t\u{1}\u{fffd}\u{fffd}.bin");
    }

    #[test]
    fn no_string_ends_in_an_escaped_backslash() {
        let out = event(|s| {
            s.begin('i', 1, 1, None)?;
            s.name("dir\\")?;
            s.arg_str("p", "a\\\\")?;
            s.arg_str("q", "\\")?;
            s.end()
        });
        assert!(!out.contains("\\\\\""), "{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["name"], "dir\\");
        assert_eq!(v["args"]["p"], "a\\\\");
        assert_eq!(v["args"]["q"], "\\");
        let mut w = Vec::new();
        write_value(&mut w, &serde_json::json!({"cwd": "x\\", "n": [1, 2.5, null, true]})).unwrap();
        assert_eq!(String::from_utf8(w).unwrap(), r#"{"cwd":"x\u005c","n":[1,2.5,null,true]}"#);
    }

    #[test]
    fn file_is_one_json_object() {
        let mut s = Sink::new(Vec::new());
        s.begin_file(&serde_json::json!({"a": 1})).unwrap();
        s.meta_name(5, 5, "process_name", "p").unwrap();
        s.flow('f', 5, 6, 10, u64::MAX).unwrap();
        let bytes = s.end_file(&serde_json::Value::Null).unwrap();
        let out = s.into_inner().unwrap();
        assert_eq!(bytes, out.len() as u64);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["traceEvents"].as_array().unwrap().len(), 2);
        assert_eq!(v["traceEvents"][1]["id"], "0xffffffffffffffff");
        assert_eq!(v["traceEvents"][1]["bp"], "e");
    }
}
