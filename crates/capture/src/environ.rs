//! A process's place in its job (rank, job size, GPUs) from the variables
//! its launcher set: read from /proc/PID/environ when its exec is decoded.
//! That file holds the environment as passed to exec, which is where
//! torchrun, mpirun and srun put them; a process that exits (or execs
//! again) before the read has its variables missed (or the new
//! program's read), which for a rank, alive for the whole job, does not
//! happen.

use mltrace_log::{env, Env, FrameEncoder};

/// Pushes an [`Env`] record per launcher variable of process `pid`.
pub fn push(pid: u32, ts: u64, enc: &mut FrameEncoder) {
    let Ok(block) = std::fs::read(format!("/proc/{pid}/environ")) else { return };
    for (name, value) in env::launcher_vars(&block) {
        let name = enc.intern(name.as_bytes());
        let value = enc.intern(value);
        enc.push(&Env { pid, ts, name, value });
    }
}
