//! Slice and instant args: their keys, and the sink encoders give the
//! model to write them into, so that args are written straight into the
//! output (no per-event allocation) and named the same in every format.

/// The arg keys the model uses. Encoders may intern them once per output
/// sequence ([`ArgKey::ALL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ArgKey {
    Path = 1,
    Fd,
    Offset,
    Requested,
    Returned,
    Errno,
    Tid,
    Flags,
    Mode,
    AbsPath,
    Dirfd,
    Kind,
    InPath,
    OutPath,
    InFd,
    OutFd,
    Status,
    Command,
    Lost,
    Sector,
    Bytes,
    QueueNs,
    DeviceNs,
    Process,
    RqFlags,
    Disk,
    Rank,
    Value,
    PhaseKind,
    Result,
    Pid,
    Parent,
    Calls,
    LatencyNs,
    Interval,
    Syscall,
    FileRead,
    FileStorage,
    FileHit,
    Opcode,
    UserData,
    CompleteTid,
    AioCtx,
    Nr,
    MinNr,
    FailedEvents,
    Address,
    Length,
    NewLength,
    NewAddress,
    Prot,
    Verdict,
    DataWait,
    OnCpu,
    GpuIdle,
    GpuIdleInDataWait,
    GpuEvent,
    GpuEventCode,
    Peer,
    Stream,
    Event,
    GpuWait,
    OwnIo,
    Comm,
    NRanks,
    NcclPeer,
    Count,
    Whole,
}

impl ArgKey {
    pub const ALL: [ArgKey; 68] = [
        ArgKey::Path,
        ArgKey::Fd,
        ArgKey::Offset,
        ArgKey::Requested,
        ArgKey::Returned,
        ArgKey::Errno,
        ArgKey::Tid,
        ArgKey::Flags,
        ArgKey::Mode,
        ArgKey::AbsPath,
        ArgKey::Dirfd,
        ArgKey::Kind,
        ArgKey::InPath,
        ArgKey::OutPath,
        ArgKey::InFd,
        ArgKey::OutFd,
        ArgKey::Status,
        ArgKey::Command,
        ArgKey::Lost,
        ArgKey::Sector,
        ArgKey::Bytes,
        ArgKey::QueueNs,
        ArgKey::DeviceNs,
        ArgKey::Process,
        ArgKey::RqFlags,
        ArgKey::Disk,
        ArgKey::Rank,
        ArgKey::Value,
        ArgKey::PhaseKind,
        ArgKey::Result,
        ArgKey::Pid,
        ArgKey::Parent,
        ArgKey::Calls,
        ArgKey::LatencyNs,
        ArgKey::Interval,
        ArgKey::Syscall,
        ArgKey::FileRead,
        ArgKey::FileStorage,
        ArgKey::FileHit,
        ArgKey::Opcode,
        ArgKey::UserData,
        ArgKey::CompleteTid,
        ArgKey::AioCtx,
        ArgKey::Nr,
        ArgKey::MinNr,
        ArgKey::FailedEvents,
        ArgKey::Address,
        ArgKey::Length,
        ArgKey::NewLength,
        ArgKey::NewAddress,
        ArgKey::Prot,
        ArgKey::Verdict,
        ArgKey::DataWait,
        ArgKey::OnCpu,
        ArgKey::GpuIdle,
        ArgKey::GpuIdleInDataWait,
        ArgKey::GpuEvent,
        ArgKey::GpuEventCode,
        ArgKey::Peer,
        ArgKey::Stream,
        ArgKey::Event,
        ArgKey::GpuWait,
        ArgKey::OwnIo,
        ArgKey::Comm,
        ArgKey::NRanks,
        ArgKey::NcclPeer,
        ArgKey::Count,
        ArgKey::Whole,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ArgKey::Path => "path",
            ArgKey::Fd => "fd",
            ArgKey::Offset => "offset",
            ArgKey::Requested => "requested",
            ArgKey::Returned => "returned",
            ArgKey::Errno => "errno",
            ArgKey::Tid => "tid",
            ArgKey::Flags => "flags",
            ArgKey::Mode => "mode",
            ArgKey::AbsPath => "absolute path",
            ArgKey::Dirfd => "dirfd",
            ArgKey::Kind => "file kind",
            ArgKey::InPath => "in path",
            ArgKey::OutPath => "out path",
            ArgKey::InFd => "in fd",
            ArgKey::OutFd => "out fd",
            ArgKey::Status => "status",
            ArgKey::Command => "command",
            ArgKey::Lost => "lost",
            ArgKey::Sector => "sector",
            ArgKey::Bytes => "bytes",
            ArgKey::QueueNs => "queue ns",
            ArgKey::DeviceNs => "device ns",
            ArgKey::Process => "process",
            ArgKey::RqFlags => "request flags",
            ArgKey::Disk => "disk",
            ArgKey::Rank => "rank",
            ArgKey::Value => "value",
            ArgKey::PhaseKind => "phase",
            ArgKey::Result => mltrace_log::labels::RESULT_ARG,
            ArgKey::Pid => "pid",
            ArgKey::Parent => "parent pid",
            ArgKey::Calls => "calls",
            ArgKey::LatencyNs => "latency ns",
            ArgKey::Interval => "interval",
            ArgKey::Syscall => "syscall",
            ArgKey::FileRead => "file: read by calls (run)",
            ArgKey::FileStorage => "file: read from storage (run)",
            ArgKey::FileHit => "file: page cache hit (run)",
            ArgKey::Opcode => "opcode",
            ArgKey::UserData => "user_data",
            ArgKey::CompleteTid => "completed in tid",
            ArgKey::AioCtx => "aio context",
            ArgKey::Nr => "nr",
            ArgKey::MinNr => "min_nr",
            ArgKey::FailedEvents => "failed events",
            ArgKey::Address => "address",
            ArgKey::Length => "length",
            ArgKey::NewLength => "new length",
            ArgKey::NewAddress => "new address",
            ArgKey::Prot => "prot",
            ArgKey::Verdict => "verdict",
            ArgKey::DataWait => "trainer: waiting for data",
            ArgKey::OnCpu => "trainer: on CPU",
            ArgKey::GpuIdle => "GPU idle",
            ArgKey::GpuIdleInDataWait => "GPU idle: in data waits",
            ArgKey::GpuEvent => "GPU event",
            // The clock reason mask, the XID number, or how many ECC errors.
            ArgKey::GpuEventCode => "code",
            ArgKey::Peer => "peer",
            ArgKey::Stream => "stream",
            ArgKey::Event => "event",
            ArgKey::GpuWait => "gpu wait",
            ArgKey::OwnIo => "own file I/O",
            ArgKey::Comm => "communicator",
            ArgKey::NRanks => "ranks",
            ArgKey::NcclPeer => "peer rank",
            ArgKey::Count => "elements",
            // A run-wide slice cut to a file's window: how long it is whole.
            ArgKey::Whole => "whole slice",
        }
    }
}

/// Where an encoder takes args. Errors are the encoder's to keep and
/// report when the event is done.
pub trait ArgSink {
    fn int(&mut self, k: ArgKey, v: i64);
    fn uint(&mut self, k: ArgKey, v: u64);
    fn str(&mut self, k: ArgKey, v: &[u8]);
    /// A NUL-separated argument vector.
    fn argv(&mut self, k: ArgKey, v: &[u8]) {
        self.str(k, v)
    }
}

/// An event's args, written into whatever sink an encoder has (static
/// dispatch: args are on the hot path of every slice).
pub trait Args {
    fn write<S: ArgSink>(&self, s: &mut S);
}

/// No args.
pub struct NoArgs;

impl Args for NoArgs {
    fn write<S: ArgSink>(&self, _: &mut S) {}
}

/// Args from a closure, for rare events (phases, marks, lost events).
pub struct FnArgs<F>(pub F);

impl<F: Fn(&mut dyn ArgSink)> Args for FnArgs<F> {
    fn write<S: ArgSink>(&self, s: &mut S) {
        (self.0)(s)
    }
}

/// An arg value kept beyond its record (the overview's slowest calls).
#[derive(Clone, Debug, PartialEq)]
pub enum OwnedVal {
    Int(i64),
    Uint(u64),
    Str(Vec<u8>),
    Argv(Vec<u8>),
}

/// Args copied out of a record, written back later.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OwnedArgs(pub Vec<(ArgKey, OwnedVal)>);

impl ArgSink for OwnedArgs {
    fn int(&mut self, k: ArgKey, v: i64) {
        self.0.push((k, OwnedVal::Int(v)));
    }
    fn uint(&mut self, k: ArgKey, v: u64) {
        self.0.push((k, OwnedVal::Uint(v)));
    }
    fn str(&mut self, k: ArgKey, v: &[u8]) {
        self.0.push((k, OwnedVal::Str(v.to_vec())));
    }
    fn argv(&mut self, k: ArgKey, v: &[u8]) {
        self.0.push((k, OwnedVal::Argv(v.to_vec())));
    }
}

impl Args for OwnedArgs {
    fn write<S: ArgSink>(&self, s: &mut S) {
        for (k, v) in &self.0 {
            match v {
                OwnedVal::Int(i) => s.int(*k, *i),
                OwnedVal::Uint(u) => s.uint(*k, *u),
                OwnedVal::Str(b) => s.str(*k, b),
                OwnedVal::Argv(b) => s.argv(*k, b),
            }
        }
    }
}
