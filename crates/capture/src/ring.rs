//! The consumer's side of mltrace's BPF ring buffers, one per CPU, read in
//! place and merged into one stream.
//!
//! Each program writes to the ring of the CPU it runs on, so no lock is
//! shared between CPUs. The price is order: a record that names a file
//! (an open) may sit in one ring while the first read of that file sits in
//! another. [`Merged`] hands records over in the order of each record's
//! key, a clock read its program made after whatever the record depends on
//! ([`crate::decode::record_key`]), which keeps every such dependency.
//!
//! libbpf's consumer publishes its position after every record, and every
//! reservation on a producing CPU reads that position. This reader
//! publishes it once per batch (and every [`PUBLISH_BYTES`] within one, so
//! a long drain still frees space as it goes), and hands each record over
//! without a callback through C.
//!
//! The layout is the kernel's (kernel/bpf/ringbuf.c): a page with the
//! consumer position (the only page user space may write), a page with the
//! producer position, then the data, mapped twice in a row so that a record
//! that wraps is contiguous. Each record starts with an 8-byte header: its
//! length with a busy and a discard bit, and a page offset user space does
//! not need. Records are 8-byte aligned.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::system::page_size;

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HEADER: u64 = 8;
/// The first byte of a batch: one ring record holding several, each
/// behind a header like the ring's (its length, 4 bytes unused), 8-byte
/// aligned, after an 8-byte batch header (bpf/events.h, RING_BATCH).
pub const BATCH: u8 = 255;
/// The most [`Merged::poll`] sleeps before the producers may wake it.
/// Each wake-up costs its producer an interrupt, and each round of the
/// consumer its fixed work: on (b) the consumer's median was 342 and 334
/// ns a record when woken every 5 ms, 294 and 322 every 20, in two
/// alternations with main's build (docs/performance.md).
pub const QUIET_MAX: Duration = Duration::from_millis(20);
/// The fastest one CPU is taken to send records, to size that sleep to
/// the rings: (b)'s four workers send about 45 MB/s over two CPUs.
const PEAK_BYTES_PER_SEC: u64 = 256 << 20;
/// Consumed bytes after which a batch publishes its position anyway.
pub const PUBLISH_BYTES: u64 = 1 << 20;

/// How many records of a ring [`Sink::ahead`] is given before they are
/// taken: enough for the cache misses of that many to overlap, few
/// enough that what they bring in is still there when each is taken.
pub const AHEAD: u32 = 16;

/// How far past the record looked at a ring's lines are asked for: a few
/// records' worth, not all of a batch's 4 KiB at once (more asks than a
/// core has room for stall it until the first have come). The stream
/// runs on across records and batches (the ring is contiguous), so the
/// next batch's first lines are on their way before its header is read.
const PREFETCH_BYTES: u64 = 512;
const LINE: u64 = 64;

/// Where [`Merged::consume`] hands records: each to `take`, in key
/// order, and first to `ahead` a few records of its ring before that
/// (to fetch what decoding it will need while the ones before it are
/// decoded). A closure takes records and looks at none ahead.
pub trait Sink {
    fn take(&mut self, rec: &[u8]);
    fn ahead(&mut self, _rec: &[u8]) {}
}

impl<F: FnMut(&[u8])> Sink for F {
    fn take(&mut self, rec: &[u8]) {
        self(rec)
    }
}

/// How far a ring's records were handed to [`Sink::ahead`]: the record at
/// `pos` (within a batch, its sub-record at `sub`), and how many of those
/// handed are not taken yet.
#[derive(Clone, Copy, Default)]
struct Ahead {
    pos: u64,
    sub: usize,
    lead: u32,
    /// The ring position up to which lines were asked for.
    fetched: u64,
}

/// One ring buffer map, mapped.
pub struct Ring {
    consumer: *mut u8,
    /// The producer's page and the data twice, read-only.
    rest: *mut u8,
    page: usize,
    size: u64,
    /// Our position (the kernel's copy is published from it).
    pos: u64,
    /// Headers with a length no record can have, each skipped with what
    /// the producer had sent after it (never seen: the kernel writes them).
    corrupt: u64,
    /// Inside a batch at `pos` ([`BATCH`]): the offset of its next record
    /// in its body; 0 otherwise.
    sub: usize,
}

// SAFETY: the mappings belong to the Ring alone; it moves whole.
unsafe impl Send for Ring {}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The total length of a record whose header says `len`.
fn stride(len: u32) -> u64 {
    ((len & !(BUSY | DISCARD)) as u64 + HEADER + 7) & !7
}

impl Ring {
    /// Maps the ring buffer map `map` of `size` bytes (its max_entries, a
    /// power of two).
    pub fn new(map: impl AsFd, size: u64) -> io::Result<Ring> {
        if !size.is_power_of_two() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ring size not a power of two"));
        }
        let fd = map.as_fd().as_raw_fd();
        let page = page_size();
        let map_at = |len: usize, prot: libc::c_int, off: usize| -> io::Result<*mut u8> {
            // SAFETY: a fresh shared mapping of the map's fd; checked below.
            let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd, off as libc::off_t) };
            if p == libc::MAP_FAILED {
                Err(io::Error::last_os_error())
            } else {
                Ok(p.cast())
            }
        };
        let consumer = map_at(page, libc::PROT_READ | libc::PROT_WRITE, 0)?;
        let rest = match map_at(page + 2 * size as usize, libc::PROT_READ, page) {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: mapped just above, with this length.
                unsafe { libc::munmap(consumer.cast(), page) };
                return Err(e);
            }
        };
        // SAFETY: the page is mapped and 8-aligned; the kernel wrote it.
        let pos = unsafe { (*consumer.cast::<AtomicU64>()).load(Ordering::Acquire) };
        Ok(Ring { consumer, rest, page, size, pos, corrupt: 0, sub: 0 })
    }

    /// The length word of the record header at `pos` (with its busy and
    /// discard bits).
    fn header(&self, pos: u64) -> u32 {
        let at = self.page + (pos & (self.size - 1)) as usize;
        // SAFETY: `at` is inside the first copy of the data; 8-aligned.
        unsafe { (*self.rest.add(at).cast::<AtomicU32>()).load(Ordering::Acquire) }
    }

    /// Asks for the lines from ring position `from` up to `to` (see
    /// [`PREFETCH_BYTES`]); returns where it stopped.
    #[inline]
    fn prefetch(&self, mut from: u64, to: u64) -> u64 {
        while from < to {
            let at = self.page + (from & (self.size - 1)) as usize;
            // A hint: it reads nothing (inside the mapping in any case).
            crate::cache::prefetch(self.rest.wrapping_add(at));
            from += LINE;
        }
        from
    }

    /// Whether a header's length is one the kernel could have written.
    fn possible(&self, len: u32) -> bool {
        (len & !(BUSY | DISCARD)) as u64 + HEADER <= self.size
    }

    /// The body of the committed record at `pos` whose header says `len`
    /// (checked by the caller with [`Ring::possible`]).
    fn body(&self, pos: u64, len: u32) -> &[u8] {
        let at = self.page + (pos & (self.size - 1)) as usize;
        // SAFETY: a record is at most the ring's size, and the data is
        // mapped twice in a row: contiguous even when it wraps. The
        // producer does not write it again until our position is published
        // past it.
        unsafe { std::slice::from_raw_parts(self.rest.add(at + HEADER as usize), (len & !(BUSY | DISCARD)) as usize) }
    }

    fn producer(&self) -> u64 {
        // SAFETY: the producer's page is mapped and 8-aligned.
        unsafe { (*self.rest.cast::<AtomicU64>()).load(Ordering::Acquire) }
    }

    /// The position last published.
    fn published(&self) -> u64 {
        // SAFETY: the consumer's page is mapped and 8-aligned.
        unsafe { (*self.consumer.cast::<AtomicU64>()).load(Ordering::Relaxed) }
    }

    fn publish(&self) {
        // SAFETY: the consumer's page is mapped, writable and 8-aligned.
        unsafe { (*self.consumer.cast::<AtomicU64>()).store(self.pos, Ordering::Release) }
    }
}

/// The record of batch `body` at offset `at` and the offset of the next;
/// `Err` when its header says more than the batch holds.
fn batched(body: &[u8], at: usize) -> Option<Result<(&[u8], usize), ()>> {
    let head = body.get(at..at + HEADER as usize)?;
    let len = u32::from_ne_bytes(head[..4].try_into().unwrap()) as usize;
    let start = at + HEADER as usize;
    match body.get(start..start + len) {
        Some(rec) => Some(Ok((rec, (start + len + 7) & !7))),
        None => Some(Err(())),
    }
}

/// Each CPU's batch of records not yet sent (bpf/mltrace/maps.bpf.h,
/// `batches`), mapped: the merge key of a batch's oldest record is the
/// first word of its CPU's value, 0 while the batch is empty.
struct Batches {
    base: *mut u8,
    len: usize,
    stride: usize,
}

impl Drop for Batches {
    fn drop(&mut self) {
        // SAFETY: mapped in Merged::batches with this length.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// Rings, one per CPU, read as one stream in the order of each record's
/// key. A call of [`Merged::consume`] reads every ring's producer position
/// twice, P then Q. Records before P are taken in key order, up to the
/// smallest key of another ring's records that cannot be taken yet: those
/// after P (and before Q), and those behind a record still being written.
/// They wait for the next call.
///
/// Why that keeps dependencies: a record B that depends on A was reserved
/// after A's program committed A (A's open returned before B's call
/// began), so when B is before P, A is committed and before P too, and A's
/// key, read before A was committed, is below B's. A record reserved after
/// Q was reserved after the P reading too: nothing taken now depends on it.
/// Within one ring, records go in the ring's order (what one shared ring
/// gave): a record cannot depend on one reserved after it.
///
/// Records batched in a CPU's unsent batch ([`Merged::batches`]) are not
/// in its ring yet: the batch's oldest key, read between P and Q, bounds
/// what the other rings hand over, as a record after P does. A batch
/// added to after that reading is sent after it, so behind Q, as a record
/// reserved then; one sent before it is in the ring before Q. A batch
/// that stays unsent holds the others back until its CPU sends it:
/// [`Merged::stale_batches`] says which to have sent.
///
/// `K`, the key, is a type of its own (a function item or closure), not a
/// function pointer: it is inlined where each record's key is read.
pub struct Merged<K = fn(&[u8]) -> u64> {
    rings: Vec<Ring>,
    key: K,
    /// Each ring's next record to take, by key: (key, ring), with its
    /// header in `lens`.
    heads: BinaryHeap<Reverse<(u64, usize)>>,
    lens: Vec<u32>,
    /// Each ring's smallest key among records that cannot be taken yet;
    /// the smallest of them with its ring, and the smallest of the other
    /// rings' (so that a ring's bound for the others is found at once).
    bounds: Vec<u64>,
    low: (u64, usize),
    second: u64,
    /// Woken by any ring's producer.
    epoll: OwnedFd,
    /// Whether the last consume() left records before P untaken.
    held: bool,
    /// The producer positions of a pass's two readings (kept to reuse).
    p: Vec<u64>,
    q: Vec<u64>,
    /// A mapped flag the producers read: set while [`Merged::poll`]
    /// sleeps, so that only then does a filling ring wake it.
    asleep: Option<Flag>,
    /// How long [`Merged::poll`] sleeps before setting that flag.
    quiet: Duration,
    /// Each CPU's unsent batch, when records are batched; the oldest key
    /// of each as the last pass read it, and as the last
    /// [`Merged::stale_batches`] saw it.
    batches: Option<Batches>,
    unsent: Vec<u64>,
    unsent_before: Vec<u64>,
    /// CPUs whose batch could not be sent (gone offline): their batch no
    /// longer holds the others back (what it holds at the end is lost).
    unsendable: Vec<bool>,
    /// Each ring's records handed to [`Sink::ahead`].
    ahead: Vec<Ahead>,
}

/// A page of a `BPF_F_MMAPABLE` array map, mapped: its first value.
struct Flag(*mut AtomicU32);

impl Drop for Flag {
    fn drop(&mut self) {
        // SAFETY: mapped in sleep_flag() with this length.
        unsafe { libc::munmap(self.0.cast(), page_size()) };
    }
}

impl<K: Fn(&[u8]) -> u64> Merged<K> {
    /// Merges `rings`, ordered by `key`; `maps` are their maps, for
    /// the producer's wake-ups (none in tests).
    pub fn new<M: AsFd>(rings: Vec<Ring>, maps: &[M], key: K) -> io::Result<Merged<K>> {
        // SAFETY: epoll_create1 has no preconditions; the fd is ours.
        let epoll = unsafe { OwnedFd::from_raw_fd(check(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) };
        for m in maps {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 0 };
            // SAFETY: both fds are open; ev lives across the call.
            check(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, m.as_fd().as_raw_fd(), &mut ev) })?;
        }
        let n = rings.len();
        // Sized by the online CPUs' rings, which share the space equally;
        // a CPU offline at the start has a page (bpf::ring_sizes).
        let quiet = quiet_for(rings.iter().map(|r| r.size).max().unwrap_or(0));
        Ok(Merged {
            rings,
            key,
            heads: BinaryHeap::with_capacity(n),
            lens: vec![0; n],
            bounds: vec![u64::MAX; n],
            low: (u64::MAX, usize::MAX),
            second: u64::MAX,
            epoll,
            held: false,
            p: Vec::with_capacity(n),
            q: Vec::with_capacity(n),
            asleep: None,
            quiet,
            batches: None,
            unsent: vec![0; n],
            unsent_before: vec![0; n],
            unsendable: vec![false; n],
            ahead: vec![Ahead::default(); n],
        })
    }

    /// Maps every map of `maps` (ring buffers of their max_entries bytes)
    /// and merges them.
    pub fn open<M: AsFd + libbpf_rs::MapCore>(maps: &[M], key: K) -> io::Result<Merged<K>> {
        let rings = maps.iter().map(|m| Ring::new(m, u64::from(m.max_entries()))).collect::<io::Result<_>>()?;
        Merged::new(rings, maps, key)
    }

    /// Malformed headers met in every ring since the last call (each
    /// skipped with what its producer had sent after it).
    pub fn take_corrupt(&mut self) -> u64 {
        self.rings.iter_mut().map(|r| std::mem::take(&mut r.corrupt)).sum()
    }

    /// Whether the last [`Merged::consume`] left committed records behind
    /// (to order them against records still being written).
    pub fn held_back(&self) -> bool {
        self.held
    }

    /// Maps `map` (a one-value `BPF_F_MMAPABLE` array the producers
    /// read) as the flag [`Merged::poll`] sets while it sleeps.
    pub fn sleep_flag(&mut self, map: impl AsFd) -> io::Result<()> {
        let fd = map.as_fd().as_raw_fd();
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh shared mapping of the map's fd; checked below.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), page_size(), prot, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        self.asleep = Some(Flag(p.cast()));
        Ok(())
    }

    /// Maps `map`, the programs' batches of unsent records (an array of
    /// a value per ring, `value_size` bytes each, `BPF_F_MMAPABLE`), to
    /// order the rings' records against them; from then on a record that
    /// starts with [`BATCH`] is a batch (without, a record's first byte is
    /// the reader's own business).
    pub fn batches(&mut self, map: impl AsFd, value_size: usize) -> io::Result<()> {
        let stride = value_size.next_multiple_of(8);
        let len = (stride * self.rings.len()).next_multiple_of(page_size());
        let fd = map.as_fd().as_raw_fd();
        // SAFETY: a fresh shared read-only mapping of the map's fd; checked below.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        self.batches = Some(Batches { base: p.cast(), len, stride });
        Ok(())
    }

    /// The CPUs whose batch held the same oldest record at the last pass
    /// as at the previous call: a CPU that sends no more records, whose
    /// batch the consumer should have sent ([`Merged::batches`]).
    pub fn stale_batches(&mut self) -> Vec<usize> {
        let stale = (0..self.unsent.len())
            .filter(|&i| self.unsent[i] != 0 && self.unsent[i] == self.unsent_before[i])
            .collect();
        self.unsent_before.copy_from_slice(&self.unsent);
        stale
    }

    /// Stops waiting for CPU `i`'s batch: it could not be sent there.
    pub fn unsendable(&mut self, i: usize) {
        if let Some(u) = self.unsendable.get_mut(i) {
            *u = true;
        }
    }

    /// The oldest key of any unsent batch at the last pass.
    pub fn oldest_unsent(&self) -> Option<u64> {
        self.unsent.iter().copied().filter(|&k| k != 0).min()
    }

    /// The CPUs whose batch holds records now.
    pub fn unsent_cpus(&mut self) -> Vec<usize> {
        self.read_unsent();
        (0..self.unsent.len()).filter(|&i| self.unsent[i] != 0).collect()
    }

    /// The records every CPU's batch holds now (the third word of its value).
    pub fn unsent_records(&self) -> u64 {
        let Some(b) = &self.batches else { return 0 };
        (0..self.rings.len())
            // SAFETY: inside value i of the mapping, 4-aligned.
            .map(|i| u64::from(unsafe { (*b.base.add(i * b.stride + 16).cast::<AtomicU32>()).load(Ordering::Acquire) }))
            .sum()
    }

    /// Reads every CPU's oldest unsent key into `unsent`.
    fn read_unsent(&mut self) {
        let Some(b) = &self.batches else { return };
        for (i, k) in self.unsent.iter_mut().enumerate() {
            // SAFETY: value i is inside the mapping, 8-aligned; the
            // programs write its first word.
            *k = unsafe { (*b.base.add(i * b.stride).cast::<AtomicU64>()).load(Ordering::Acquire) };
            if self.unsendable[i] {
                *k = 0;
            }
        }
    }

    /// Waits up to `timeout` for any ring's wake-up; whether one came.
    /// The producers are asked for a wake-up only after a quiet spell
    /// (the flag of [`Merged::sleep_flag`]): a consumer that sleeps
    /// little is not woken by every record it would have found anyway.
    /// The spell is short enough for the rings of online CPUs (the
    /// largest: an offline CPU's has a page) to stay half empty through it
    /// ([`quiet_for`]): a full ring reserves nothing, so no record could
    /// wake the consumer.
    pub fn poll(&self, timeout: Duration) -> bool {
        let wait = |t: Duration| {
            let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 8];
            let ms = t.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: the epoll fd is open; room for 8 events.
            unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), ev.as_mut_ptr(), ev.len() as i32, ms) > 0 }
        };
        // SAFETY: the flag's page stays mapped while self lives; 4-aligned.
        let Some(flag) = self.asleep.as_ref().map(|f| unsafe { &*f.0 }) else { return wait(timeout) };
        if timeout <= self.quiet {
            return wait(timeout);
        }
        if wait(self.quiet) {
            return true;
        }
        flag.store(1, Ordering::SeqCst);
        let woken = wait(timeout - self.quiet);
        flag.store(0, Ordering::SeqCst);
        woken
    }

    /// The smallest key of the committed records of ring `i` from `pos`
    /// up to `end` (a batch's records each).
    fn min_key(&self, i: usize, mut pos: u64, end: u64) -> u64 {
        let r = &self.rings[i];
        let mut min = u64::MAX;
        while pos < end {
            let len = r.header(pos);
            if !r.possible(len) {
                break;
            }
            if len & (BUSY | DISCARD) == 0 {
                let body = r.body(pos, len);
                if self.batches.is_some() && body.first() == Some(&BATCH) {
                    let mut at = HEADER as usize;
                    while let Some(Ok((rec, next))) = batched(body, at) {
                        min = min.min((self.key)(rec));
                        at = next;
                    }
                } else {
                    min = min.min((self.key)(body));
                }
            }
            pos += stride(len);
        }
        min
    }

    /// The key of ring `i`'s next record before `p` (discarded ones
    /// skipped, batches taken apart), its length in `lens`; where a record
    /// still being written stops it, none, and the ring's bound lowered to
    /// what follows that record up to `q`.
    fn next_head(&mut self, i: usize, p: u64, q: u64) -> Option<u64> {
        let r = &mut self.rings[i];
        while r.pos < p {
            let len = r.header(r.pos);
            if !r.possible(len) {
                // Nothing after it can be told apart: skipped to P, counted.
                r.corrupt += 1;
                r.pos = p;
                r.sub = 0;
                return None;
            }
            if len & BUSY != 0 {
                let busy = r.pos;
                self.lower(i, self.min_key(i, busy, q));
                return None;
            }
            if len & DISCARD == 0 {
                let body = r.body(r.pos, len);
                if self.batches.is_none() || body.first() != Some(&BATCH) {
                    self.lens[i] = len;
                    return Some((self.key)(body));
                }
                let at = r.sub.max(HEADER as usize);
                let found = batched(body, at).map(|b| b.map(|(rec, _)| ((self.key)(rec), rec.len() as u32)));
                match found {
                    Some(Ok((key, rec_len))) => {
                        r.sub = at;
                        self.lens[i] = rec_len;
                        return Some(key);
                    }
                    // A record longer than its batch: the rest is skipped, counted.
                    Some(Err(())) => r.corrupt += 1,
                    None => {}
                }
                r.sub = 0;
            }
            r.pos += stride(len);
        }
        None
    }

    /// Lowers ring `i`'s bound to `b` (where `b` is lower).
    fn lower(&mut self, i: usize, b: u64) {
        if b >= self.bounds[i] {
            return;
        }
        self.bounds[i] = b;
        if b < self.low.0 {
            if self.low.1 != i {
                self.second = self.low.0;
            }
            self.low = (b, i);
        } else {
            // Not the lowest ring: its old bound was at least the lowest.
            self.second = self.second.min(b);
        }
    }

    /// The smallest bound of a ring other than `i`.
    fn bound_for(&self, i: usize) -> u64 {
        if i == self.low.1 {
            self.second
        } else {
            self.low.0
        }
    }

    /// Hands ring `i`'s records before `p` to [`Sink::ahead`] until
    /// [`AHEAD`] of them are not taken yet (from the next to take on,
    /// where the last look is behind it).
    fn look_ahead(&mut self, i: usize, p: u64, f: &mut impl Sink) {
        let r = &self.rings[i];
        let a = &mut self.ahead[i];
        if a.pos < r.pos || (a.pos == r.pos && a.sub.max(HEADER as usize) < r.sub.max(HEADER as usize)) {
            *a = Ahead { pos: r.pos, sub: r.sub, lead: 0, fetched: a.fetched };
        }
        // Lines already asked for stay asked for; behind the record looked
        // at, the stream starts again from it.
        a.fetched = a.fetched.max((a.pos + HEADER + a.sub as u64) & !(LINE - 1));
        while a.lead < AHEAD && a.pos < p {
            // (An open of its own has its paths first in that stretch.)
            a.fetched = r.prefetch(a.fetched, (a.pos + HEADER + a.sub as u64 + PREFETCH_BYTES).min(p));
            let len = r.header(a.pos);
            if !r.possible(len) || len & BUSY != 0 {
                return;
            }
            if len & DISCARD == 0 {
                let body = r.body(a.pos, len);
                if self.batches.is_none() || body.first() != Some(&BATCH) {
                    f.ahead(body);
                    a.lead += 1;
                } else if let Some(Ok((rec, next))) = batched(body, a.sub.max(HEADER as usize)) {
                    f.ahead(rec);
                    a.lead += 1;
                    if next < body.len() {
                        a.sub = next;
                        continue;
                    }
                }
            }
            a.sub = 0;
            a.pos += stride(len);
        }
    }

    /// Hands every record that can be ordered now to `f`, in key order,
    /// reading the producers again until a pass finds nothing new (records
    /// sent while `f` ran are taken too, as a single ring's reader takes
    /// them); returns how many.
    pub fn consume(&mut self, f: impl FnMut(&[u8])) -> usize {
        self.consume_into(f)
    }

    /// As [`Merged::consume`], to a sink that looks at records ahead.
    pub fn consume_into(&mut self, mut f: impl Sink) -> usize {
        let mut n = 0;
        loop {
            let m = self.pass(&mut f);
            n += m;
            if m == 0 || self.held {
                break;
            }
        }
        // Once per call: each reservation reads this position, and a
        // write makes the producing CPUs fetch it again.
        for r in &self.rings {
            if r.published() != r.pos {
                r.publish();
            }
        }
        n
    }

    /// One pass of [`Merged::consume`]: the records before one reading of
    /// the producers.
    fn pass(&mut self, f: &mut impl Sink) -> usize {
        let (mut p, mut q) = (std::mem::take(&mut self.p), std::mem::take(&mut self.q));
        p.clear();
        p.extend(self.rings.iter().map(Ring::producer));
        self.read_unsent();
        q.clear();
        q.extend(self.rings.iter().map(Ring::producer));
        self.heads.clear();
        self.bounds.fill(u64::MAX);
        (self.low, self.second) = ((u64::MAX, usize::MAX), u64::MAX);
        for i in 0..self.rings.len() {
            if q[i] > p[i] {
                self.lower(i, self.min_key(i, p[i], q[i]));
            }
            if self.unsent[i] != 0 {
                self.lower(i, self.unsent[i]);
            }
            if let Some(k) = self.next_head(i, p[i], q[i]) {
                self.heads.push(Reverse((k, i)));
                self.look_ahead(i, p[i], f);
            }
        }
        let mut n = 0;
        self.held = false;
        // The smallest head is taken out of the heap; while the next record
        // of its ring stays below the other rings' heads (a run, as a
        // batch's records mostly are), it is taken without going through
        // the heap.
        let mut cur = self.heads.pop().map(|Reverse(h)| h);
        while let Some((k, i)) = cur {
            // A ring's own bound does not hold its records back.
            if k >= self.bound_for(i) {
                self.held = true;
                break;
            }
            let len = self.lens[i];
            let r = &mut self.rings[i];
            if r.sub == 0 {
                f.take(r.body(r.pos, len));
                r.pos += stride(len);
            } else {
                let outer = r.header(r.pos);
                let body = r.body(r.pos, outer);
                let (at, whole) = (r.sub + HEADER as usize, body.len());
                f.take(&body[at..at + len as usize]);
                r.sub = (at + len as usize + 7) & !7;
                if r.sub >= whole {
                    r.sub = 0;
                    r.pos += stride(outer);
                }
            }
            n += 1;
            if r.pos - r.published() >= PUBLISH_BYTES {
                r.publish();
            }
            let a = &mut self.ahead[i];
            a.lead = a.lead.saturating_sub(1);
            self.look_ahead(i, p[i], f);
            cur = match self.next_head(i, p[i], q[i]) {
                None => self.heads.pop().map(|Reverse(h)| h),
                // Another ring's head is smaller: it is taken next, and
                // this ring's goes into its place (one sift, no pop and push).
                Some(k) => match self.heads.peek_mut() {
                    Some(mut top) if top.0 < (k, i) => Some(std::mem::replace(&mut top.0, (k, i))),
                    _ => Some((k, i)),
                },
            };
        }
        (self.p, self.q) = (p, q);
        n
    }
}

/// How long a consumer may sleep unwoken beside rings of at least `size`
/// bytes: the time a CPU sending at [`PEAK_BYTES_PER_SEC`] takes to fill
/// half of one, at most [`QUIET_MAX`].
pub fn quiet_for(size: u64) -> Duration {
    let half = Duration::from_nanos((size / 2).saturating_mul(1_000_000_000) / PEAK_BYTES_PER_SEC);
    half.min(QUIET_MAX)
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: both were mapped in new() with these lengths.
        unsafe {
            libc::munmap(self.consumer.cast(), self.page);
            libc::munmap(self.rest.cast(), self.page + 2 * self.size as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writer's side of a ring laid out as the kernel lays one out,
    /// over a memfd: the data mapped twice in a row.
    struct Writer {
        /// The producer's page and the data (once), writable.
        w: *mut u8,
        consumer: *mut u8,
        page: usize,
        size: u64,
    }

    fn fake(size: usize) -> (Ring, Writer) {
        // SAFETY: plain system calls on a fresh memfd; every result is checked.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
            let fd = libc::memfd_create(c"ring".as_ptr(), 0);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, (2 * page + size) as libc::off_t), 0);
            let map = |at: *mut u8, len: usize, off: usize, prot: libc::c_int| {
                let flags = libc::MAP_SHARED | if at.is_null() { 0 } else { libc::MAP_FIXED };
                let p = libc::mmap(at.cast(), len, prot, flags, fd, off as libc::off_t);
                assert_ne!(p, libc::MAP_FAILED);
                p.cast::<u8>()
            };
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            let consumer = map(std::ptr::null_mut(), page, 0, rw);
            let rest = map(std::ptr::null_mut(), page + 2 * size, page, libc::PROT_READ);
            map(rest.add(page + size), size, 2 * page, libc::PROT_READ);
            let w = map(std::ptr::null_mut(), page + size, page, rw);
            libc::close(fd);
            let size = size as u64;
            (Ring { consumer, rest, page, size, pos: 0, corrupt: 0, sub: 0 }, Writer { w, consumer, page, size })
        }
    }

    impl Writer {
        /// Writes a record of `body` at producer position `at` (its
        /// header with `flags`), wrapping as the kernel does.
        fn put(&self, at: u64, body: &[u8], flags: u32) -> u64 {
            let mut rec = (body.len() as u32 | flags).to_ne_bytes().to_vec();
            rec.extend_from_slice(&[0; 4]);
            rec.extend_from_slice(body);
            for (i, b) in rec.iter().enumerate() {
                // SAFETY: inside the writable data.
                unsafe { *self.w.add(self.page + ((at + i as u64) % self.size) as usize) = *b };
            }
            at + ((rec.len() as u64 + 7) & !7)
        }

        fn produce(&self, pos: u64) {
            // SAFETY: the producer's page, writable.
            unsafe { *self.w.cast::<u64>() = pos };
        }

        fn published(&self) -> u64 {
            // SAFETY: the consumer's page.
            unsafe { *self.consumer.cast::<u64>() }
        }
    }

    /// The tests' records: a key in the first word above its lowest byte,
    /// which is 0 (a record kind; [`BATCH`] is a batch's).
    fn key_of(r: &[u8]) -> u64 {
        first_word(r) >> 8
    }

    fn first_word(r: &[u8]) -> u64 {
        r.get(..8).map_or(0, |w| u64::from_ne_bytes(w.try_into().unwrap()))
    }

    /// Rings merged by their records' first word; `put(ring, position,
    /// key, flags)` writes, `take()` hands over what the merge gives.
    struct Rings {
        m: Merged,
        w: Vec<Writer>,
    }

    impl Rings {
        fn new(n: usize) -> Rings {
            let (rings, w): (Vec<_>, Vec<_>) = (0..n).map(|_| fake(4096)).unzip();
            Rings { m: Merged::new(rings, &[] as &[OwnedFd], key_of as fn(&[u8]) -> u64).unwrap(), w }
        }

        fn put(&self, ring: usize, at: u64, key: u64, flags: u32) -> u64 {
            self.w[ring].put(at, &(key << 8).to_ne_bytes(), flags)
        }

        fn produce(&self, ring: usize, pos: u64) {
            self.w[ring].produce(pos);
        }

        fn take(&mut self) -> Vec<u64> {
            let mut got = Vec::new();
            self.m.consume(|r| got.push(key_of(r)));
            got
        }

        /// A batch of records keyed `keys` at `at` in `ring`, as
        /// send_batch writes one (bpf/mltrace/common.bpf.h).
        fn put_batch(&self, ring: usize, at: u64, keys: &[u64]) -> u64 {
            let mut body = vec![BATCH, 0, 0, 0];
            body.extend_from_slice(&(keys.len() as u32).to_ne_bytes());
            for k in keys {
                body.extend_from_slice(&8u32.to_ne_bytes());
                body.extend_from_slice(&[0; 4]);
                body.extend_from_slice(&(k << 8).to_ne_bytes());
            }
            self.w[ring].put(at, &body, 0)
        }

        /// Maps a stand-in for the programs' batches (a page, a value of
        /// 64 bytes a ring); sets ring `i`'s oldest unsent key with the
        /// returned closure.
        fn batches(&mut self) -> impl Fn(usize, u64) {
            // SAFETY: a fresh memfd of a page, mapped shared; checked.
            unsafe {
                let fd = libc::memfd_create(c"batches".as_ptr(), 0);
                assert!(fd >= 0);
                let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
                assert_eq!(libc::ftruncate(fd, page as libc::off_t), 0);
                let fd = OwnedFd::from_raw_fd(fd);
                self.m.batches(&fd, 64).unwrap();
                let rw = libc::PROT_READ | libc::PROT_WRITE;
                let w = libc::mmap(std::ptr::null_mut(), page, rw, libc::MAP_SHARED, fd.as_raw_fd(), 0);
                assert_ne!(w, libc::MAP_FAILED);
                let w = w as usize;
                move |i: usize, key: u64| (*((w + i * 64) as *const AtomicU64)).store(key, Ordering::Release)
            }
        }

        fn take_bodies(&mut self) -> Vec<Vec<u8>> {
            let mut got = Vec::new();
            self.m.consume(|r| got.push(r.to_vec()));
            got
        }
    }

    #[test]
    fn one_ring_reads_in_order_across_the_wrap_and_skips_discarded_records() {
        let mut t = Rings::new(1);
        let mut p = 0;
        let mut want = Vec::new();
        // Past the end of the data twice, with records that straddle it.
        for i in 0..400u32 {
            let body: Vec<u8> = (0..(i % 37 + 1)).map(|j| if j == 0 { 0 } else { (i + j) as u8 }).collect();
            let discard = i % 5 == 3;
            p = t.w[0].put(p, &body, if discard { DISCARD } else { 0 });
            if !discard {
                want.push(body);
            }
            if i % 10 == 9 {
                t.produce(0, p);
                assert_eq!(t.take_bodies(), std::mem::take(&mut want), "at record {i}");
                assert_eq!(t.w[0].published(), p, "the position is published");
            }
        }
        assert!(p > 2 * 4096);
    }

    #[test]
    fn an_impossible_length_is_counted_and_skipped_to_what_was_sent() {
        let mut t = Rings::new(1);
        let a = t.put(0, 0, 1, 0);
        let bad = 8192u32.to_ne_bytes();
        let w = &t.w[0];
        // SAFETY: inside the writable data.
        unsafe { std::ptr::copy_nonoverlapping(bad.as_ptr(), w.w.add(w.page + a as usize), 4) };
        t.produce(0, a + 64);
        assert_eq!(t.take(), vec![1]);
        assert_eq!((t.m.take_corrupt(), t.w[0].published()), (1, a + 64));
        let c = t.put(0, a + 64, 2, 0);
        t.produce(0, c);
        assert_eq!(t.take(), vec![2]);
    }

    #[test]
    fn one_ring_stops_at_a_record_still_being_written() {
        let mut t = Rings::new(1);
        let a = t.put(0, 0, 5, 0);
        let b = t.put(0, a, 6, BUSY);
        // Behind the busy record, a smaller key: it bounds other rings only.
        let c = t.put(0, b, 1, 0);
        t.produce(0, c);
        assert_eq!(t.take(), vec![5]);
        assert_eq!(t.w[0].published(), a, "not past the busy record");
        assert!(!t.m.held_back());
        t.put(0, a, 6, 0);
        assert_eq!(t.take(), vec![6, 1]);
        assert_eq!(t.w[0].published(), c);
    }

    #[test]
    fn rings_merge_in_key_order() {
        let mut t = Rings::new(2);
        let (mut a, mut b) = (0, 0);
        for k in [1, 4, 5, 9] {
            a = t.put(0, a, k, 0);
        }
        for k in [2, 3, 6, 7, 8] {
            b = t.put(1, b, k, 0);
        }
        t.produce(0, a);
        t.produce(1, b);
        assert_eq!(t.take(), (1..=9).collect::<Vec<_>>());
        // Across the wrap, many times.
        let mut want = Vec::new();
        for k in 10..2000u64 {
            if k % 3 == 0 {
                a = t.put(0, a, k, 0);
            } else {
                b = t.put(1, b, k, if k % 7 == 0 { DISCARD } else { 0 });
            }
            if k % 7 != 0 || k % 3 == 0 {
                want.push(k);
            }
            if k % 50 == 0 {
                t.produce(0, a);
                t.produce(1, b);
                assert_eq!(t.take(), want, "at {k}");
                want.clear();
            }
        }
    }

    #[test]
    fn a_record_being_written_holds_back_later_keys_of_the_other_rings() {
        let mut t = Rings::new(3);
        let a1 = t.put(0, 0, 1, 0);
        let a2 = t.put(0, a1, 2, BUSY);
        let a3 = t.put(0, a2, 3, 0);
        let b = t.put(1, 0, 4, 0);
        let b = t.put(1, b, 5, 0);
        let c = t.put(2, 0, 2, 0);
        for (ring, pos) in [(0, a3), (1, b), (2, c)] {
            t.produce(ring, pos);
        }
        // 3 waits behind the busy 2, and bounds the other rings: 4 and 5
        // wait; 2, below the bound, goes.
        assert_eq!(t.take(), vec![1, 2]);
        assert!(t.m.held_back());
        t.put(0, a1, 2, 0);
        assert_eq!(t.take(), vec![2, 3, 4, 5]);
        assert!(!t.m.held_back());
        assert_eq!(t.take(), Vec::<u64>::new());
    }

    /// A repeatable pseudo-random sequence (xorshift64) for the tests.
    fn xorshift(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    /// The consumer's unwoken sleep leaves half of an online CPU's ring
    /// empty at the fastest a CPU is taken to send.
    #[test]
    fn batches_are_taken_apart_and_merged_record_by_record() {
        let mut t = Rings::new(2);
        let _ = t.batches();
        let a = t.put_batch(0, 0, &[1, 4, 7]);
        let b = t.put(1, 0, 2, 0);
        let b = t.put_batch(1, b, &[3, 5]);
        let b = t.put(1, b, 6, 0);
        t.produce(0, a);
        t.produce(1, b);
        assert_eq!(t.take(), vec![1, 2, 3, 4, 5, 6, 7]);
        assert!(!t.m.held_back());
        assert_eq!((t.w[0].published(), t.w[1].published()), (a, b), "whole batches consumed");
        assert_eq!(t.m.take_corrupt(), 0);
    }

    #[test]
    fn without_batches_a_record_is_never_taken_apart() {
        // The bench's floor sends records of its own layout, whose first
        // byte may be BATCH's.
        let mut t = Rings::new(1);
        let body = [BATCH, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
        let a = t.w[0].put(0, &body, 0);
        t.produce(0, a);
        assert_eq!(t.take_bodies(), vec![body.to_vec()]);
        assert_eq!(t.m.take_corrupt(), 0);
    }

    #[test]
    fn a_batch_held_back_halfway_goes_on_where_it_stopped() {
        let mut t = Rings::new(2);
        let _ = t.batches();
        let a = t.put_batch(0, 0, &[1, 5, 6]);
        let b = t.put(1, 0, 2, 0);
        let b2 = t.put(1, b, 3, BUSY);
        let b3 = t.put(1, b2, 4, 0);
        t.produce(0, a);
        t.produce(1, b3);
        // The busy record bounds ring 0 by what follows it, 4: the batch
        // stops after its first record.
        assert_eq!(t.take(), vec![1, 2]);
        assert!(t.m.held_back());
        assert_eq!(t.w[0].published(), 0, "the batch is not consumed yet");
        t.put(1, b, 3, 0);
        assert_eq!(t.take(), vec![3, 4, 5, 6]);
        assert_eq!(t.w[0].published(), a);
    }

    #[test]
    fn the_batch_kind_is_the_programs() {
        let events = include_str!("../../../bpf/events.h");
        let kinds = crate::decode::tests::c_enum(events, "ring_batch");
        assert!(kinds.contains(&("RING_BATCH".to_string(), u64::from(BATCH))), "{kinds:?}");
    }

    #[test]
    fn an_unsent_batch_holds_back_later_keys_of_the_other_rings() {
        let mut t = Rings::new(2);
        let set = t.batches();
        let a = t.put(0, 0, 1, 0);
        let a = t.put(0, a, 5, 0);
        let b = t.put(1, 0, 2, 0);
        let b = t.put(1, b, 3, 0);
        t.produce(0, a);
        t.produce(1, b);
        // Ring 1's batch holds 4 and up: 5 waits; ring 1's own go.
        set(1, 4);
        assert_eq!(t.take(), vec![1, 2, 3]);
        assert!(t.m.held_back());
        assert_eq!(t.m.oldest_unsent(), Some(4));
        // The batch is sent (into the ring, then emptied).
        let b = t.put_batch(1, b, &[4, 7]);
        t.produce(1, b);
        set(1, 0);
        assert_eq!(t.take(), vec![4, 5, 7]);
        assert!(!t.m.held_back());
        assert_eq!(t.m.oldest_unsent(), None);
    }

    #[test]
    fn a_batch_unsent_over_two_rounds_is_stale() {
        let mut t = Rings::new(3);
        let set = t.batches();
        set(0, 10);
        set(2, 20);
        t.take();
        assert_eq!(t.m.stale_batches(), Vec::<usize>::new(), "new at this round");
        set(2, 30);
        t.take();
        assert_eq!(t.m.stale_batches(), vec![0], "ring 2's batch was sent and another begun");
        assert_eq!(t.m.unsent_cpus(), vec![0, 2]);
        set(0, 0);
        set(2, 0);
        t.take();
        assert_eq!(t.m.stale_batches(), Vec::<usize>::new());
    }

    #[test]
    fn a_batch_that_cannot_be_sent_stops_holding_the_others_back() {
        let mut t = Rings::new(2);
        let set = t.batches();
        let a = t.put(0, 0, 5, 0);
        t.produce(0, a);
        set(1, 4);
        assert_eq!(t.take(), Vec::<u64>::new());
        assert!(t.m.held_back());
        t.m.unsendable(1);
        assert_eq!(t.take(), vec![5]);
        assert_eq!(t.m.oldest_unsent(), None);
    }

    #[test]
    fn a_batch_whose_record_overruns_it_is_counted_and_skipped() {
        let mut t = Rings::new(1);
        let _ = t.batches();
        let mut body = vec![BATCH, 0, 0, 0, 2, 0, 0, 0];
        body.extend_from_slice(&8u32.to_ne_bytes());
        body.extend_from_slice(&[0; 4]);
        body.extend_from_slice(&(1u64 << 8).to_ne_bytes());
        body.extend_from_slice(&64u32.to_ne_bytes());
        body.extend_from_slice(&[0; 4]);
        body.extend_from_slice(&(2u64 << 8).to_ne_bytes());
        let a = t.w[0].put(0, &body, 0);
        let a = t.put(0, a, 3, 0);
        t.produce(0, a);
        assert_eq!(t.take(), vec![1, 3]);
        assert_eq!(t.m.take_corrupt(), 1);
    }

    #[test]
    fn the_quiet_spell_leaves_half_a_ring_empty() {
        // 128 KiB a CPU (--ring-size 256k on two CPUs): 0.24 ms.
        assert_eq!(quiet_for(128 << 10).as_micros(), 244);
        assert_eq!(quiet_for(2 << 20), Duration::from_nanos(3_906_250));
        assert_eq!(quiet_for(16 << 20), QUIET_MAX);
        assert_eq!(quiet_for(0), Duration::ZERO);
    }

    /// The bound each ring's records meet is the smallest of the other
    /// rings' bounds, whichever order the bounds are lowered in.
    #[test]
    fn a_rings_bound_is_the_smallest_of_the_others() {
        let mut t = Rings::new(5);
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for round in 0..200 {
            t.m.bounds.fill(u64::MAX);
            (t.m.low, t.m.second) = ((u64::MAX, usize::MAX), u64::MAX);
            for _ in 0..(round % 12) {
                let r = xorshift(&mut seed);
                t.m.lower((r % 5) as usize, (r >> 8) % 64);
                for i in 0..5 {
                    let others = (0..5).filter(|&j| j != i).map(|j| t.m.bounds[j]).min().unwrap();
                    assert_eq!(t.m.bound_for(i), others, "ring {i}, bounds {:?}", t.m.bounds);
                }
            }
        }
    }

    /// Many rings, keys out of order within each ring (spans committed
    /// late), busy records coming and going: every record comes out once,
    /// and never before a record it could depend on: one from another
    /// ring committed before its key's clock read.
    #[test]
    fn batched_records_lose_nothing_and_keep_dependencies() {
        let n = 4;
        let mut t = Rings::new(n);
        let set = t.batches();
        let mut pos = vec![0u64; n];
        let mut got: Vec<u64> = Vec::new();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || xorshift(&mut seed);
        // Each record: (ring, key, visible at), as in the test below; a
        // batched record is visible once in its batch.
        let mut recs: Vec<(usize, u64, u64)> = Vec::new();
        // Each ring's batch: its records' (key, id).
        let mut batch: Vec<Vec<(u64, u64)>> = vec![Vec::new(); n];
        let rec = |key: u64, id: u64| {
            let mut body = (key << 8).to_ne_bytes().to_vec();
            body.extend_from_slice(&id.to_ne_bytes());
            body
        };
        let send = |t: &Rings, ring: usize, at: u64, b: &mut Vec<(u64, u64)>| {
            let mut body = vec![BATCH, 0, 0, 0];
            body.extend_from_slice(&(b.len() as u32).to_ne_bytes());
            for &(key, id) in b.iter() {
                body.extend_from_slice(&16u32.to_ne_bytes());
                body.extend_from_slice(&[0; 4]);
                body.extend_from_slice(&rec(key, id));
            }
            b.clear();
            t.w[ring].put(at, &body, 0)
        };
        let mut looking =
            Looking { rings: n, looked: Default::default(), pending: Default::default(), taken: Vec::new() };
        let mut ids = |t: &mut Rings| {
            t.m.consume_into(&mut looking);
            std::mem::take(&mut looking.taken)
        };
        for clock in 1..4000u64 {
            let ring = (rand() % n as u64) as usize;
            let id = recs.len() as u64;
            if rand() % 4 != 0 {
                // A call's record, keyed by its exit: into the batch.
                if batch[ring].is_empty() {
                    set(ring, clock);
                }
                batch[ring].push((clock, id));
                recs.push((ring, clock, clock));
                if batch[ring].len() == 8 {
                    pos[ring] = send(&t, ring, pos[ring], &mut batch[ring]);
                    t.produce(ring, pos[ring]);
                    set(ring, 0);
                }
            } else {
                // Straight (a span's earlier start at times): the batch first.
                let key = if rand() % 3 == 0 { clock.saturating_sub(rand() % 50) } else { clock };
                if !batch[ring].is_empty() {
                    pos[ring] = send(&t, ring, pos[ring], &mut batch[ring]);
                    set(ring, 0);
                }
                pos[ring] = t.w[ring].put(pos[ring], &rec(key, id), 0);
                t.produce(ring, pos[ring]);
                recs.push((ring, key, clock));
            }
            if rand() % 7 == 0 {
                got.extend(ids(&mut t));
                // The consumer has a stale batch sent.
                for r in t.m.stale_batches() {
                    pos[r] = send(&t, r, pos[r], &mut batch[r]);
                    t.produce(r, pos[r]);
                    set(r, 0);
                }
            }
            if pos.iter().zip(&t.m.rings).any(|(p, r)| p - r.pos > 2048) {
                got.extend(ids(&mut t));
            }
        }
        for r in 0..n {
            if !batch[r].is_empty() {
                pos[r] = send(&t, r, pos[r], &mut batch[r]);
                t.produce(r, pos[r]);
                set(r, 0);
            }
        }
        got.extend(ids(&mut t));
        every_record_once_in_dependency_order(&got, &recs);
    }

    /// A sink that checks what it is shown ahead: every record before it
    /// is taken, once, and no more than [`AHEAD`] of a ring's at a time.
    struct Looking {
        rings: usize,
        looked: std::collections::HashSet<u64>,
        pending: std::collections::HashSet<u64>,
        taken: Vec<u64>,
    }

    impl Sink for &mut Looking {
        fn take(&mut self, r: &[u8]) {
            let id = u64::from_ne_bytes(r[8..16].try_into().unwrap());
            assert!(self.pending.remove(&id), "record {id} taken without a look ahead");
            self.taken.push(id);
        }

        fn ahead(&mut self, r: &[u8]) {
            let id = u64::from_ne_bytes(r[8..16].try_into().unwrap());
            assert!(self.looked.insert(id), "record {id} looked at twice");
            self.pending.insert(id);
            assert!(self.pending.len() <= AHEAD as usize * self.rings, "looked too far ahead");
        }
    }

    /// `got` (record ids in the order taken) holds each of `recs` (ring,
    /// key, committed at) once, and each record after every record of
    /// another ring committed before its key was read.
    fn every_record_once_in_dependency_order(got: &[u64], recs: &[(usize, u64, u64)]) {
        assert_eq!(got.len(), recs.len(), "every record");
        let mut at = vec![usize::MAX; recs.len()];
        for (i, &id) in got.iter().enumerate() {
            assert_eq!(at[id as usize], usize::MAX, "record {id} twice");
            at[id as usize] = i;
        }
        let mut checked = 0;
        for (x, &(rx, kx, cx)) in recs.iter().enumerate() {
            for (y, &(ry, ky, _)) in recs.iter().enumerate() {
                if rx != ry && cx < ky {
                    checked += 1;
                    assert!(at[x] < at[y], "record {y} (key {ky}) came out before {x} (key {kx}) it may depend on");
                }
            }
        }
        assert!(checked > recs.len() * recs.len() / 4, "{checked} pairs");
    }

    #[test]
    fn many_rings_with_busy_records_lose_nothing_and_keep_dependencies() {
        let n = 6;
        let mut t = Rings::new(n);
        let mut pos = vec![0u64; n];
        let mut got: Vec<u64> = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || xorshift(&mut seed);
        // Each record: (ring, key, reserved at, committed at), in clock ticks.
        let mut recs: Vec<(usize, u64, u64, u64)> = Vec::new();
        let mut busy: Option<(usize, u64, u64)> = None;
        let put = |t: &Rings, ring: usize, at: u64, key: u64, id: u64, flags: u32| {
            let mut body = (key << 8).to_ne_bytes().to_vec();
            body.extend_from_slice(&id.to_ne_bytes());
            t.w[ring].put(at, &body, flags)
        };
        let mut looking =
            Looking { rings: n, looked: Default::default(), pending: Default::default(), taken: Vec::new() };
        let mut ids = |t: &mut Rings| {
            t.m.consume_into(&mut looking);
            std::mem::take(&mut looking.taken)
        };
        for clock in 1..4000u64 {
            // Records go behind a busy one too (programs that nest on its CPU).
            let ring = (rand() % n as u64) as usize;
            // Keys: mostly the clock, sometimes a span's earlier start.
            let key = if rand() % 10 == 0 { clock.saturating_sub(rand() % 50) } else { clock };
            let id = recs.len() as u64;
            if busy.is_none() && rand() % 20 == 0 {
                busy = Some((ring, pos[ring], id));
                recs.push((ring, key, clock, u64::MAX));
                pos[ring] = put(&t, ring, pos[ring], key, id, BUSY);
            } else {
                recs.push((ring, key, clock, clock));
                pos[ring] = put(&t, ring, pos[ring], key, id, 0);
            }
            t.produce(ring, pos[ring]);
            if rand() % 7 == 0 {
                got.extend(ids(&mut t));
            }
            if let Some((r, at, id)) = busy.filter(|_| rand() % 5 == 0) {
                recs[id as usize].3 = clock;
                put(&t, r, at, recs[id as usize].1, id, 0);
                busy = None;
            }
            // Keep each ring well under its 4096 bytes.
            if pos.iter().zip(&t.m.rings).any(|(p, r)| p - r.pos > 2048) {
                got.extend(ids(&mut t));
            }
        }
        if let Some((r, at, id)) = busy {
            recs[id as usize].3 = 4000;
            put(&t, r, at, recs[id as usize].1, id, 0);
        }
        got.extend(ids(&mut t));
        let recs: Vec<_> = recs.iter().map(|&(ring, key, _, committed)| (ring, key, committed)).collect();
        every_record_once_in_dependency_order(&got, &recs);
    }
}
