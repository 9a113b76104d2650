//! CUDA and NCCL calls, from their uprobes (ev_gpu, ev_nccl).

use mltrace_log::*;

use super::{read, KernelDecoder};
use crate::skel::types::{self, ev_gpu, ev_hdr, ev_nccl};

/// The events this module decodes (see [`super::Event`]).
pub(super) const EVENTS: &[super::Event] = &[
    super::Event {
        kind: GpuCall::CODE,
        min: size_of::<ev_gpu>(),
        commands_io: false,
        decode: |d, h, b, e| d.gpu(h, b, e),
    },
    super::Event {
        kind: Collective::CODE,
        min: size_of::<ev_nccl>(),
        commands_io: false,
        decode: |d, h, b, e| d.nccl(h, b, e),
    },
];

// events.h numbers the CUDA and NCCL calls as the log does.
const _: () = {
    use types::gpu_api as g;
    assert!(g::GPU_STREAM_SYNC.0 == GpuApi::StreamSynchronize as u32);
    assert!(g::GPU_CTX_SYNC.0 == GpuApi::CtxSynchronize as u32);
    assert!(g::GPU_EVENT_SYNC.0 == GpuApi::EventSynchronize as u32);
    assert!(g::GPU_MEMCPY.0 == GpuApi::Memcpy as u32);
    assert!(g::GPU_MEMCPY_DTOH.0 == GpuApi::MemcpyDtoH as u32);
    assert!(g::GPU_MEMCPY_HTOD.0 == GpuApi::MemcpyHtoD as u32);
    assert!(g::GPU_MEMCPY_DTOD.0 == GpuApi::MemcpyDtoD as u32);
    assert!(g::GPU_MEMCPY_PEER.0 == GpuApi::MemcpyPeer as u32);
    assert!(g::GPU_MEMCPY_2D.0 == GpuApi::Memcpy2D as u32);
    assert!(g::GPU_MEMCPY_3D.0 == GpuApi::Memcpy3D as u32);
    use types::gpu_counted as c;
    assert!(c::GPU_STREAM_QUERY.0 == GpuCounted::StreamQuery as u32);
    assert!(c::GPU_EVENT_QUERY.0 == GpuCounted::EventQuery as u32);
    assert!(c::GPU_LAUNCH_KERNEL.0 == GpuCounted::LaunchKernel as u32);
    assert!(c::GPU_GRAPH_LAUNCH.0 == GpuCounted::GraphLaunch as u32);
    use types::nccl_api as n;
    assert!(n::NCCL_ALL_REDUCE.0 == NcclOp::AllReduce as u32);
    assert!(n::NCCL_ALL_GATHER.0 == NcclOp::AllGather as u32);
    assert!(n::NCCL_REDUCE_SCATTER.0 == NcclOp::ReduceScatter as u32);
    assert!(n::NCCL_BROADCAST.0 == NcclOp::Broadcast as u32);
    assert!(n::NCCL_REDUCE.0 == NcclOp::Reduce as u32);
    assert!(n::NCCL_SEND.0 == NcclOp::Send as u32);
    assert!(n::NCCL_RECV.0 == NcclOp::Recv as u32);
    assert!(n::NCCL_GROUP_START.0 == NcclOp::GroupStart as u32);
    assert!(n::NCCL_GROUP_END.0 == NcclOp::GroupEnd as u32);
};

impl KernelDecoder {
    /// A CUDA call.
    pub(super) fn gpu(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_gpu = read(data);
        enc.push(&GpuCall {
            stack: h.stack,
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            call: GpuApi::from_u8(h.op),
            stream: e.stream,
            bytes: e.bytes,
            ret: e.ret,
        });
    }

    /// An NCCL collective or group call.
    pub(super) fn nccl(&mut self, h: &ev_hdr, data: &[u8], enc: &mut FrameEncoder) {
        let e: ev_nccl = read(data);
        enc.push(&Collective {
            stack: h.stack,
            ts: h.ts,
            dur: e.dur,
            pid: h.pid,
            tid: h.tid,
            op: NcclOp::from_u8(h.op),
            count: e.count,
            datatype: e.datatype,
            bytes: e.count.saturating_mul(nccl_type_size(e.datatype)),
            comm: e.comm,
            rank: e.rank,
            nranks: e.nranks,
            peer: e.peer,
            stream: e.stream,
            ret: e.ret,
        });
    }
}
