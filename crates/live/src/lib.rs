//! Live metrics of a recording (`record --metrics`, `--otlp`): the frames
//! the recorder writes are read again as they are written (a
//! [`mltrace_log::tap::FrameTap`]) into the same stats `mltrace stats`
//! computes, and every second a snapshot of them is taken: served to
//! Prometheus at `/metrics`, and pushed over OTLP/HTTP every interval.
//! Nothing here can slow the recording: the tap drops what this side has
//! no room for (counted), and a collector that is down or slow costs a
//! dropped push (counted). docs/metrics.md lists the metrics.

mod feed;
pub mod metrics;
pub mod otlp;
pub mod prom;
pub mod snapshot;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mltrace_log::tap::Tapped;

pub use snapshot::Snapshot;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("--metrics {given}: {why}")]
    BadListen { given: String, why: String },
    #[error("--metrics: cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("--otlp {url}: {why}")]
    BadUrl { url: String, why: String },
}

/// Where `--metrics` listens: `PORT` is loopback's (127.0.0.1); any other
/// address only when the user names it (`0.0.0.0:9400`, `[::]:9400`,
/// `node1:9400`).
pub fn parse_listen(given: &str) -> Result<SocketAddr, LiveError> {
    let bad = |why: &str| LiveError::BadListen { given: given.to_string(), why: why.to_string() };
    if let Ok(port) = given.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    if let Ok(a) = given.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = given.rsplit_once(':').ok_or_else(|| bad("expected PORT or ADDRESS:PORT"))?;
    port.parse::<u16>().map_err(|_| bad("the port is not a number from 0 to 65535"))?;
    let mut found = (host, port.parse::<u16>().unwrap_or(0)).to_socket_addrs().map_err(|e| bad(&e.to_string()))?;
    found.next().ok_or_else(|| bad("the name has no address"))
}

/// What the live view does.
pub struct LiveOptions {
    /// Serve `/metrics` here.
    pub listen: Option<SocketAddr>,
    /// Push here every `interval`.
    pub otlp: Option<otlp::Target>,
    /// The "last interval" window, and how often pushes go.
    pub interval: Duration,
    /// After the recording: how long the endpoint stays up for a last
    /// scrape (it closes as soon as one has seen the end).
    pub linger: Duration,
    /// The resource attributes pushes carry.
    pub job: String,
    pub host: String,
}

/// How it went, for `record`'s last lines.
#[derive(Clone, Debug, Default)]
pub struct LiveSummary {
    pub listen: Option<SocketAddr>,
    pub scrapes: u64,
    pub otlp: Option<String>,
    pub pushes: u64,
    pub pushes_dropped: u64,
    pub last_push_error: Option<String>,
    pub frames_missed: u64,
    /// Records read live, and the live reader's CPU time (ns).
    pub records: u64,
    pub cpu_ns: u64,
    /// What the live reader could not decode (never expected).
    pub problems: Vec<String>,
}

/// Counters the threads share.
#[derive(Default)]
struct Shared {
    latest: Mutex<Arc<Snapshot>>,
    pushes: AtomicU64,
    pushes_dropped: AtomicU64,
    last_push_error: Mutex<Option<String>>,
    stop_server: AtomicBool,
}

/// The running live view.
pub struct Live {
    shared: Arc<Shared>,
    feed: JoinHandle<feed::Outcome>,
    server: Option<(JoinHandle<()>, Arc<AtomicU64>)>,
    listen: Option<SocketAddr>,
    otlp: Option<String>,
    linger: Duration,
}

impl Live {
    /// Binds the endpoint (an error if it cannot) and starts reading `rx`
    /// (the tap's other end; `missed` its count of frames not sent).
    pub fn start(opts: LiveOptions, rx: Receiver<Tapped>, missed: Arc<AtomicU64>) -> Result<Live, LiveError> {
        let shared = Arc::new(Shared::default());
        let mut listen = None;
        let server = match opts.listen {
            Some(addr) => {
                let srv = prom::Server::bind(addr).map_err(|source| LiveError::Bind { addr, source })?;
                listen = Some(srv.addr);
                let scrapes = srv.scrapes.clone();
                let sh = shared.clone();
                let h = std::thread::Builder::new()
                    .name("mltrace-metrics".into())
                    .spawn(move || srv.serve(&sh.latest, &sh.stop_server))
                    .expect("spawning the metrics endpoint's thread");
                Some((h, scrapes))
            }
            None => None,
        };
        let otlp = opts.otlp.as_ref().map(|t| t.url.clone());
        let linger = opts.linger;
        let sh = shared.clone();
        let feed = std::thread::Builder::new()
            .name("mltrace-live".into())
            .spawn(move || feed::run(opts, rx, missed, sh))
            .expect("spawning the live metrics' thread");
        Ok(Live { shared, feed, server, listen, otlp, linger })
    }

    /// The endpoint's address (the port the system picked for port 0).
    pub fn listen(&self) -> Option<SocketAddr> {
        self.listen
    }

    /// After the recording ended (the tap's sender dropped): the last
    /// snapshot and push, then the endpoint stays up for `linger` or until
    /// a scrape has seen the end.
    pub fn finish(self) -> LiveSummary {
        let out = self.feed.join().unwrap_or_default();
        let mut scrapes = 0;
        if let Some((h, n)) = self.server {
            let seen = n.load(Ordering::Relaxed);
            let until = Instant::now() + self.linger;
            while Instant::now() < until && n.load(Ordering::Relaxed) == seen {
                std::thread::sleep(Duration::from_millis(50));
            }
            self.shared.stop_server.store(true, Ordering::Relaxed);
            let _ = h.join();
            scrapes = n.load(Ordering::Relaxed);
        }
        LiveSummary {
            listen: self.listen,
            scrapes,
            otlp: self.otlp,
            pushes: self.shared.pushes.load(Ordering::Relaxed),
            pushes_dropped: self.shared.pushes_dropped.load(Ordering::Relaxed),
            last_push_error: self.shared.last_push_error.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            frames_missed: out.frames_missed,
            records: out.records,
            cpu_ns: out.cpu_ns,
            problems: out.problems,
        }
    }
}

impl LiveSummary {
    /// `record`'s line about it.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        if let Some(a) = self.listen {
            parts.push(format!("served {} scrape{} at http://{a}/metrics", self.scrapes, plural(self.scrapes)));
        }
        if let Some(u) = &self.otlp {
            let ok = self.pushes.saturating_sub(self.pushes_dropped);
            let mut s = format!("pushed {ok} of {} to {u}", self.pushes);
            if self.pushes_dropped > 0 {
                s.push_str(&format!(" ({} dropped", self.pushes_dropped));
                if let Some(e) = &self.last_push_error {
                    s.push_str(&format!(", last: {e}"));
                }
                s.push(')');
            }
            parts.push(s);
        }
        if self.frames_missed > 0 {
            parts.push(format!(
                "{} frame{} of the log not read live (the live figures undercount; the log has them)",
                self.frames_missed,
                plural(self.frames_missed)
            ));
        }
        parts.push(format!("read {} records live in {:.2} s of CPU", self.records, self.cpu_ns as f64 / 1e9));
        format!("live metrics: {}", parts.join("; "))
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_is_loopback_and_other_addresses_only_when_named() {
        assert_eq!(parse_listen("9400").unwrap(), "127.0.0.1:9400".parse().unwrap());
        assert_eq!(parse_listen("0.0.0.0:9400").unwrap(), "0.0.0.0:9400".parse().unwrap());
        assert_eq!(parse_listen("[::1]:9400").unwrap(), "[::1]:9400".parse().unwrap());
        assert!(parse_listen("localhost:9400").unwrap().ip().is_loopback());
        for bad in ["", "x", "host:port", "99999"] {
            let e = parse_listen(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--metrics {bad}:")), "{e}");
        }
    }

    #[test]
    fn otlp_urls() {
        let t = otlp::Target::parse("http://collector:4318").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("collector", 4318, "/v1/metrics"));
        let t = otlp::Target::parse("http://127.0.0.1:9999/custom/v1/metrics").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.path.as_str()), ("127.0.0.1", 9999, "/custom/v1/metrics"));
        let t = otlp::Target::parse("http://[::1]:4000").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 4000));
        for bad in ["collector:4318", "https://c:4318", "http://:4318", "http://c:0", "http://c:x"] {
            assert!(otlp::Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn windows_end_on_whole_intervals_settled_and_at_the_end_on_the_last_record() {
        let s = 1_000_000_000_000u64;
        let sec = 1_000_000_000;
        // 13.5 s in, 2 s settling: 11.5 s settled, the last whole 4 s is 8 s.
        let w = feed::windows(s, s + 13 * sec + sec / 2, 4 * sec, None);
        assert_eq!((w[0].from, w[0].to), (s + 4 * sec, s + 8 * sec));
        assert_eq!((w[1].from, w[1].to), (s, s + 8 * sec));
        assert!(feed::windows(s, s + sec, 4 * sec, None).is_empty());
        // The end: up to the end of the last record's bin.
        let w = feed::windows(s, s + 100 * sec, 4 * sec, Some((s + 9 * sec - 5, sec)));
        assert_eq!((w[0].from, w[0].to, w[1].from), (s + 5 * sec, s + 9 * sec, s));
    }

    #[test]
    fn a_scrape_is_openmetrics_text_with_help_units_and_eof() {
        use snapshot::{Point, Value};
        let snap = Snapshot {
            families: vec![
                (
                    &metrics::DISK_IO,
                    vec![Point {
                        labels: vec![("disk.io.direction", "read".into()), ("role", "loader".into())],
                        value: Value::F64(4096.0),
                    }],
                ),
                (
                    &metrics::READ_DURATION,
                    vec![Point {
                        labels: vec![("role", "loader".into())],
                        value: Value::Hist { bounds: &[0.001, 0.01], counts: vec![2, 1, 1], count: 4, sum: 0.5 },
                    }],
                ),
            ],
            ..Default::default()
        };
        let text = prom::render(&Arc::new(snap));
        assert!(text.contains("# TYPE process_disk_io_bytes counter"), "{text}");
        assert!(
            text.contains("process_disk_io_bytes_total{disk_io_direction=\"read\",role=\"loader\"} 4096.0"),
            "{text}"
        );
        assert!(text.contains("mltrace_read_duration_seconds_bucket{le=\"0.01\",role=\"loader\"} 3"), "{text}");
        assert!(text.contains("mltrace_read_duration_seconds_bucket{le=\"+Inf\",role=\"loader\"} 4"), "{text}");
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
    }

    #[test]
    fn otlp_requests_keep_names_units_and_bucket_counts() {
        use snapshot::{Point, Value};
        let snap = Snapshot {
            taken_unix_ns: 2,
            start_unix_ns: 1,
            rank: Some(3),
            families: vec![(
                &metrics::READ_DURATION,
                vec![Point {
                    labels: vec![("role", "loader".into())],
                    value: Value::Hist { bounds: &[0.001, 0.01], counts: vec![2, 1, 1], count: 4, sum: 0.5 },
                }],
            )],
        };
        let res = otlp::Resources { host: "h".into(), job: "j".into() };
        let req = otlp::request(&snap, &res);
        let m = &req.resource_metrics[0].scope_metrics[0].metrics[0];
        assert_eq!((m.name.as_str(), m.unit.as_str()), ("mltrace.read.duration", "s"));
        let Some(opentelemetry_proto::tonic::metrics::v1::metric::Data::Histogram(h)) = &m.data else { panic!() };
        assert_eq!(h.data_points[0].bucket_counts, vec![2, 1, 1]);
        assert_eq!(h.data_points[0].explicit_bounds, vec![0.001, 0.01]);
        assert_eq!((h.data_points[0].start_time_unix_nano, h.data_points[0].time_unix_nano), (1, 2));
        let attrs = &req.resource_metrics[0].resource.as_ref().unwrap().attributes;
        let rank = attrs.iter().find(|kv| kv.key == "mltrace.rank").and_then(|kv| kv.value.clone());
        let v = rank.and_then(|v| v.value);
        assert_eq!(v, Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue("3".into())));
    }
}
