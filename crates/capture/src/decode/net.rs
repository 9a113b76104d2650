//! Socket calls and their peers (ev_net).

use mltrace_log::*;

use super::{read, KernelDecoder};
use crate::skel::types::{self, ev_hdr, ev_net, op};

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[super::Event {
    kind: NetCall::CODE,
    min: size_of::<ev_net>(),
    commands_io: true,
    decode: |d, h, b, e| d.net(h, b, e),
}];

/// BPF's NETF_* bits (events.h) to the log's [`net`] bits.
fn net_flags(f: u16) -> u8 {
    use types::net_bits as n;
    let f = u32::from(f);
    let mut out = 0;
    for (from, to) in [
        (n::NETF_PEER_USER, net::PEER_FROM_CALL),
        (n::NETF_PEER_SOCK, net::PEER_FROM_SOCKET),
        (n::NETF_PARTIAL, net::PARTIAL),
    ] {
        if f & from.0 != 0 {
            out |= to;
        }
    }
    out
}

pub(super) fn net_op(o: u8) -> NetOp {
    match op(o.into()) {
        op::OP_SENDTO => NetOp::Sendto,
        op::OP_SENDMSG => NetOp::Sendmsg,
        op::OP_RECVMSG => NetOp::Recvmsg,
        op::OP_SENDMMSG => NetOp::Sendmmsg,
        op::OP_RECVMMSG => NetOp::Recvmmsg,
        _ => NetOp::Recvfrom,
    }
}

/// The peer as people write it, into `out`: `10.0.0.2:8080`,
/// `[::1]:8080`, a unix socket's path, or nothing when unknown (an
/// abstract unix socket's name starts with a NUL, so it reads as empty).
fn net_peer(e: &ev_net, out: &mut Vec<u8>) {
    use std::io::Write;
    const AF_UNIX: u16 = 1;
    const AF_INET: u16 = 2;
    const AF_INET6: u16 = 10;
    out.clear();
    let _ = match e.family {
        AF_INET => {
            let a = std::net::Ipv4Addr::new(e.addr[0], e.addr[1], e.addr[2], e.addr[3]);
            write!(out, "{a}:{}", e.port)
        }
        AF_INET6 => {
            let a = std::net::Ipv6Addr::from(e.addr);
            match a.to_ipv4_mapped() {
                Some(v4) => write!(out, "{v4}:{}", e.port),
                None => write!(out, "[{a}]:{}", e.port),
            }
        }
        AF_UNIX => {
            out.extend(e.path.iter().take_while(|&&c| c != 0).map(|&c| c as u8));
            Ok(())
        }
        _ => Ok(()),
    };
}

impl KernelDecoder {
    /// A send or receive call.
    pub(super) fn net(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_net = read(data);
        let (path, _) = self.file(e.file, enc);
        net_peer(&e, &mut self.peer_buf);
        let peer = enc.intern(&self.peer_buf);
        enc.push(&NetCall {
            stack: h.stack,
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: net_op(h.op),
            fd: e.fd,
            path,
            peer,
            requested: e.requested,
            ret: e.ret,
            bytes: e.bytes,
            flags: net_flags(h.flags),
        });
    }
}
