//! The "Python lines" section of `stats` and `python_lines`/`python` of
//! `stats --json`, from the lines [`crate::acc::python_lines`] found.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::acc::python_lines::{Line, Role, Site};
use crate::show::render::table;
use crate::{bytes, duration, pct, Stats};

/// Lines in `stats --json`, and per role in `stats`.
pub const MAX_JSON_LINES: usize = 100;
pub const TOP_LINES: usize = 5;

impl Site {
    pub(crate) fn json(&self) -> Value {
        json!({"function": &*self.function, "file": &*self.file, "line": line_json(self.line)})
    }
}

/// A line not known is null, never 0.
fn line_json(line: u32) -> Value {
    if line == 0 {
        Value::Null
    } else {
        line.into()
    }
}

impl Line {
    pub(crate) fn json(&self) -> Value {
        json!({
            "pid": self.pid,
            "role": self.role.name(),
            "file": &*self.site.file,
            "line": line_json(self.site.line),
            "function": &*self.site.function,
            "calls": self.reads.calls,
            "bytes": self.reads.bytes,
            "time_ns": self.reads.time_ns,
            "stack": self.stack.iter().map(Site::json).collect::<Vec<_>>(),
        })
    }
}

impl Stats {
    /// `python_lines` and `python` of `stats --json` (nothing without
    /// Python records).
    pub(crate) fn python_json(&self, into: &mut serde_json::Map<String, Value>) {
        let py = &self.python;
        if !py.seen {
            return;
        }
        let lines = self.python_lines();
        into.insert("python_lines".into(), lines.iter().take(MAX_JSON_LINES).map(Line::json).collect());
        let without: Vec<Value> = (py.without_stacks.iter())
            .map(|(pid, version, why)| json!({"pid": pid, "version": version, "why": why}))
            .collect();
        let v = json!({
            "calls": py.calls,
            "calls_without_stack": py.calls_without_stack,
            "interpreters_without_stacks": without,
        });
        into.insert("python".into(), v);
    }

    /// The "Python lines" section (nothing without Python records).
    pub(crate) fn render_python_lines(&self, o: &mut String) {
        let py = &self.python;
        if !py.seen {
            return;
        }
        let lines = self.python_lines();
        let times = self.python_role_times(&lines);
        let _ = writeln!(
            o,
            "Python lines (the job's own code each read of a data file came from, and the call it made; share of \
             the role's time in those reads):"
        );
        for (role, t) in [Role::Loader, Role::Trainer].into_iter().zip(times) {
            let of: Vec<&Line> = lines.iter().filter(|l| l.role == role).collect();
            if of.is_empty() {
                continue;
            }
            let who = if role == Role::Loader { "loaders" } else { "trainer" };
            let _ = writeln!(
                o,
                "{who}: {} in reads of data files, {} of it from a Python stack",
                duration(t.read_ns),
                pct_of(t.stacked_ns, t.read_ns)
            );
            let mut rows = vec![["line", "share", "time", "read", "calls"].map(String::from).to_vec()];
            for l in of.iter().take(TOP_LINES) {
                let label = if l.stack.is_empty() { "? (its stack is not in the log)".into() } else { l.site.label() };
                rows.push(vec![
                    label,
                    pct_of(l.reads.time_ns, t.read_ns),
                    duration(l.reads.time_ns),
                    bytes(l.reads.bytes),
                    l.reads.calls.to_string(),
                ]);
                if let Some(c) = &l.called {
                    rows.push(vec![format!("  -> {}", c.label())]);
                }
            }
            // A called frame's row has one cell: no padding after it.
            for row in table(&rows).lines() {
                let _ = writeln!(o, "  {}", row.trim_end());
            }
            if of.len() > TOP_LINES {
                let _ = writeln!(o, "  ({} more)", of.len() - TOP_LINES);
            }
        }
        if lines.is_empty() {
            let _ = writeln!(o, "no read of a data file with a Python stack");
        }
        if py.calls > 0 {
            let (n, of) = (py.calls_without_stack, py.calls);
            let _ = writeln!(o, "calls without a Python stack in Python processes: {n} of {of}");
        }
        for (pid, version, why) in &py.without_stacks {
            let name =
                self.processes.iter().rfind(|p| p.pid == *pid).map_or(String::new(), |p| format!("{} ", p.label()));
            let _ = writeln!(o, "no Python stacks: {name}[{pid}] (Python {version}): {why}");
        }
        o.push('\n');
    }
}

/// `part` of `whole` as a percentage (`-` of nothing).
fn pct_of(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    pct((part as f64 / whole as f64).min(1.0))
}
