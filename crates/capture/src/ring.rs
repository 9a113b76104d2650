//! The consumer's side of a BPF ring buffer, read in place.
//!
//! libbpf's consumer publishes its position after every record, and every
//! reservation on a producing CPU reads that position. This reader
//! publishes it once per batch (and every [`PUBLISH_BYTES`] within one, so
//! a long drain still frees space as it goes); on the 2-vCPU development
//! VM that made no measurable difference. It reads several rings (the
//! bench's floor has one per CPU) and hands each record over without a
//! callback through C.
//!
//! The layout is the kernel's (kernel/bpf/ringbuf.c): a page with the
//! consumer position (the only page user space may write), a page with the
//! producer position, then the data, mapped twice in a row so that a record
//! that wraps is contiguous. Each record starts with an 8-byte header: its
//! length with a busy and a discard bit, and a page offset user space does
//! not need. Records are 8-byte aligned.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HEADER: u64 = 8;
/// Consumed bytes after which a batch publishes its position anyway.
pub const PUBLISH_BYTES: u64 = 1 << 20;

pub struct Ring {
    consumer: *mut u8,
    /// The producer's page and the data twice, read-only.
    rest: *mut u8,
    page: usize,
    size: u64,
    epoll: OwnedFd,
    /// Our position (the kernel's copy is published from it).
    pos: u64,
    /// Headers with a length no record can have, each skipped with what
    /// the producer had sent after it (never seen: the kernel writes them).
    pub corrupt: u64,
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

impl Ring {
    /// Maps the ring buffer map `map` of `size` bytes (its max_entries, a
    /// power of two).
    pub fn new(map: impl AsFd, size: u64) -> io::Result<Ring> {
        if !size.is_power_of_two() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ring size not a power of two"));
        }
        let fd = map.as_fd().as_raw_fd();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
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
        let ring = Ring { consumer, rest, page, size, epoll: epoll()?, pos, corrupt: 0 };
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: 0 };
        // SAFETY: both fds are open; ev lives across the call.
        check(unsafe { libc::epoll_ctl(ring.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        Ok(ring)
    }

    fn producer(&self) -> u64 {
        // SAFETY: the producer's page is mapped and 8-aligned.
        unsafe { (*self.rest.cast::<AtomicU64>()).load(Ordering::Acquire) }
    }

    fn publish(&self) {
        // SAFETY: the consumer's page is mapped, writable and 8-aligned.
        unsafe { (*self.consumer.cast::<AtomicU64>()).store(self.pos, Ordering::Release) }
    }

    /// Waits up to `timeout` for the kernel's wake-up; whether it came.
    pub fn poll(&self, timeout: Duration) -> bool {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: the epoll fd is open; room for one event.
        unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), &mut ev, 1, ms) > 0 }
    }

    /// Hands each record sent so far to `f`, in order; stops at a record
    /// still being written. Returns how many.
    pub fn consume(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let data = self.page;
        let mut n = 0;
        let mut published = self.pos;
        loop {
            let prod = self.producer();
            if self.pos >= prod {
                break;
            }
            while self.pos < prod {
                let at = data + (self.pos & (self.size - 1)) as usize;
                // SAFETY: `at` is inside the first copy of the data; the
                // header is 8-aligned.
                let len = unsafe { (*self.rest.add(at).cast::<AtomicU32>()).load(Ordering::Acquire) };
                if len & BUSY != 0 {
                    self.publish();
                    return n;
                }
                let body = (len & !(BUSY | DISCARD)) as u64;
                if body + HEADER > self.size {
                    // Not a record the kernel could have written: what
                    // follows cannot be told apart either. Skipped, counted.
                    self.corrupt += 1;
                    self.pos = prod;
                    break;
                }
                if len & DISCARD == 0 {
                    // SAFETY: a record is at most the ring's size, and the
                    // data is mapped twice in a row: contiguous even when
                    // it wraps. The producer does not write it again until
                    // our position is published past it.
                    let rec = unsafe { std::slice::from_raw_parts(self.rest.add(at + HEADER as usize), body as usize) };
                    f(rec);
                    n += 1;
                }
                self.pos += (body + HEADER + 7) & !7;
                if self.pos - published >= PUBLISH_BYTES {
                    self.publish();
                    published = self.pos;
                }
            }
        }
        self.publish();
        n
    }
}

fn epoll() -> io::Result<OwnedFd> {
    // SAFETY: epoll_create1 has no preconditions; the fd is ours.
    Ok(unsafe { OwnedFd::from_raw_fd(check(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) })
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

    /// A ring laid out as the kernel lays one out, over a memfd: the data
    /// mapped twice in a row, and a writer that plays the producer.
    struct Fake {
        ring: Ring,
        /// The producer's page and the data (once), writable.
        w: *mut u8,
    }

    impl Fake {
        fn new(size: usize) -> Fake {
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
                Fake {
                    ring: Ring { consumer, rest, page, size: size as u64, epoll: epoll().unwrap(), pos: 0, corrupt: 0 },
                    w,
                }
            }
        }

        /// Writes a record of `body` at producer position `at` (its
        /// header with `flags`), wrapping as the kernel does.
        fn put(&self, at: u64, body: &[u8], flags: u32) -> u64 {
            let (page, size) = (self.ring.page, self.ring.size);
            let mut rec = (body.len() as u32 | flags).to_ne_bytes().to_vec();
            rec.extend_from_slice(&[0; 4]);
            rec.extend_from_slice(body);
            for (i, b) in rec.iter().enumerate() {
                // SAFETY: inside the writable data.
                unsafe { *self.w.add(page + ((at + i as u64) % size) as usize) = *b };
            }
            at + ((rec.len() as u64 + 7) & !7)
        }

        fn produce(&self, pos: u64) {
            // SAFETY: the producer's page, writable.
            unsafe { *self.w.cast::<u64>() = pos };
        }

        fn published(&self) -> u64 {
            // SAFETY: the consumer's page.
            unsafe { *self.ring.consumer.cast::<u64>() }
        }
    }

    fn drain(f: &mut Fake) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        f.ring.consume(|r| got.push(r.to_vec()));
        got
    }

    #[test]
    fn reads_records_in_order_across_the_wrap_and_skips_discarded_ones() {
        let mut f = Fake::new(4096);
        let mut p = 0;
        let mut want = Vec::new();
        // Past the end of the data twice, with records that straddle it.
        for i in 0..400u32 {
            let body: Vec<u8> = (0..(i % 37 + 1)).map(|j| (i + j) as u8).collect();
            let discard = i % 5 == 3;
            p = f.put(p, &body, if discard { DISCARD } else { 0 });
            if !discard {
                want.push(body);
            }
            if i % 10 == 9 {
                f.produce(p);
                let got = drain(&mut f);
                assert_eq!(got, std::mem::take(&mut want), "at record {i}");
                assert_eq!(f.published(), p, "the position is published");
            }
        }
        assert!(p > 2 * 4096);
    }

    #[test]
    fn an_impossible_length_is_counted_and_skipped_to_what_was_sent() {
        let mut f = Fake::new(4096);
        let a = f.put(0, b"first", 0);
        let bad = (8192u32).to_ne_bytes();
        // SAFETY: inside the writable data.
        unsafe { std::ptr::copy_nonoverlapping(bad.as_ptr(), f.w.add(f.ring.page + a as usize), 4) };
        f.produce(a + 64);
        assert_eq!(drain(&mut f), vec![b"first".to_vec()]);
        assert_eq!((f.ring.corrupt, f.published()), (1, a + 64));
        let c = f.put(a + 64, b"after", 0);
        f.produce(c);
        assert_eq!(drain(&mut f), vec![b"after".to_vec()]);
    }

    #[test]
    fn stops_at_a_record_still_being_written() {
        let mut f = Fake::new(4096);
        let a = f.put(0, b"first", 0);
        let b = f.put(a, b"second", BUSY);
        let c = f.put(b, b"third", 0);
        f.produce(c);
        assert_eq!(drain(&mut f), vec![b"first".to_vec()]);
        assert_eq!(f.published(), a, "not past the busy record");
        f.put(a, b"second", 0);
        assert_eq!(drain(&mut f), vec![b"second".to_vec(), b"third".to_vec()]);
        assert_eq!(f.published(), c);
    }
}
