//! OTLP/HTTP (protobuf): each snapshot as an `ExportMetricsServiceRequest`
//! (OpenTelemetry's generated messages), POSTed to a collector with
//! deadlines, from a thread of its own. A push that fails, or finds the
//! previous one still going, is dropped and counted: the recording never
//! waits for a collector.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1 as pb;
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message;

use crate::metrics::Kind;
use crate::snapshot::{Snapshot, Value};
use crate::LiveError;

const CONNECT: Duration = Duration::from_secs(2);
const EXCHANGE: Duration = Duration::from_secs(5);

/// Where pushes go: `http://HOST[:PORT][/PATH]` (port 4318 and path
/// `/v1/metrics` by default, as OTLP/HTTP's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, LiveError> {
        let bad = |why: &str| LiveError::BadUrl { url: url.to_string(), why: why.to_string() };
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err(bad(
                    "https is not supported: give the collector's plain http endpoint (a local agent or sidecar, \
                     e.g. http://localhost:4318)",
                ))
            }
            Some((s, _)) => return Err(bad(&format!("scheme {s}: only http is supported"))),
            None => return Err(bad("expected http://HOST[:PORT][/PATH]")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let path = if path.is_empty() || path == "/" { "/v1/metrics" } else { path };
        let port = |p: &str| {
            p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| bad("the port is not a number from 1 to 65535"))
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, tail) = v6.split_once(']').ok_or_else(|| bad("an IPv6 address needs its closing ]"))?;
            match tail.strip_prefix(':') {
                Some(p) => (h, port(p)?),
                None if tail.is_empty() => (h, 4318),
                None => return Err(bad("expected :PORT after the IPv6 address")),
            }
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, port(p)?),
                None => (authority, 4318),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Target { url: url.to_string(), host: host.to_string(), port, path: path.to_string() })
    }
}

/// The resource the points belong to (with the snapshot's rank).
pub struct Resources {
    pub host: String,
    pub job: String,
}

fn kv(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.into())) }),
        ..Default::default()
    }
}

/// The request for `snap`.
pub fn request(snap: &Snapshot, res: &Resources) -> ExportMetricsServiceRequest {
    let (start, now) = (snap.start_unix_ns, snap.taken_unix_ns);
    let attrs = |labels: &[(&str, String)]| labels.iter().map(|(k, v)| kv(k, v)).collect::<Vec<_>>();
    let number = |labels: &[(&str, String)], v: f64, cumulative: bool| pb::NumberDataPoint {
        attributes: attrs(labels),
        start_time_unix_nano: if cumulative { start } else { 0 },
        time_unix_nano: now,
        value: Some(pb::number_data_point::Value::AsDouble(v)),
        ..Default::default()
    };
    let metrics = snap
        .families
        .iter()
        .map(|(m, points)| {
            let data = match m.kind {
                Kind::Gauge => pb::metric::Data::Gauge(pb::Gauge {
                    data_points: points
                        .iter()
                        .filter_map(|p| match p.value {
                            Value::F64(v) => Some(number(&p.labels, v, false)),
                            _ => None,
                        })
                        .collect(),
                }),
                Kind::Counter => pb::metric::Data::Sum(pb::Sum {
                    data_points: points
                        .iter()
                        .filter_map(|p| match p.value {
                            Value::F64(v) => Some(number(&p.labels, v, true)),
                            _ => None,
                        })
                        .collect(),
                    aggregation_temporality: pb::AggregationTemporality::Cumulative as i32,
                    is_monotonic: true,
                }),
                Kind::Histogram => pb::metric::Data::Histogram(pb::Histogram {
                    data_points: points
                        .iter()
                        .filter_map(|p| match &p.value {
                            Value::Hist { bounds, counts, count, sum } => Some(pb::HistogramDataPoint {
                                attributes: attrs(&p.labels),
                                start_time_unix_nano: start,
                                time_unix_nano: now,
                                count: *count,
                                sum: Some(*sum),
                                bucket_counts: counts.clone(),
                                explicit_bounds: bounds.to_vec(),
                                ..Default::default()
                            }),
                            _ => None,
                        })
                        .collect(),
                    aggregation_temporality: pb::AggregationTemporality::Cumulative as i32,
                }),
            };
            pb::Metric {
                name: m.name.into(),
                description: m.help.into(),
                unit: m.unit.otel().into(),
                data: Some(data),
                ..Default::default()
            }
        })
        .collect();
    let mut attributes = vec![kv("service.name", "mltrace"), kv("host.name", &res.host), kv("mltrace.job", &res.job)];
    if let Some(r) = snap.rank {
        attributes.push(kv("mltrace.rank", &r.to_string()));
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![pb::ResourceMetrics {
            resource: Some(Resource { attributes, ..Default::default() }),
            scope_metrics: vec![pb::ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "mltrace".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// POSTs `body` to `t`; an error says what went wrong.
pub fn post(t: &Target, body: &[u8]) -> Result<(), String> {
    let addr = (t.host.as_str(), t.port)
        .to_socket_addrs()
        .map_err(|e| format!("{}: {e}", t.host))?
        .next()
        .ok_or_else(|| format!("{}: no address", t.host))?;
    let mut c = TcpStream::connect_timeout(&addr, CONNECT).map_err(|e| format!("{addr}: {e}"))?;
    let exchange = |c: &mut TcpStream| -> io::Result<String> {
        c.set_write_timeout(Some(EXCHANGE))?;
        c.set_read_timeout(Some(EXCHANGE))?;
        let host = if t.host.contains(':') { format!("[{}]", t.host) } else { t.host.clone() };
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {host}:{}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            t.path,
            t.port,
            body.len()
        );
        c.write_all(head.as_bytes())?;
        c.write_all(body)?;
        let mut status = Vec::new();
        let mut b = [0u8; 256];
        while !status.contains(&b'\n') && status.len() < 4096 {
            match c.read(&mut b)? {
                0 => break,
                n => status.extend_from_slice(&b[..n]),
            }
        }
        Ok(String::from_utf8_lossy(status.split(|&x| x == b'\n').next().unwrap_or_default()).trim().to_string())
    };
    let line = exchange(&mut c).map_err(|e| format!("{addr}: {e}"))?;
    match line.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') => Ok(()),
        Some(_) => Err(format!("{} answered {line}", t.url)),
        None => Err(format!("{} sent no HTTP status", t.url)),
    }
}

/// The encoded request.
pub fn encode(snap: &Snapshot, res: &Resources) -> Vec<u8> {
    request(snap, res).encode_to_vec()
}
