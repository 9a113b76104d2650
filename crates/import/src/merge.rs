//! Putting the records of all files in time order, in bounded memory.
//!
//! A file's records are nearly in order: bpftrace prints a call when it
//! returns, and its record starts `latency` earlier. So each file passes
//! through a buffer that holds a record until nothing earlier can still
//! come: until the latest end seen is past its start by twice the slowest
//! record so far (at least 2 s), or the buffer is full. Then the files are
//! merged by time. What still comes late is written out of order: readers
//! do not need order, and exporters sort what matters.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::error::ImportError;
use crate::item::Item;
use crate::Source;

/// The least reordering window.
const MIN_WINDOW_NS: u64 = 2_000_000_000;
/// Never hold more than this many records per file.
const MAX_HELD: usize = 1 << 18;

/// Boxed: the heap moves its entries around, and records are large.
struct Held {
    ts: u64,
    seq: u64,
    item: Box<Item>,
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        (self.ts, self.seq) == (o.ts, o.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.ts, self.seq).cmp(&(o.ts, o.seq))
    }
}

/// One file's records, reordered within the window.
pub struct Reorder {
    pub src: Box<dyn Source>,
    heap: BinaryHeap<Reverse<Held>>,
    /// The latest end seen, and the longest record.
    newest: u64,
    slowest: u64,
    seq: u64,
    done: bool,
}

impl Reorder {
    pub fn new(src: Box<dyn Source>) -> Self {
        Reorder { src, heap: BinaryHeap::new(), newest: 0, slowest: 0, seq: 0, done: false }
    }

    pub fn next(&mut self) -> Result<Option<Item>, ImportError> {
        loop {
            if let Some(Reverse(top)) = self.heap.peek() {
                let window = MIN_WINDOW_NS.max(self.slowest.saturating_mul(2));
                if self.done || top.ts.saturating_add(window) <= self.newest || self.heap.len() >= MAX_HELD {
                    return Ok(self.heap.pop().map(|Reverse(h)| *h.item));
                }
            }
            if self.done {
                return Ok(None);
            }
            match self.src.next_item()? {
                Some(item) => {
                    let (ts, end) = (item.ts(), item.end_ts());
                    self.newest = self.newest.max(end);
                    self.slowest = self.slowest.max(end - ts);
                    self.seq += 1;
                    self.heap.push(Reverse(Held { ts, seq: self.seq, item: Box::new(item) }));
                }
                None => self.done = true,
            }
        }
    }
}

/// All files' records, merged by time.
pub struct Merge {
    pub inputs: Vec<Reorder>,
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    pending: Vec<Option<Item>>,
    started: bool,
}

impl Merge {
    pub fn new(inputs: Vec<Reorder>) -> Self {
        let n = inputs.len();
        Merge { inputs, heads: BinaryHeap::new(), pending: (0..n).map(|_| None).collect(), started: false }
    }

    fn pull(&mut self, i: usize) -> Result<(), ImportError> {
        if let Some(it) = self.inputs[i].next()? {
            self.heads.push(Reverse((it.ts(), i)));
            self.pending[i] = Some(it);
        }
        Ok(())
    }

    pub fn next(&mut self) -> Result<Option<Item>, ImportError> {
        if !self.started {
            self.started = true;
            for i in 0..self.inputs.len() {
                self.pull(i)?;
            }
        }
        let Some(Reverse((_, i))) = self.heads.pop() else { return Ok(None) };
        let it = self.pending[i].take();
        self.pull(i)?;
        Ok(it)
    }
}
