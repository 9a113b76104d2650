//! `mltrace dump`: every record as one line of text, `TS KIND field=value...`,
//! the fields as the log declares them.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use mltrace_log::{Record, Value, RET_UNKNOWN};

/// One record's line (without the newline).
fn line(rec: &Record, s: &dyn Fn(mltrace_log::StrId) -> String, out: &mut String) {
    out.clear();
    let _ = write!(out, "{} {}", rec.ts(), rec.kind_name());
    rec.visit(&mut |name, v| {
        if name == "ts" {
            return;
        }
        let _ = match v {
            // A result the source did not record.
            Value::I(RET_UNKNOWN) if name == "ret" => write!(out, " {name}=?"),
            Value::U(x) if name == "dev" => write!(out, " {name}={}:{}", x >> 20, x & 0xfffff),
            Value::U(x) if matches!(name, "addr" | "user_data" | "ctx" | "flags" | "prot" | "mode") => {
                write!(out, " {name}={x:#x}")
            }
            Value::U(x) | Value::Time(x) => write!(out, " {name}={x}"),
            Value::I(x) => write!(out, " {name}={x}"),
            Value::Bool(x) => write!(out, " {name}={x}"),
            Value::F64(x) => write!(out, " {name}={x}"),
            Value::Code(c) => write!(out, " {name}={c}"),
            Value::Str(id) => write!(out, " {name}={:?}", s(id).replace('\0', " ")),
        };
    });
}

pub fn run(path: &Path) -> anyhow::Result<()> {
    let mut r = crate::open_log(path)?;
    let header = r.header().clone();
    let (major, minor) = r.version();
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    writeln!(out, "# format: {major}.{minor}")?;
    writeln!(out, "# header: {}", serde_json::to_string(&header)?)?;
    let mut buf = String::new();
    while let Some(mut f) = r.next_frame()? {
        while let Some(rec) = f.next_record() {
            line(&rec, &|id| f.str_lossy(id).into_owned(), &mut buf);
            writeln!(out, "{buf}")?;
        }
    }
    for d in r.take_diagnostics() {
        eprintln!("mltrace: {}: {}", path.display(), d.describe(&header));
    }
    if let Some(t) = r.trailer() {
        writeln!(out, "# trailer: {}", serde_json::to_string(t)?)?;
    }
    Ok(())
}
