//! Putting the records of all files in time order, in bounded memory.
//!
//! A file's records are nearly in order: bpftrace prints a call when it
//! returns, and its record starts `latency` earlier. So each file passes
//! through a buffer that holds a record until nothing earlier can still
//! come: until the latest end seen is past its start by twice the slowest
//! record so far (at least 2 s), or the buffer is full. Then the files are
//! merged by time. What still comes late is written out of order: readers
//! do not need order, and exporters sort what matters.
//!
//! A process's first `Comm` moves back to the start of any of its records
//! that comes while it is held: imports name processes only by comm, and
//! exporters name a process when its first record needs it.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::rc::Rc;

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
    /// Pids whose first Comm has come, and that Comm while it is held:
    /// (seq, ts, comm).
    named: HashSet<u32>,
    first_comm: HashMap<u32, (u64, u64, Rc<str>)>,
    /// Seqs of held Comms that were moved back (pushed again, earlier).
    moved: HashSet<u64>,
}

impl Reorder {
    pub fn new(src: Box<dyn Source>) -> Self {
        Reorder {
            src,
            heap: BinaryHeap::new(),
            newest: 0,
            slowest: 0,
            seq: 0,
            done: false,
            named: HashSet::new(),
            first_comm: HashMap::new(),
            moved: HashSet::new(),
        }
    }

    fn push(&mut self, ts: u64, item: Item) {
        self.seq += 1;
        self.heap.push(Reverse(Held { ts, seq: self.seq, item: Box::new(item) }));
    }

    /// Moves the pid's held first Comm to `ts` if that is earlier.
    fn comm_before(&mut self, pid: u32, ts: u64) {
        let Some((seq, comm_ts, comm)) = self.first_comm.get(&pid) else { return };
        if *comm_ts <= ts {
            return;
        }
        let comm = comm.clone();
        self.moved.insert(*seq);
        self.push(ts, Item::Comm { ts, pid, comm: comm.clone() });
        self.first_comm.insert(pid, (self.seq, ts, comm));
    }

    pub fn next(&mut self) -> Result<Option<Item>, ImportError> {
        loop {
            if let Some(Reverse(top)) = self.heap.peek() {
                let window = MIN_WINDOW_NS.max(self.slowest.saturating_mul(2));
                if self.done || top.ts.saturating_add(window) <= self.newest || self.heap.len() >= MAX_HELD {
                    let Some(Reverse(h)) = self.heap.pop() else { continue };
                    if self.moved.remove(&h.seq) {
                        continue;
                    }
                    if let Item::Comm { pid, .. } = *h.item {
                        if self.first_comm.get(&pid).is_some_and(|c| c.0 == h.seq) {
                            self.first_comm.remove(&pid);
                        }
                    }
                    return Ok(Some(*h.item));
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
                    match (&item, item.pid()) {
                        (Item::Comm { pid, comm, .. }, _) if self.named.insert(*pid) => {
                            self.first_comm.insert(*pid, (self.seq + 1, ts, comm.clone()));
                        }
                        (_, Some(pid)) => self.comm_before(pid, ts),
                        _ => {}
                    }
                    self.push(ts, item);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::FileReport;
    use mltrace_log::IoOp;

    struct Items(std::vec::IntoIter<Item>, FileReport);

    impl Source for Items {
        fn next_item(&mut self) -> Result<Option<Item>, ImportError> {
            Ok(self.0.next())
        }
        fn report(&self) -> &FileReport {
            &self.1
        }
    }

    fn comm(ts: u64, pid: u32, name: &str) -> Item {
        Item::Comm { ts, pid, comm: Rc::from(name) }
    }

    fn read(ts: u64, dur: u64, pid: u32) -> Item {
        let (op, path) = (IoOp::Read, String::new());
        Item::Io { ts, dur, pid, tid: pid, op, fd: 3, path, offset: None, requested: 1, ret: 1 }
    }

    fn reorder(items: Vec<Item>) -> Vec<Item> {
        let mut r = Reorder::new(Box::new(Items(items.into_iter(), FileReport::default())));
        std::iter::from_fn(|| r.next().unwrap()).collect()
    }

    #[test]
    fn a_first_comm_moves_before_its_process_records() {
        // Lines in end order: pid 7's first line names it, a later line
        // started earlier. The rename (second comm) stays where it is.
        let out = reorder(vec![
            comm(100, 7, "python"),
            read(100, 5, 7),
            read(50, 60, 7),
            read(40, 100, 8),
            comm(120, 7, "worker"),
            read(120, 1, 7),
        ]);
        let want = [
            read(40, 100, 8),
            comm(50, 7, "python"),
            read(50, 60, 7),
            read(100, 5, 7),
            comm(120, 7, "worker"),
            read(120, 1, 7),
        ];
        assert_eq!(out, want);
    }
}
