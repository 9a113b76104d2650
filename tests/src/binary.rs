//! The `mltrace` binary the tests run: built on first use when it is
//! missing or older than its sources, so that one test target can be run
//! on its own (`cargo test -p mltrace-tests --test e2e record_e2e::`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

/// The `mltrace` binary of this build (`MLTRACE_BIN` overrides).
pub fn mltrace_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("MLTRACE_BIN") {
            return PathBuf::from(p);
        }
        // target/<profile>/deps/<test> -> target/<profile>/mltrace
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap();
        let bin = profile_dir.join("mltrace");
        if modified(&bin) < newest_source(&super::repo()) {
            build(profile_dir);
        }
        assert!(bin.exists(), "{} missing after building it", bin.display());
        bin
    })
    .clone()
}

/// `cargo build -p mltrace` into the target dir and profile of this test.
fn build(profile_dir: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "mltrace", "--target-dir"]).arg(profile_dir.parent().unwrap());
    match profile_dir.file_name().and_then(|n| n.to_str()).unwrap() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        p => {
            cmd.args(["--profile", p]);
        }
    }
    let st = cmd.current_dir(super::repo()).status().expect("running cargo");
    assert!(st.success(), "{cmd:?} failed");
}

fn modified(p: &Path) -> SystemTime {
    std::fs::metadata(p).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The newest change to what goes into the binary (tests aside).
fn newest_source(repo: &Path) -> SystemTime {
    fn walk(p: &Path, newest: &mut SystemTime) {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if matches!(name, "target" | "tests" | "benches" | "fuzz") || name.starts_with('.') {
                return;
            }
            for e in std::fs::read_dir(p).into_iter().flatten().flatten() {
                walk(&e.path(), newest);
            }
        } else {
            *newest = (*newest).max(modified(p));
        }
    }
    let mut newest = SystemTime::UNIX_EPOCH;
    for d in ["Cargo.toml", "Cargo.lock", "crates", "exporters", "bpf", "proto"] {
        walk(&repo.join(d), &mut newest);
    }
    newest
}
