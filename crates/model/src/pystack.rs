//! The Python stacks calls were made from ([`PyFrame`] records), as a
//! call's slice shows them: one line per frame, innermost first,
//! `function (file:line)`.

use std::collections::HashMap;

use mltrace_log::{pyf, Frame, PyFrame};

#[derive(Debug, Default)]
pub struct Stacks {
    by_id: HashMap<(u32, u32), String>,
}

impl Stacks {
    /// A frame (a stack's frames come together, innermost first).
    pub fn add(&mut self, f: &Frame<'_>, r: &PyFrame) {
        let text = self.by_id.entry((r.pid, r.stack)).or_default();
        if !text.is_empty() {
            text.push('\n');
        }
        let (function, file) = (f.str_lossy(r.function), f.str_lossy(r.file));
        text.push_str(&function);
        text.push_str(" (");
        text.push_str(&file);
        if r.line != 0 {
            text.push(':');
            text.push_str(&r.line.to_string());
        }
        text.push(')');
        if r.flags & pyf::TRUNCATED != 0 {
            text.push_str("\n... (deeper frames not recorded)");
        }
    }

    /// The stack `stack` of process `pid`, if the log has it.
    pub fn text(&self, pid: u32, stack: u32) -> Option<&str> {
        if stack == 0 {
            return None;
        }
        self.by_id.get(&(pid, stack)).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}
