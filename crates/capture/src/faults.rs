//! Major page faults: perf's PAGE_FAULTS_MAJ software event, one per
//! online CPU for every task (pid -1), each running the `major_fault` BPF
//! program, which keeps only traced processes. The event fires only for
//! faults that read their page, so minor and anonymous faults cost nothing.

use libbpf_rs::Link;

use crate::skel::MltraceSkel;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_PAGE_FAULTS_MAJ: u64 = 6;
const PERF_SAMPLE_ADDR: u64 = 1 << 3;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
/// `disabled`: libbpf enables the event once the program is attached.
const ATTR_DISABLED: u64 = 1;

/// perf_event_attr up to `config1` (PERF_ATTR_SIZE_VER0): all this needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// The attached events; detached (and their fds closed, by libbpf) on drop.
pub struct FaultLinks {
    _links: Vec<Link>,
}

fn open_event(cpu: u32) -> std::io::Result<i32> {
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_PAGE_FAULTS_MAJ,
        sample_period: 1,
        sample_type: PERF_SAMPLE_ADDR,
        flags: ATTR_DISABLED,
        ..Default::default()
    };
    // SAFETY: a valid attr of the size it declares; pid -1 with a cpu is
    // every task on that CPU; no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            -1,
            cpu as libc::c_int,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd as i32)
}

/// Opens the event on every online CPU and attaches the program. An error
/// says why faults cannot be recorded here (nothing stays attached).
pub fn attach(skel: &MltraceSkel<'_>) -> Result<FaultLinks, String> {
    let cpus = crate::system::online_cpus()?;
    let mut links = Vec::with_capacity(cpus.len());
    for cpu in cpus {
        let fd = open_event(cpu).map_err(|e| format!("perf_event_open(PAGE_FAULTS_MAJ, cpu {cpu}): {e}"))?;
        match skel.progs.major_fault.attach_perf_event(fd) {
            Ok(l) => links.push(l),
            Err(e) => {
                // SAFETY: our own fd, which libbpf did not take.
                unsafe { libc::close(fd) };
                return Err(format!("attaching to the perf event on cpu {cpu}: {e}"));
            }
        }
    }
    Ok(FaultLinks { _links: links })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_attr_is_of_its_first_published_size() {
        assert_eq!(std::mem::size_of::<super::PerfEventAttr>(), 64, "PERF_ATTR_SIZE_VER0");
    }
}
