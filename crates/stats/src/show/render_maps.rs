//! The mappings section of `mltrace stats`.

use std::fmt::Write as _;

use crate::show::render::table;
use crate::{bytes, shorten, Stats};

fn head(cols: &[&str]) -> Vec<String> {
    cols.iter().map(|s| s.to_string()).collect()
}

fn count(calls: u64, b: u64) -> String {
    if calls == 0 {
        "-".into()
    } else {
        format!("{calls} ({})", bytes(b))
    }
}

impl Stats {
    pub(crate) fn render_maps(&self, o: &mut String, top: usize) {
        if !self.has_mappings() || !self.processes.iter().any(|p| p.maps.any()) {
            return;
        }
        let faults = self.has_major_faults();
        let _ = writeln!(
            o,
            "\nmappings (mmap of data files; libraries, shared memory and anonymous memory counted, not drawn):"
        );
        let mut rows = vec![head(&[
            "process",
            "data mmaps",
            "mapped",
            "inherited",
            "from storage via maps",
            "major faults",
            "other faults",
            "libraries",
            "shared memory",
            "anonymous",
        ])];
        let na = |known: bool, v: u64| if known { v.to_string() } else { "-".into() };
        for p in self.processes.iter().filter(|p| p.maps.any()) {
            let m = &p.maps;
            rows.push(vec![
                format!("{} [{}]", p.label(), p.pid),
                m.data.calls.to_string(),
                bytes(m.mapped_bytes()),
                bytes(m.inherited_bytes),
                bytes(m.storage_read_bytes),
                na(faults, m.major_faults),
                na(faults, m.major_faults_other),
                count(m.code.calls, m.code.bytes),
                count(m.shared_memory.calls, m.shared_memory.bytes),
                count(m.anonymous.calls, m.anonymous.bytes),
            ]);
        }
        o.push_str(&table(&rows));
        let mut files: Vec<_> = self.files.iter().filter(|(_, f)| f.maps != Default::default()).collect();
        if files.is_empty() {
            return;
        }
        files.sort_by(|a, b| b.1.maps.mapped_bytes.cmp(&a.1.maps.mapped_bytes).then(a.0.cmp(b.0)));
        files.truncate(top);
        let _ = writeln!(o, "\ntop {} mapped files:", files.len());
        let mut rows = vec![head(&["file", "mmaps", "mapped", "from storage via maps", "major faults"])];
        for (path, f) in files {
            let m = &f.maps;
            rows.push(vec![
                shorten(path, 60),
                m.mmaps.to_string(),
                bytes(m.mapped_bytes),
                bytes(m.storage_read_bytes),
                na(faults, m.major_faults),
            ]);
        }
        o.push_str(&table(&rows));
    }
}
