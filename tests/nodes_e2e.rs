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

/// A known transfer over loopback: `lo`'s sampled rates integrate to at
/// least the bytes sent, in both directions, in stats and in the trace.
#[test]
fn loopback_transfer_shows_in_network_counters() {
    if !require_root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    const MIB: usize = 48;
    let py = format!(
        "import socket,threading,time\n\
         s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)\n\
         got=[0]\n\
         def rx():\n c,_=s.accept()\n while True:\n  b=c.recv(1<<20)\n  if not b: break\n  got[0]+=len(b)\n\
         t=threading.Thread(target=rx); t.start(); time.sleep(0.3)\n\
         c=socket.create_connection(s.getsockname()); c.sendall(b'x'*({MIB}<<20)); c.close(); t.join()\n\
         time.sleep(0.3); print('received', got[0])\n"
    );
    std::fs::write(d.join("xfer.py"), py).unwrap();
    let o = ok(&mltrace(&["record", "-q", "-o", "n.bin", "--", "python3", "xfer.py"], d)).stdout.clone();
    assert_eq!(key_values(&String::from_utf8_lossy(&o))["received"], (MIB << 20) as i64);
    let j: serde_json::Value = serde_json::from_slice(&ok(&mltrace(&["stats", "--json", "n.bin"], d)).stdout).unwrap();
    let lo = j["network"].as_array().unwrap().iter().find(|n| n["name"] == "lo").expect("lo in stats' network");
    assert_eq!(lo["kind"], "interface");
    for k in ["rx_bytes", "tx_bytes"] {
        let v = lo[k].as_u64().unwrap();
        // Headers add a little; other loopback traffic on the machine may add more.
        assert!(v >= (MIB << 20) as u64, "{k} {v} < {MIB} MiB: {lo}");
        assert!(v < (MIB << 20) as u64 * 3, "{k} {v}: far more than was sent: {lo}");
    }
    assert!(lo["rx_packets"].as_u64().unwrap() > 0 && lo["rx_peak_bytes_per_s"].as_u64().unwrap() > 0, "{lo}");
    let text = String::from_utf8_lossy(&ok(&mltrace(&["stats", "n.bin"], d)).stdout).into_owned();
    assert!(text.contains("network (from the sampled counters") && text.contains("\nlo "), "{text}");

    // In the trace: a `Network lo` group with its rx and tx counters.
    let Some(tp) = perfetto_tp() else { return };
    ok(&mltrace(&["export", "n.bin", "-o", "n.perfetto-trace"], d));
    let r = tp_query(
        &tp,
        &d.join("n.perfetto-trace"),
        &["select t.name, p.name from track t join track p on t.parent_id = p.id \
           where p.name = 'Network lo' order by t.name"],
    );
    let names: Vec<&str> = r[0].iter().map(|row| row[0].as_str()).collect();
    assert!(names.contains(&"rx") && names.contains(&"tx"), "{r:?}");
}
