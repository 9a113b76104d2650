//! Stand-in GPU libraries (tests/workloads/fake_cuda.c, fake_nccl.c) and
//! the trainers that dlopen() them, for the uprobe tests: built into a
//! test's directory, and recordings with the library's path given.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{mltrace_bin, proc, repo};

/// Compiles `tests/workloads/{src}.c` as the shared library `dir/lib/{soname}`,
/// stripped (`-s`: `.dynsym` only, no `.symtab`), as NVIDIA ships
/// `libcuda.so`: libbpf's lookup by name found no entry point in such a
/// library, and the recorder reads the symbols itself since.
pub fn library(dir: &Path, src: &str, soname: &str) -> PathBuf {
    let libdir = dir.join("lib");
    std::fs::create_dir_all(&libdir).unwrap();
    let lib = libdir.join(soname);
    let st = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-s", "-o"])
        .arg(&lib)
        .arg(repo().join(format!("tests/workloads/{src}.c")))
        .status()
        .expect("running cc");
    assert!(st.success(), "compiling the stand-in {soname}");
    lib
}

/// Compiles `tests/workloads/{name}.c`, a program that dlopen()s one, as `dir/{name}`.
pub fn trainer(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let st = Command::new("cc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(repo().join(format!("tests/workloads/{name}.c")))
        .arg("-ldl")
        .status()
        .expect("running cc");
    assert!(st.success(), "compiling {name}.c");
    out
}

/// `mltrace record` of `cmd` into `dir/{name}` with `extra` options, with
/// `$MLTRACE_CUDA_LIB` and `$MLTRACE_NCCL_LIB` unset but `lib`'s
/// (variable, path), when given.
pub fn record(dir: &Path, name: &str, extra: &[&str], lib: Option<(&str, &Path)>, cmd: &[&str]) -> (Output, PathBuf) {
    let log = dir.join(name);
    let mut c = Command::new(mltrace_bin());
    c.args(["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap()]).args(extra).arg("--").args(cmd);
    c.current_dir(dir).env_remove("MLTRACE_NCCL_LIB").env_remove("MLTRACE_CUDA_LIB");
    if let Some((var, path)) = lib {
        c.env(var, path);
    }
    (proc::output(&mut c), log)
}
