//! Mappings and major faults per process and file, read through the
//! model's mapping tables (the ones the trace is drawn with): a fault or an
//! munmap is about the file the process had mapped at that address.

use mltrace_log::{MapOp, Mapping};
use mltrace_model::maps::{Applied, MapClass};

/// Calls and bytes of one class of mappings.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Count {
    pub calls: u64,
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, calls: u64, bytes: u64) {
        self.calls += calls;
        self.bytes += bytes;
    }
}

/// One process's mappings.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ProcMaps {
    /// mmaps of data files; `data.bytes` (plus mremap growth) is its `mapped_bytes`.
    pub data: Count,
    pub code: Count,
    pub shared_memory: Count,
    pub anonymous: Count,
    pub other: Count,
    /// Data files mapped when it was forked (its parent's mappings).
    pub inherited_bytes: u64,
    /// munmaps and mremaps that touched a data mapping.
    pub munmaps: u64,
    pub mremaps: u64,
    /// Calls that failed.
    pub failed: u64,
    /// Bytes brought from storage by faults on files it had mapped.
    pub storage_read_bytes: u64,
    /// Major faults on its data mappings, and the rest (libraries, the
    /// program, anonymous memory, mappings made before the recording).
    pub major_faults: u64,
    pub major_faults_other: u64,
}

impl ProcMaps {
    /// Bytes of data files it mapped (mmap lengths and mremap growth).
    pub fn mapped_bytes(&self) -> u64 {
        self.data.bytes
    }

    /// A mapping record, as the tables applied it.
    pub fn add(&mut self, m: &Mapping, a: &Applied) {
        let data = a.class == Some(MapClass::Data);
        match m.op {
            // The kernel counted these: `ret` calls, `len` bytes.
            MapOp::Anonymous => self.anonymous.add(m.ret.max(0) as u64, m.len),
            _ if m.ret < 0 => self.failed += 1,
            MapOp::Mmap => match a.class {
                Some(MapClass::Data) => self.data.add(1, m.len),
                Some(MapClass::Code) => self.code.add(1, m.len),
                Some(MapClass::SharedMemory) => self.shared_memory.add(1, m.len),
                Some(MapClass::Other) => self.other.add(1, m.len),
                // MAP_FIXED anonymous mmaps are in the kernel's count already.
                Some(MapClass::Anonymous) | None => {}
            },
            MapOp::Munmap if data => self.munmaps += 1,
            MapOp::Mremap if data => {
                self.mremaps += 1;
                self.data.bytes += a.grown;
            }
            MapOp::Munmap | MapOp::Mremap => {}
        }
    }

    pub fn any(&self) -> bool {
        *self != ProcMaps::default()
    }
}

/// One file's mappings, over every process.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct FileMaps {
    pub mmaps: u64,
    pub mapped_bytes: u64,
    pub major_faults: u64,
    /// Bytes brought from storage by faults of processes that had it mapped.
    pub storage_read_bytes: u64,
}
