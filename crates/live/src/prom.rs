//! The Prometheus endpoint: `GET /metrics` in the OpenMetrics text format
//! (prometheus-client's encoder), the latest snapshot; anything else is
//! answered 404 or 405. One connection at a time, each with a deadline,
//! on a thread of its own: a slow scraper delays only the next scrape.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::metrics::{prometheus_label, Kind};
use crate::snapshot::{Snapshot, Value};

/// The latest snapshot, as one scrape sees it.
#[derive(Debug)]
struct Scrape(Arc<Snapshot>);

impl prometheus_client::collector::Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (metric, points) in &self.0.families {
            let ty = match metric.kind {
                Kind::Gauge => MetricType::Gauge,
                Kind::Counter => MetricType::Counter,
                Kind::Histogram => MetricType::Histogram,
            };
            let unit = metric.unit.prometheus();
            let name = metric.prometheus_name();
            let mut family = enc.encode_descriptor(&name, metric.help, unit.as_ref(), ty)?;
            for p in points {
                let labels: Vec<(String, String)> =
                    p.labels.iter().map(|(k, v)| (prometheus_label(k), v.clone())).collect();
                let mut e = family.encode_family(&labels)?;
                match (&p.value, metric.kind) {
                    (Value::F64(v), Kind::Counter) => {
                        e.encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(v, None)?
                    }
                    (Value::F64(v), _) => e.encode_gauge(v)?,
                    (Value::Hist { bounds, counts, count, sum }, _) => {
                        // Per bucket: the encoder makes them cumulative.
                        let inf = std::iter::once(f64::INFINITY);
                        let b: Vec<(f64, u64)> =
                            bounds.iter().copied().chain(inf).zip(counts.iter().copied()).collect();
                        e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(*sum, *count, &b, None)?
                    }
                }
            }
        }
        Ok(())
    }
}

/// The text a scrape gets.
pub fn render(snap: &Arc<Snapshot>) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(Scrape(snap.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}

/// The endpoint, serving until `stop`.
pub struct Server {
    pub addr: SocketAddr,
    pub scrapes: Arc<AtomicU64>,
    listener: TcpListener,
}

impl Server {
    pub fn bind(addr: SocketAddr) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Server { addr: listener.local_addr()?, scrapes: Arc::default(), listener })
    }

    pub fn serve(self, latest: &Mutex<Arc<Snapshot>>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            match self.listener.accept() {
                Ok((conn, _)) => {
                    if answer(conn, latest).unwrap_or(false) {
                        self.scrapes.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(20)),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
}

/// Reads one request and answers it; whether it was a scrape.
fn answer(mut conn: TcpStream, latest: &Mutex<Arc<Snapshot>>) -> io::Result<bool> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(5)))?;
    // The request line and headers (a scrape has no body); at most 16 KiB.
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 << 10 {
        match conn.read(&mut buf)? {
            0 => break,
            n => req.extend_from_slice(&buf[..n]),
        }
    }
    let line = req.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let reply = |conn: &mut TcpStream, status: &str, ctype: &str, body: &str, head: bool| {
        let h = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        conn.write_all(h.as_bytes())?;
        if !head {
            conn.write_all(body.as_bytes())?;
        }
        conn.flush()
    };
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let snap = latest.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let body = render(&snap);
            let ctype = "application/openmetrics-text; version=1.0.0; charset=utf-8";
            reply(&mut conn, "200 OK", ctype, &body, method == "HEAD")?;
            Ok(true)
        }
        ("GET" | "HEAD", _) => {
            reply(&mut conn, "404 Not Found", "text/plain", "mltrace serves only /metrics\n", false)?;
            Ok(false)
        }
        _ => {
            reply(&mut conn, "405 Method Not Allowed", "text/plain", "mltrace answers only GET /metrics\n", false)?;
            Ok(false)
        }
    }
}
