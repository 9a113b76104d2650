//! Many nodes: `-o` templates, network counters, and `mltrace merge` of
//! recordings made under other host names (UTS namespaces).

use std::path::Path;
use std::process::{Command, Output};

use mltrace_tests::*;

/// `mltrace record ARGS` in a new UTS namespace whose host name is `host`.
fn record_as(host: &str, dir: &Path, env: &[(&str, &str)], args: &str) -> Output {
    let script = format!("hostname {host} && exec {} record -q {args}", mltrace_bin().display());
    let mut c = Command::new("unshare");
    c.args(["-u", "sh", "-c", &script]).current_dir(dir);
    for v in ["SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    c.output().expect("running unshare")
}

fn ok(o: &Output) -> &Output {
    assert!(
        o.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

#[test]
fn output_templates_name_each_node_and_rank() {
    if !require_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    ok(&record_as("nodeA", d, &[("RANK", "0")], "-o %h-r%r.bin -- true"));
    ok(&record_as("nodeB", d, &[("SLURM_PROCID", "5"), ("RANK", "9")], "-o %h-r%r.bin -- true"));
    ok(&record_as("nodeC", d, &[], "-o %h.%p.%t.100%%.bin -- true"));
    let mut names: Vec<String> =
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(&names[..2], ["nodeA-r0.bin", "nodeB-r5.bin"], "{names:?}");
    let c = &names[2];
    // nodeC.<pid>.<YYYYMMDDTHHMMSSZ>.100%.bin
    let f: Vec<&str> = c.split('.').collect();
    assert_eq!((f[0], f[3], f[4]), ("nodeC", "100%", "bin"), "{c}");
    assert!(f[1].parse::<u32>().is_ok(), "{c}");
    assert!(f[2].len() == 16 && f[2].ends_with('Z') && f[2].as_bytes()[8] == b'T', "{c}");
    // The logs say who wrote them.
    for (n, host) in [("nodeA-r0.bin", "nodeA"), ("nodeB-r5.bin", "nodeB")] {
        let h = mltrace_log::LogReader::open(&d.join(n)).unwrap().header().host.clone();
        assert_eq!(h, host);
    }

    let o = record_as("nodeD", d, &[], "-o %h-%r.bin -- true");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("%r needs a rank") && e.contains("SLURM_PROCID, RANK"), "{e}");
    let o = record_as("nodeD", d, &[], "-o %h-%x.bin -- true");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("unknown placeholder %x"), "{e}");
    assert!(!d.join("nodeD-.bin").exists());
}
