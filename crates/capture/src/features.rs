//! What the running kernel offers, read from its BTF: which raw
//! tracepoints exist decides which programs load (and `mltrace doctor`
//! reports the same choices).

use libbpf_rs::btf::types::Typedef;
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
