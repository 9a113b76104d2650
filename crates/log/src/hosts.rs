//! Logs of several hosts (`mltrace merge`): which host each record is of.
//!
//! A merged log keeps the record format of a single host's log. Each host
//! gets a pid space: its index goes in the bits above Linux's largest
//! pid_max (2^22), so host 0's pids are unchanged and a log of one host is
//! the degenerate case. Every pid and tid field carries it, pid 0 too
//! (host 1's machine counters are pid `1 << 22`), so a record's host is
//! [`host_of`] any of its pids, and readers that know nothing of hosts
//! still see distinct processes. Timestamps are all on one clock: host 0's
//! BOOTTIME, unless [`crate::Header::hosts`] says which host's it is.

use serde::{Deserialize, Serialize};

use crate::header::{Header, Trailer};

/// Bits of a pid that are the host's own pid (PID_MAX_LIMIT is 2^22).
pub const PID_BITS: u32 = 22;
/// Hosts one log can hold.
pub const MAX_HOSTS: usize = 1 << (32 - PID_BITS);

/// Which host of a merged log a pid belongs to (0 for single-host logs).
#[inline]
pub fn host_of(pid: u32) -> usize {
    (pid >> PID_BITS) as usize
}

/// The pid as its own host knows it.
#[inline]
pub fn local_pid(pid: u32) -> u32 {
    pid & ((1 << PID_BITS) - 1)
}

/// Host `host`'s pid `pid` in a merged log.
#[inline]
pub fn global_pid(host: usize, pid: u32) -> u32 {
    ((host as u32) << PID_BITS) | local_pid(pid)
}

/// One host of a merged log, in [`Header::hosts`] (index = host number).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostInfo {
    /// Its name as the label shows it: the recording's host name (with
    /// `#2`... when one host has several logs).
    pub name: String,
    pub boot_id: String,
    pub kernel: String,
    pub cpu_count: u32,
    /// Nanoseconds added to its BOOTTIME stamps to put them on the log's
    /// clock (from the REALTIME anchors, plus any correction given).
    pub clock_offset_ns: i64,
    /// The part of that offset given by hand (`--offset HOST=...`).
    pub manual_offset_ns: i64,
    /// The file it was merged from.
    pub file: String,
    /// Its log's own header and trailer, as recorded.
    pub header: Header,
    pub trailer: Option<Trailer>,
}

impl Header {
    /// The hosts' names by host number: one (the header's own host) for a
    /// log of one host.
    pub fn host_names(&self) -> Vec<String> {
        if self.hosts.is_empty() {
            vec![self.host.clone()]
        } else {
            self.hosts.iter().map(|h| h.name.clone()).collect()
        }
    }

    /// Whether `pid` is a command mltrace started: on its host, for a
    /// merged log.
    pub fn is_root_pid(&self, pid: u32) -> bool {
        if self.hosts.is_empty() {
            return self.root_pid != 0 && pid == self.root_pid;
        }
        let h = host_of(pid);
        self.hosts.get(h).is_some_and(|x| x.header.root_pid != 0 && local_pid(pid) == x.header.root_pid)
    }

    /// Whether this log holds several hosts.
    pub fn is_merged(&self) -> bool {
        !self.hosts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::*;

    #[test]
    fn pids_carry_their_host() {
        let p = global_pid(3, 4_194_303);
        assert_eq!((host_of(p), local_pid(p)), (3, 4_194_303));
        assert_eq!(global_pid(0, 42), 42);
        assert_eq!(global_pid(1, 0), 1 << 22);
        let mut r = Record::SchedSwitch(SchedSwitch { prev_pid: 5, next_pid: 0, ..Default::default() });
        r.map_pids(|p| global_pid(2, p));
        let Record::SchedSwitch(s) = r else { unreachable!() };
        assert_eq!((s.prev_pid, s.next_pid, s.prev_tid), (global_pid(2, 5), 2 << 22, 2 << 22));
        let mut b = Record::Block(Block { ts: 100, cause_ts: 0, ..Default::default() });
        b.shift_ts(-50);
        let Record::Block(b) = b else { unreachable!() };
        assert_eq!((b.ts, b.cause_ts), (50, 0));
    }
}
