//! What the running kernel offers, read from its BTF: which raw
//! tracepoints exist decides which programs load (and `mltrace doctor`
//! reports the same choices).

use libbpf_rs::btf::types::{Struct, Typedef};
use libbpf_rs::btf::Btf;

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

    /// Whether the kernel has the tracepoint `name` (it then has a
    /// `btf_trace_<name>` typedef, which raw_tp and tp_btf attach by).
    pub fn has_tracepoint(&self, name: &str) -> bool {
        self.btf.as_ref().is_some_and(|b| b.type_by_name::<Typedef<'_>>(&format!("btf_trace_{name}")).is_some())
    }
}

impl KernelBtf {
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
