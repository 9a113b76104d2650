//! What the running kernel offers, read from its BTF: which raw
//! tracepoints exist decides which programs load (and `mltrace doctor`
//! reports the same choices).

use libbpf_rs::btf::types::{DataSec, Func, MemberAttr, Struct, Typedef, Var};
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};

use crate::probe_skel::ProbeSkelBuilder;

/// Whether this kernel loads and attaches an fentry program (`fentry`) or
/// a kprobe: learnt for real, since both depend on the kernel's
/// configuration and the machine's security settings, not its version.
pub fn program_loads(fentry: bool) -> Result<(), String> {
    let mut storage = std::mem::MaybeUninit::<libbpf_rs::OpenObject>::uninit();
    let mut open = ProbeSkelBuilder::default().open(&mut storage).map_err(|e| e.to_string())?;
    open.progs.probe_fentry.set_autoload(fentry);
    open.progs.probe_kprobe.set_autoload(!fentry);
    open.progs.probe_uprobe.set_autoload(false);
    let mut skel = open.load().map_err(|e| format!("load: {e}"))?;
    skel.attach().map_err(|e| format!("attach: {e}"))?;
    Ok(())
}

pub struct KernelBtf {
    btf: Option<Btf<'static>>,
}

impl KernelBtf {
    pub fn load() -> Self {
        KernelBtf { btf: Btf::from_vmlinux().ok() }
    }

    pub fn available(&self) -> bool {
        self.btf.is_some()
    }

    /// Whether the kernel's BTF has function `name` (what fentry attaches to).
    pub fn has_function(&self, name: &str) -> bool {
        self.btf.as_ref().is_some_and(|b| b.type_by_name::<Func<'_>>(name).is_some())
    }

    /// Whether the kernel has the tracepoint `name` (it then has a
    /// `btf_trace_<name>` typedef, which raw_tp and tp_btf attach by).
    pub fn has_tracepoint(&self, name: &str) -> bool {
        self.btf.as_ref().is_some_and(|b| b.type_by_name::<Typedef<'_>>(&format!("btf_trace_{name}")).is_some())
    }
}

impl KernelBtf {
    /// Where the kernel's per-CPU variables among `names` are in its
    /// per-CPU section (BTF lists them from pahole 1.18; Debian's 5.10
    /// has none): `None` when the section is not in the BTF.
    pub fn percpu<'n>(&self, names: &[&'n str]) -> Option<Vec<(&'n str, u64)>> {
        let btf = self.btf.as_ref()?;
        let sec = btf.type_by_name::<DataSec<'_>>(".data..percpu")?;
        let mut out = Vec::new();
        for v in sec.iter() {
            let Some(name) = btf.type_by_id::<Var<'_>>(v.ty).and_then(|t| t.name()) else { continue };
            if let Some(&n) = names.iter().find(|n| name == std::ffi::OsStr::new(n)) {
                out.push((n, u64::from(v.offset)));
            }
        }
        Some(out)
    }

    /// The byte offset of `member` in the kernel's struct `name`.
    pub fn member_offset(&self, name: &str, member: &str) -> Option<u64> {
        let btf = self.btf.as_ref()?;
        let s = btf.type_by_name::<Struct<'_>>(name)?;
        let m = s.iter().find(|m| m.name.is_some_and(|n| n == member))?;
        let bits = match m.attr {
            MemberAttr::Normal { offset } | MemberAttr::BitField { offset, .. } => offset,
        };
        Some(u64::from(bits / 8))
    }

    /// Whether the kernel's struct `name` has a member `member`.
    pub fn has_member(&self, name: &str, member: &str) -> bool {
        self.btf.as_ref().is_some_and(|b| {
            b.type_by_name::<Struct<'_>>(name).is_some_and(|s| s.iter().any(|m| m.name.is_some_and(|n| n == member)))
        })
    }
}

/// How pages brought into the page cache are seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageCacheRoute {
    /// filemap:mm_filemap_add_to_page_cache with the folio's order (5.17+).
    Folios,
    /// The same tracepoint without an order: one page per insertion.
    Pages,
}

impl PageCacheRoute {
    pub fn choose(k: &KernelBtf) -> Option<PageCacheRoute> {
        if !k.has_tracepoint("mm_filemap_add_to_page_cache") {
            return None;
        }
        Some(if k.has_member("trace_event_raw_mm_filemap_op_page_cache", "order") {
            PageCacheRoute::Folios
        } else {
            PageCacheRoute::Pages
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            PageCacheRoute::Folios => "filemap:mm_filemap_add_to_page_cache, PAGE_SIZE << order per insertion",
            PageCacheRoute::Pages => {
                "filemap:mm_filemap_add_to_page_cache, one page per insertion (no folio order on this kernel)"
            }
        }
    }
}

/// How major page faults are seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultRoute {
    /// perf's PAGE_FAULTS_MAJ software event per CPU, with a BPF program,
    /// and filemap:mm_filemap_fault for when and where each stall began.
    PerfAndFilemap,
    /// The perf event alone: each fault's end and address.
    Perf,
}

impl FaultRoute {
    pub fn choose(k: &KernelBtf) -> FaultRoute {
        if k.has_tracepoint("mm_filemap_fault") {
            FaultRoute::PerfAndFilemap
        } else {
            FaultRoute::Perf
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            FaultRoute::PerfAndFilemap => {
                "perf PAGE_FAULTS_MAJ (per CPU, sample period 1) + filemap:mm_filemap_fault: \
                 each stall from its start, with its file and page"
            }
            FaultRoute::Perf => {
                "perf PAGE_FAULTS_MAJ (per CPU, sample period 1): each fault at its end \
                 (no filemap:mm_filemap_fault here)"
            }
        }
    }
}

/// Where block requests are seen to start, in the submitter's context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockRoute {
    /// block_io_start (Linux 6.5+): every request, where it is accounted.
    IoStart,
    /// block_rq_insert, or block_rq_issue for requests issued directly.
    RqInsert,
}

impl BlockRoute {
    pub fn choose(k: &KernelBtf) -> Option<BlockRoute> {
        let issue_complete = k.has_tracepoint("block_rq_issue") && k.has_tracepoint("block_rq_complete");
        if !issue_complete {
            return None;
        }
        Some(if k.has_tracepoint("block_io_start") { BlockRoute::IoStart } else { BlockRoute::RqInsert })
    }

    pub fn describe(self) -> &'static str {
        match self {
            BlockRoute::IoStart => "block_io_start, block_rq_issue, block_rq_complete",
            BlockRoute::RqInsert => "block_rq_insert, block_rq_issue, block_rq_complete",
        }
    }
}

/// How io_uring requests are seen: a submission tracepoint and
/// io_uring_complete, both with the request's pointer to pair them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UringRoute {
    /// io_uring_submit_req (Linux 6.0+).
    SubmitReq,
    /// io_uring_submit_sqe with a request pointer (5.18, 5.19).
    SubmitSqe,
}

impl UringRoute {
    /// The route, or why io_uring requests cannot be recorded here.
    pub fn choose(k: &KernelBtf) -> Result<UringRoute, &'static str> {
        if !k.has_tracepoint("io_uring_complete") {
            return Err("no io_uring tracepoints (a kernel without io_uring)");
        }
        if !k.has_member("trace_event_raw_io_uring_complete", "req") {
            return Err("io_uring_complete has no request pointer (kernels before 5.18): \
                        completions cannot be paired with submissions");
        }
        let with_req = |tp: &str| k.has_tracepoint(tp) && k.has_member(&format!("trace_event_raw_{tp}"), "req");
        if with_req("io_uring_submit_req") {
            Ok(UringRoute::SubmitReq)
        } else if with_req("io_uring_submit_sqe") {
            Ok(UringRoute::SubmitSqe)
        } else {
            Err("no io_uring submission tracepoint with a request pointer")
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            UringRoute::SubmitReq => "io_uring:io_uring_submit_req + io_uring:io_uring_complete, paired by request",
            UringRoute::SubmitSqe => "io_uring:io_uring_submit_sqe + io_uring:io_uring_complete, paired by request",
        }
    }
}

/// How the programs tell a wake-up raised by an interrupt (a timer, a
/// device) from one raised by a task: where this CPU's preempt_count and
/// hrtimer_bases are, as distances from its runqueue (the BPF side's
/// anchor, see wake_by in bpf/mltrace/sched.bpf.h).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WakeContext {
    Known {
        /// &__preempt_count (or pcpu_hot.preempt_count) - &runqueues.
        preempt_count: i64,
        /// &hrtimer_bases - &runqueues: timers told from other interrupts.
        hrtimer_bases: Option<i64>,
        /// Where the distances come from.
        source: &'static str,
    },
    /// Why not: a wake-up's waker is then the running task, which an
    /// interrupt may have cut into.
    Unknown(String),
}

/// Per-CPU symbols' places: runqueues, the count (or pcpu_hot and the
/// count's offset in it), hrtimer_bases.
#[derive(Default)]
struct PerCpu {
    runqueues: Option<u64>,
    preempt_count: Option<u64>,
    pcpu_hot: Option<u64>,
    hrtimer_bases: Option<u64>,
}

impl PerCpu {
    fn set(&mut self, name: &str, at: u64) {
        match name {
            "runqueues" => self.runqueues = Some(at),
            "__preempt_count" => self.preempt_count = Some(at),
            "pcpu_hot" => self.pcpu_hot = Some(at),
            "hrtimer_bases" => self.hrtimer_bases = Some(at),
            _ => {}
        }
    }

    fn context(&self, hot_count: u64, source: &'static str) -> Option<WakeContext> {
        let rq = self.runqueues? as i64;
        #[cfg(not(target_arch = "aarch64"))]
        let count = self.preempt_count.or(self.pcpu_hot.map(|h| h + hot_count))?;
        // arm64 keeps the count in the running task's thread_info, where the
        // programs read it: only the runqueue (for hrtimer_bases) is needed.
        #[cfg(target_arch = "aarch64")]
        let count = {
            let _ = hot_count;
            rq as u64
        };
        Some(WakeContext::Known {
            preempt_count: count as i64 - rq,
            hrtimer_bases: self.hrtimer_bases.map(|h| h as i64 - rq),
            source,
        })
    }
}

impl WakeContext {
    pub fn choose(k: &KernelBtf) -> WakeContext {
        if !k.has_member("task_struct", "se") || !k.has_member("cfs_rq", "rq") {
            return WakeContext::Unknown("no cfs_rq->rq (CONFIG_FAIR_GROUP_SCHED off)".into());
        }
        // pcpu_hot (6.2 to 6.14) starts with the current task's pointer.
        let hot_count = k.member_offset("pcpu_hot", "preempt_count").unwrap_or(8);
        if let Some(c) = k.percpu(&["runqueues", "__preempt_count", "pcpu_hot", "hrtimer_bases"]).and_then(|p| {
            let mut v = PerCpu::default();
            for (name, at) in p {
                v.set(name, at);
            }
            v.context(hot_count, "the kernel's BTF")
        }) {
            return c;
        }
        match std::fs::read_to_string("/proc/kallsyms") {
            Ok(text) => Self::from_kallsyms(&text, hot_count),
            Err(e) => WakeContext::Unknown(format!("no per-CPU variables in BTF; /proc/kallsyms: {e}")),
        }
    }

    /// From /proc/kallsyms' text (`ADDR TYPE NAME [MODULE]` lines).
    pub fn from_kallsyms(text: &str, hot_count: u64) -> WakeContext {
        let mut v = PerCpu::default();
        for line in text.lines() {
            let mut f = line.split_ascii_whitespace();
            if let (Some(addr), Some(_), Some(name), None) = (f.next(), f.next(), f.next(), f.next()) {
                if let Ok(at) = u64::from_str_radix(addr, 16) {
                    v.set(name, at);
                }
            }
        }
        match v.context(hot_count, "/proc/kallsyms") {
            _ if v.runqueues == Some(0) => WakeContext::Unknown(
                "no per-CPU variables in BTF; /proc/kallsyms hides addresses (kptr_restrict)".into(),
            ),
            Some(c) => c,
            None => WakeContext::Unknown(
                "no per-CPU variables in BTF or /proc/kallsyms (pahole < 1.18 and CONFIG_KALLSYMS_ALL off)".into(),
            ),
        }
    }

    pub fn known(&self) -> bool {
        matches!(self, WakeContext::Known { .. })
    }

    pub fn describe(&self) -> String {
        match self {
            WakeContext::Known { hrtimer_bases: None, source, .. } => {
                format!(
                    "wake-ups by interrupts told apart (preempt_count, from {source}; timers not told from devices)"
                )
            }
            WakeContext::Known { source, .. } => {
                format!("wake-ups by timers, hardirqs and softirqs told apart (preempt_count, from {source})")
            }
            WakeContext::Unknown(why) => {
                format!("wake-ups by interrupts NOT told apart ({why}): a timer may be taken for the task it cut into")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_give_the_per_cpu_distances() {
        let text = "ffffffff82a0b8c0 R __per_cpu_offset\n\
                    0000000000022a4c D __preempt_count\n\
                    000000000001f6c0 d hrtimer_bases\n\
                    0000000000030000 D runqueues\n\
                    ffffffffc0000000 t foo\t[nvidia]\n";
        assert_eq!(
            WakeContext::from_kallsyms(text, 8),
            WakeContext::Known {
                preempt_count: 0x22a4c - 0x30000,
                hrtimer_bases: Some(0x1f6c0 - 0x30000),
                source: "/proc/kallsyms"
            }
        );
        let hot = "0000000000032000 D pcpu_hot\n0000000000030000 D runqueues\n";
        assert!(matches!(
            WakeContext::from_kallsyms(hot, 8),
            WakeContext::Known { preempt_count: 0x2008, hrtimer_bases: None, .. }
        ));
        let hidden = "0000000000000000 D runqueues\n0000000000000000 D __preempt_count\n";
        assert!(!WakeContext::from_kallsyms(hidden, 8).known());
        assert!(!WakeContext::from_kallsyms("ffffffff81000000 T _text\n", 8).known());
    }
}
