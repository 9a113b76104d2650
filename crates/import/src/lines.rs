//! Reading text traces line by line, and keeping count of what was skipped.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::ImportError;

/// Lines of a file, numbered from 1, as text (invalid UTF-8 replaced: paths
/// in old traces are bytes, and one bad byte must not stop an import).
pub struct Lines {
    path: PathBuf,
    r: Box<dyn BufRead>,
    buf: Vec<u8>,
    line: String,
    no: u64,
}

impl Lines {
    pub fn open(path: &Path) -> Result<Self, ImportError> {
        let f = File::open(path).map_err(|e| ImportError::Read { path: path.to_path_buf(), source: e })?;
        Ok(Self::from_reader(path, Box::new(BufReader::with_capacity(1 << 16, f))))
    }

    pub fn from_reader(path: &Path, r: Box<dyn BufRead>) -> Self {
        Lines { path: path.to_path_buf(), r, buf: Vec::new(), line: String::new(), no: 0 }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next line without its end-of-line, and its number.
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, ImportError> {
        let mut line = std::mem::take(&mut self.line);
        let no = self.next_into(&mut line)?;
        self.line = line;
        Ok(no.map(|no| (no, self.line.as_str())))
    }

    /// The next line that is not blank, into `line`, and its number; every
    /// line read, blank or not, is counted in `report`.
    pub fn next_content(&mut self, line: &mut String, report: &mut FileReport) -> Result<Option<u64>, ImportError> {
        while let Some(no) = self.next_into(line)? {
            report.lines = no;
            if !line.trim().is_empty() {
                return Ok(Some(no));
            }
        }
        Ok(None)
    }

    /// Reads the next line into `line` (reusing its memory); its number.
    pub fn next_into(&mut self, line: &mut String) -> Result<Option<u64>, ImportError> {
        self.buf.clear();
        let n = self
            .r
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| ImportError::Read { path: self.path.clone(), source: e })?;
        if n == 0 {
            return Ok(None);
        }
        self.no += 1;
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        line.clear();
        match std::str::from_utf8(&self.buf) {
            Ok(s) => line.push_str(s),
            Err(_) => line.push_str(&String::from_utf8_lossy(&self.buf)),
        }
        Ok(Some(self.no))
    }
}

/// The first lines of a file, for recognising its format.
pub fn head(path: &Path, max_lines: usize, max_bytes: u64) -> Result<Vec<String>, ImportError> {
    let f = File::open(path).map_err(|e| ImportError::Read { path: path.to_path_buf(), source: e })?;
    let mut lines = Lines::from_reader(path, Box::new(BufReader::new(f.take(max_bytes))));
    let mut out = Vec::new();
    while out.len() < max_lines {
        match lines.next_line()? {
            Some((_, l)) => out.push(l.to_string()),
            None => break,
        }
    }
    Ok(out)
}

/// What happened to the lines of one input file.
#[derive(Clone, Debug, Default)]
pub struct FileReport {
    pub path: PathBuf,
    /// What the file was recognised as, for people.
    pub format: String,
    pub lines: u64,
    /// Records written from this file.
    pub records: u64,
    /// Header, banner and summary lines, skipped on purpose.
    pub skipped: u64,
    /// Lines that could not be read as data.
    pub malformed: u64,
    /// The first malformed lines: number and what was wrong.
    pub examples: Vec<(u64, String)>,
    /// Values repaired (negative 32-bit latencies, errnos printed unsigned...).
    pub repaired: Vec<(String, u64)>,
    /// Things worth saying that are not errors.
    pub notes: Vec<String>,
    /// Events the tracer itself reported lost.
    pub lost: u64,
    pub(crate) max_examples: usize,
}

impl FileReport {
    pub fn new(path: &Path, max_examples: usize) -> Self {
        FileReport { path: path.to_path_buf(), max_examples, ..Default::default() }
    }

    pub fn malformed(&mut self, line: u64, why: impl Into<String>) {
        self.malformed += 1;
        if self.examples.len() < self.max_examples {
            self.examples.push((line, why.into()));
        }
    }

    pub fn repaired(&mut self, what: &str) {
        match self.repaired.iter_mut().find(|(w, _)| w == what) {
            Some((_, n)) => *n += 1,
            None => self.repaired.push((what.to_string(), 1)),
        }
    }

    pub fn note(&mut self, s: impl Into<String>) {
        let s = s.into();
        if !self.notes.contains(&s) {
            self.notes.push(s);
        }
    }
}
