//! Loading and attaching the BPF programs, and the maps user space touches.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};

use crate::error::CaptureError;
use crate::features::{BlockRoute, KernelBtf};
use crate::skel::types::lost;
use crate::skel::{MltraceSkel, MltraceSkelBuilder};
use crate::syscalls;

pub use crate::skel::MltraceSkel as Skeleton;

/// Number of drop-counter slots (LOST__COUNT).
pub const LOST_SLOTS: usize = lost::LOST__COUNT.0 as usize;

#[derive(Clone, Debug)]
pub struct BpfConfig {
    /// Ring buffer size in bytes (rounded up to a power of two, at least a page).
    pub ring_bytes: u32,
    /// Record block I/O (system-wide).
    pub block: bool,
    /// Force a block route instead of the best the kernel has.
    pub block_route: Option<BlockRoute>,
}

impl Default for BpfConfig {
    fn default() -> Self {
        BpfConfig { ring_bytes: 32 << 20, block: true, block_route: None }
    }
}

/// The programs that will be (or were) attached, for the log header.
#[derive(Clone, Debug)]
pub struct Plan {
    pub block: Option<BlockRoute>,
}

impl Plan {
    pub fn new(cfg: &BpfConfig, kernel: &KernelBtf) -> Plan {
        let block = if cfg.block { cfg.block_route.or_else(|| BlockRoute::choose(kernel)) } else { None };
        Plan { block }
    }
}

fn bpf_err(stage: &str) -> impl FnOnce(libbpf_rs::Error) -> CaptureError + '_ {
    move |source| CaptureError::Bpf { stage: stage.to_string(), source }
}

/// Opens, configures, loads and attaches the programs of `plan`.
pub fn load<'obj>(
    storage: &'obj mut MaybeUninit<OpenObject>,
    cfg: &BpfConfig,
    plan: &Plan,
) -> Result<MltraceSkel<'obj>, CaptureError> {
    let builder = MltraceSkelBuilder::default();
    let mut open = builder.open(storage).map_err(bpf_err("opening the BPF object"))?;
    let ring = cfg.ring_bytes.max(4096).next_power_of_two();
    let rodata = open.maps.rodata_data.as_deref_mut().expect("rodata is mmapped");
    rodata.sys_op = syscalls::table();
    // Wake the consumer when an eighth of the ring is waiting; it also polls.
    rodata.wakeup_bytes = u64::from(ring / 8);
    rodata.blk_have_io_start = plan.block == Some(BlockRoute::IoStart);
    let progs = &mut open.progs;
    progs.block_io_start.set_autoload(plan.block == Some(BlockRoute::IoStart));
    progs.block_rq_insert.set_autoload(plan.block == Some(BlockRoute::RqInsert));
    progs.block_rq_issue.set_autoload(plan.block.is_some());
    progs.block_rq_complete.set_autoload(plan.block.is_some());
    open.maps.events.set_max_entries(ring).map_err(bpf_err("sizing the ring buffer"))?;
    let mut skel = open.load().map_err(bpf_err("loading the programs (verifier)"))?;
    skel.attach().map_err(bpf_err("attaching the programs"))?;
    Ok(skel)
}

/// Starts tracing process `pid` (its children are added by the kernel side).
pub fn trace_pid(skel: &MltraceSkel<'_>, pid: u32) -> Result<(), CaptureError> {
    skel.maps
        .traced
        .update(&pid.to_ne_bytes(), &1u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(bpf_err("adding the command to the traced set"))
}

/// The live traced processes, straight from the kernel side's set.
pub fn traced_pids(skel: &MltraceSkel<'_>) -> Vec<u32> {
    skel.maps.traced.keys().filter_map(|k| k.get(..4).map(|b| u32::from_ne_bytes(b.try_into().unwrap()))).collect()
}

/// Drop counters summed over CPUs, indexed like `mltrace_log::LostKind`.
pub fn read_lost(skel: &MltraceSkel<'_>) -> [u64; LOST_SLOTS] {
    let mut out = [0u64; LOST_SLOTS];
    for (k, slot) in out.iter_mut().enumerate() {
        if let Ok(Some(per_cpu)) = skel.maps.lost.lookup_percpu(&(k as u32).to_ne_bytes(), MapFlags::ANY) {
            *slot = per_cpu.iter().filter_map(|v| v.get(..8).map(|b| u64::from_ne_bytes(b.try_into().unwrap()))).sum();
        }
    }
    out
}

/// What is attached, for the log header and `mltrace doctor`.
pub fn probes(plan: &Plan) -> Vec<mltrace_log::Probe> {
    let names: Vec<&str> = syscalls::traced().iter().map(|(_, o)| op_name(o.0)).collect();
    let mut v = vec![
        mltrace_log::Probe {
            subsystem: "syscalls".into(),
            mechanism: "raw_tp".into(),
            detail: format!("sys_enter + sys_exit: {}", names.join(", ")),
        },
        mltrace_log::Probe {
            subsystem: "processes".into(),
            mechanism: "raw_tp".into(),
            detail: "sched_process_fork, sched_process_exec, sched_process_exit, task_rename".into(),
        },
    ];
    if let Some(route) = plan.block {
        v.push(mltrace_log::Probe {
            subsystem: "block".into(),
            mechanism: "raw_tp".into(),
            detail: route.describe().into(),
        });
    }
    v
}

fn op_name(o: u32) -> &'static str {
    use crate::skel::types::op;
    match op(o) {
        op::OP_READ => "read",
        op::OP_PREAD64 => "pread64",
        op::OP_READV => "readv",
        op::OP_PREADV => "preadv",
        op::OP_PREADV2 => "preadv2",
        op::OP_WRITE => "write",
        op::OP_PWRITE64 => "pwrite64",
        op::OP_WRITEV => "writev",
        op::OP_PWRITEV => "pwritev",
        op::OP_PWRITEV2 => "pwritev2",
        op::OP_OPEN => "open",
        op::OP_OPENAT => "openat",
        op::OP_OPENAT2 => "openat2",
        op::OP_CREAT => "creat",
        op::OP_CLOSE => "close",
        op::OP_SENDFILE => "sendfile",
        op::OP_COPY_FILE_RANGE => "copy_file_range",
        op::OP_FSYNC => "fsync",
        op::OP_FDATASYNC => "fdatasync",
        op::OP_SYNC_FILE_RANGE => "sync_file_range",
        _ => "?",
    }
}
