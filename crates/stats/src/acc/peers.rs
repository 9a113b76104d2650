//! Traffic on sockets, per process and per peer: what a job sent to and
//! received from an object store, a parameter server or another rank.

use std::collections::HashMap;

use mltrace_log::{FileKind, Io, NetCall};

use crate::Stats;
use mltrace_log::{Accept, Frame, Record};

/// One process's bytes on sockets: through the send/recv calls and plain
/// read/write on a socket fd.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SocketBytes {
    pub send_bytes: u64,
    pub recv_bytes: u64,
    /// Send and receive calls (not plain reads and writes).
    pub calls: u64,
}

impl SocketBytes {
    pub fn net(&mut self, r: &NetCall) {
        self.calls += 1;
        if r.ret >= 0 {
            if r.op.is_send() {
                self.send_bytes += r.bytes;
            } else {
                self.recv_bytes += r.bytes;
            }
        }
    }

    /// Bytes a summary's calls moved on a socket.
    pub fn summary(&mut self, kind: FileKind, write: bool, bytes: u64) {
        if kind != FileKind::Socket {
            return;
        }
        if write {
            self.send_bytes += bytes;
        } else {
            self.recv_bytes += bytes;
        }
    }

    pub fn io(&mut self, r: &Io) {
        if r.kind != FileKind::Socket || r.ret <= 0 {
            return;
        }
        if r.op.is_write() {
            self.send_bytes += r.ret as u64;
        } else {
            self.recv_bytes += r.ret as u64;
        }
    }
}

/// Traffic with one peer (`10.0.0.2:8080`, `[::1]:8080`, a unix socket's path).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeerStats {
    pub send_bytes: u64,
    pub recv_bytes: u64,
    pub calls: u64,
}

/// Every peer the send/recv calls named, by address.
#[derive(Clone, Debug, Default)]
pub struct Peers(pub HashMap<String, PeerStats>);

impl Peers {
    pub fn add(&mut self, peer: &str, r: &NetCall) {
        if peer.is_empty() {
            return;
        }
        // Owned once per peer, not per call.
        if !self.0.contains_key(peer) {
            self.0.insert(peer.to_string(), PeerStats::default());
        }
        let p = self.0.get_mut(peer).unwrap();
        p.calls += 1;
        if r.ret >= 0 {
            if r.op.is_send() {
                p.send_bytes += r.bytes;
            } else {
                p.recv_bytes += r.bytes;
            }
        }
    }

    /// By bytes moved, most first.
    pub fn sorted(&self) -> Vec<(&String, &PeerStats)> {
        let mut v: Vec<_> = self.0.iter().collect();
        v.sort_by(|a, b| (b.1.send_bytes + b.1.recv_bytes).cmp(&(a.1.send_bytes + a.1.recv_bytes)).then(a.0.cmp(b.0)));
        v
    }
}

// What its records add to the figures (see [`mltrace_log::Accept`]).

impl Accept<NetCall> for Stats {
    fn accept(&mut self, f: &Frame<'_>, _rec: &Record, r: NetCall) {
        self.calls.add("", r.op.name(), Some(r.requested), r.dur);
        self.proc(r.pid).sockets.net(&r);
        self.tables.peers.add(&f.str_lossy(r.peer), &r);
    }
}
