//! Network calls: a client downloads from a local HTTP server, and the
//! bytes the trace says it received from that peer are what it received.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mltrace_log::*;
use mltrace_tests::*;

const OBJECT: u64 = 64 << 20;

/// A `python3 -m http.server` on 127.0.0.1 (not traced), serving a 64 MiB
/// object from `dir`; its port.
fn server(dir: &Path) -> (proc::Spawned, u16) {
    let data: Vec<u8> = (0..OBJECT).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    std::fs::write(dir.join("object.bin"), data).unwrap();
    let mut cmd = Command::new("python3");
    cmd.args([
        "-u",
        "-c",
        "import http.server, functools, sys\n\
        h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n\
        s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n\
        print(s.server_address[1], flush=True)\n\
        s.serve_forever()",
    ])
    .arg(dir)
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut srv = proc::spawn(&mut cmd);
    let mut line = String::new();
    let out = srv.stdout.as_mut().unwrap();
    let t0 = Instant::now();
    let mut b = [0u8; 1];
    while !line.ends_with('\n') && t0.elapsed() < Duration::from_secs(30) {
        use std::io::Read;
        if out.read(&mut b).unwrap() == 0 {
            break;
        }
        line.push(b[0] as char);
    }
    (srv, line.trim().parse().expect("the server's port"))
}

/// The client: the object once with urllib (one read), once in 64 KiB
/// chunks as `requests`' iter_content reads it; prints the bytes of each.
const CLIENT: &str = r#"
import sys, urllib.request
url = sys.argv[1]
n1 = len(urllib.request.urlopen(url).read())
r = urllib.request.urlopen(url)
n2 = 0
while True:
    b = r.read(65536)
    if not b:
        break
    n2 += len(b)
print('one_read', n1)
print('chunked', n2)
"#;

#[test]
fn a_download_is_the_bytes_received_from_its_peer() {
    let Some(_turn) = require_root!() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (_srv, port) = server(tmp.path());
    let url = format!("http://127.0.0.1:{port}/object.bin");
    let log = tmp.path().join("net.bin");
    let out = mltrace(
        &["record", "-q", "--gpu", "off", "-o", log.to_str().unwrap(), "--", "python3", "-c", CLIENT, &url],
        tmp.path(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let kv = key_values(&String::from_utf8_lossy(&out.stdout));
    assert_eq!((kv["one_read"], kv["chunked"]), (OBJECT as i64, OBJECT as i64));
    let peer = format!("127.0.0.1:{port}");

    // The records: receives from the server, each with its bytes.
    let recs = read_log(&log);
    let recv: u64 = recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::NetCall(x) if !x.op.is_send() && r.strs[1] == peer => Some(x.bytes),
            _ => None,
        })
        .sum();
    let sent: u64 = recs
        .iter()
        .filter_map(|r| match r.rec {
            Record::NetCall(x) if x.op.is_send() && r.strs[1] == peer => Some(x.bytes),
            _ => None,
        })
        .sum();
    // Two responses: the objects plus their headers (a few hundred bytes).
    let headers = 2 * 4096;
    assert!(recv >= 2 * OBJECT && recv <= 2 * OBJECT + headers, "received {recv} from {peer}");
    assert!(sent > 0 && sent < headers, "sent {sent} (two requests) to {peer}");

    // stats --json: the peer, and the client's bytes on sockets.
    let js = mltrace(&["stats", "--json", log.to_str().unwrap()], tmp.path());
    assert!(js.status.success());
    let j: serde_json::Value = serde_json::from_slice(&js.stdout).unwrap();
    let p = j["peers"].as_array().unwrap().iter().find(|p| p["address"] == peer.as_str()).expect("the server");
    assert_eq!(p["recv_bytes"].as_u64(), Some(recv));
    assert_eq!(p["send_bytes"].as_u64(), Some(sent));
    assert!(p["calls"].as_u64().unwrap() >= 2 * OBJECT / (1 << 20), "{p}");
    let client = j["processes"].as_array().unwrap().iter().max_by_key(|p| p["net_recv_bytes"].as_u64()).unwrap();
    assert!(client["net_recv_bytes"].as_u64().unwrap() >= recv, "{client}");

    // Parquet's net_calls table holds the same calls.
    let pq = tmp.path().join("net.parquet");
    let o = mltrace(&["export", "--parquet", log.to_str().unwrap(), "-o", pq.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(pq.join("net_calls.parquet").exists());
    if let Some(python) = tools::python() {
        let script = "import sys, pyarrow.parquet as pq\n\
            t = pq.read_table(sys.argv[1] + '/net_calls.parquet', columns=['direction', 'peer', 'bytes']).to_pylist()\n\
            print('recv', sum(r['bytes'] or 0 for r in t if r['direction'] == 'recv' and r['peer'] == sys.argv[2]))";
        let py = Command::new(python).args(["-c", script]).arg(&pq).arg(&peer).output().unwrap();
        assert!(py.status.success(), "{}", String::from_utf8_lossy(&py.stderr));
        assert_eq!(key_values(&String::from_utf8_lossy(&py.stdout))["recv"], recv as i64);
    }

    // In Perfetto: the receives on the client's thread, with the peer.
    let Some(tp) = tools::perfetto_tp() else { return };
    let trace = tmp.path().join("net.perfetto-trace");
    let o = mltrace(&["export", log.to_str().unwrap(), "-o", trace.to_str().unwrap()], tmp.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let q = "select count(*) from slice s join args a using(arg_set_id) \
             where s.name like 'recvfrom%' and a.key = 'debug.peer'";
    let r = tools::tp_query(&tp, &trace, &[q]);
    let n: u64 = r[0][0][0].parse().unwrap();
    assert!(n >= 2 * OBJECT / (1 << 20), "{n} receives with their peer in the trace");
}
