//! Slice and instant args: their keys, and the sink encoders give the
//! model to write them into, so that args are written straight into the
//! output (no per-event allocation) and named the same in every format.

/// Declares the arg keys: each with the name encoders write (its order is
/// the enum's, and [`ArgKey::ALL`] lists them all, counted here).
macro_rules! arg_keys {
    ($first:ident => $first_name:expr, $($(#[doc = $doc:expr])* $key:ident => $name:expr,)*) => {
        /// The arg keys the model uses. Encoders may intern them once per
        /// output sequence ([`ArgKey::ALL`]).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum ArgKey {
            $first = 1,
            $($(#[doc = $doc])* $key,)*
        }

        impl ArgKey {
            pub const ALL: [ArgKey; 1 + [$(stringify!($key)),*].len()] = [ArgKey::$first, $(ArgKey::$key),*];

            pub fn name(self) -> &'static str {
                match self {
                    ArgKey::$first => $first_name,
                    $(ArgKey::$key => $name,)*
                }
            }
        }
    };
}

arg_keys! {
    Path => "path",
    Fd => "fd",
    Offset => "offset",
    Requested => "requested",
    Returned => "returned",
    Errno => "errno",
    Tid => "tid",
    Flags => "flags",
    Mode => "mode",
    AbsPath => "absolute path",
    Dirfd => "dirfd",
    Kind => "file kind",
    InPath => "in path",
    OutPath => "out path",
    InFd => "in fd",
    OutFd => "out fd",
    Status => "status",
    Command => "command",
    Lost => "lost",
    Sector => "sector",
    Bytes => "bytes",
    QueueNs => "queue ns",
    DeviceNs => "device ns",
    Process => "process",
    RqFlags => "request flags",
    Disk => "disk",
    Rank => "rank",
    Value => "value",
    PhaseKind => "phase",
    Result => mltrace_log::labels::RESULT_ARG,
    Pid => "pid",
    Parent => "parent pid",
    Calls => "calls",
    LatencyNs => "latency ns",
    Interval => "interval",
    Syscall => "syscall",
    FileRead => "file: read by calls (run)",
    FileStorage => "file: read from storage (run)",
    FileHit => "file: page cache hit (run)",
    Opcode => "opcode",
    UserData => "user_data",
    CompleteTid => "completed in tid",
    AioCtx => "aio context",
    Nr => "nr",
    MinNr => "min_nr",
    FailedEvents => "failed events",
    Address => "address",
    Length => "length",
    NewLength => "new length",
    NewAddress => "new address",
    Prot => "prot",
    Verdict => "verdict",
    DataWait => "trainer: waiting for data",
    OnCpu => "trainer: on CPU",
    GpuIdle => "GPU idle",
    GpuIdleInDataWait => "GPU idle: in data waits",
    GpuEvent => "GPU event",
    /// The clock reason mask, the XID number, or how many ECC errors.
    GpuEventCode => "code",
    Peer => "peer",
    Stream => "stream",
    Event => "event",
    GpuWait => "gpu wait",
    OwnIo => "own file I/O",
    Comm => "communicator",
    NRanks => "ranks",
    NcclPeer => "peer rank",
    Count => "elements",
    /// A rename's new name, as passed and made absolute.
    NewPath => "new path",
    NewAbsPath => "new absolute path",
    /// A run-wide slice cut to a file's window: how long it is whole.
    Whole => "whole slice",
    /// The Python stack a call was made from, a frame a line.
    PythonStack => "python stack",
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
