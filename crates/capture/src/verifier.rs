//! What the kernel said when a program did not load. libbpf prints the
//! verifier's log through its print callback; while loading, that log is
//! caught here and cut down to the program that failed and the last lines
//! that say why (the rest is thousands of instructions).

use std::sync::Mutex;

use libbpf_rs::PrintLevel;

/// libbpf's messages while a load is being caught (None: not catching).
static CAUGHT: Mutex<Option<Vec<String>>> = Mutex::new(None);

/// Lines of the verifier's log kept in a report: the error is last, or
/// just before the instruction count.
const TAIL_LINES: usize = 3;

/// Why one program did not load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The program's name in the BPF object (e.g. `fast_sys_exit`).
    pub program: String,
    /// The last lines of the verifier's log, or libbpf's own reason when
    /// the kernel gave no log.
    pub lines: Vec<String>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "program {} refused by the verifier", self.program)?;
        if !self.lines.is_empty() {
            write!(f, ": {}", self.lines.join(" | "))?;
        }
        Ok(())
    }
}

fn catch(level: PrintLevel, msg: String) {
    if std::env::var_os("MLTRACE_DEBUG").is_some() {
        eprint!("{msg}");
    }
    if level == PrintLevel::Debug {
        return;
    }
    if let Some(v) = CAUGHT.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        v.push(msg);
    }
}

/// Runs `f` (a load) with libbpf's messages caught; returns its result and
/// the refusal they describe, if any.
pub fn catching<T>(f: impl FnOnce() -> T) -> (T, Option<Refusal>) {
    *CAUGHT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    let before = libbpf_rs::set_print(Some((PrintLevel::Info, catch)));
    let r = f();
    libbpf_rs::set_print(before);
    let msgs = CAUGHT.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    (r, refusal(&msgs.concat()))
}

/// The first program libbpf says failed to load, with the tail of the
/// verifier log printed for it.
pub fn refusal(text: &str) -> Option<Refusal> {
    let mut lines = text.lines();
    let program = lines.by_ref().find_map(failed_program)?;
    let mut log = Vec::new();
    let mut in_log = false;
    let mut reason = None;
    for l in lines {
        let l = l.trim_end();
        if l.contains("-- BEGIN PROG LOAD LOG --") {
            in_log = true;
        } else if l.contains("-- END PROG LOAD LOG --") {
            break;
        } else if in_log {
            log.push(l);
        } else if reason.is_none() && l.contains(&format!("prog '{program}'")) {
            reason = l.split_once("': ").map(|(_, r)| r.trim().to_string());
        }
    }
    // The count of instructions and the timing say nothing about why.
    let useful: Vec<&str> = log
        .into_iter()
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("processed ")
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
        })
        .collect();
    let lines = if useful.is_empty() {
        reason.into_iter().collect()
    } else {
        useful[useful.len().saturating_sub(TAIL_LINES)..].iter().map(|s| s.to_string()).collect()
    };
    Some(Refusal { program, lines })
}

/// `libbpf: prog 'NAME': BPF program load failed: ...` -> NAME.
fn failed_program(line: &str) -> Option<String> {
    let rest = &line[line.find("prog '")? + 6..];
    let (name, tail) = rest.split_once('\'')?;
    (tail.contains("load failed") || tail.contains("failed to load")).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What libbpf printed on Debian's 6.1 before the stack was split.
    const STACK: &str = "libbpf: prog 'fast_sys_exit': BPF program load failed: Permission denied\n\
        libbpf: prog 'fast_sys_exit': -- BEGIN PROG LOAD LOG --\n\
        0: R1=ctx() R10=fp0\n\
        ; int BPF_PROG(fast_sys_exit, struct pt_regs *regs, long ret)\n\
        combined stack size of 3 calls is 608. Too large\n\
        processed 46266 insns (limit 1000000) max_states_per_insn 13 total_states 1569\n\
        -- END PROG LOAD LOG --\n\
        libbpf: prog 'fast_sys_exit': failed to load: -13\n\
        libbpf: failed to load object 'mltrace_bpf'\n";

    #[test]
    fn names_the_program_and_the_verifiers_reason() {
        let r = refusal(STACK).unwrap();
        assert_eq!(r.program, "fast_sys_exit");
        assert_eq!(r.lines.last().unwrap(), "combined stack size of 3 calls is 608. Too large");
        assert!(!r.lines.iter().any(|l| l.starts_with("processed")));
        assert!(r.to_string().contains("fast_sys_exit refused by the verifier"));
    }

    #[test]
    fn without_a_log_the_reason_is_libbpfs() {
        let text = "libbpf: prog 'sys_enter': BPF program load failed: Invalid argument\n\
                    libbpf: prog 'sys_enter': failed to load: -22\n";
        let r = refusal(text).unwrap();
        assert_eq!(r.program, "sys_enter");
        assert_eq!(r.lines, vec!["failed to load: -22".to_string()]);
    }

    #[test]
    fn nothing_failed_nothing_said() {
        assert_eq!(refusal("libbpf: map 'events': created\n"), None);
    }
}
