//! `mltrace export --open`: hands a written trace to ui.perfetto.dev the way
//! Perfetto's own `tools/open_trace_in_ui` does: serve the file once over
//! HTTP on 127.0.0.1:9001 and open the UI with `#!/?url=` pointing there.
//! The file never leaves the user's machines.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// The UI's Content-Security-Policy lets it fetch from http://127.0.0.1:9001
/// only (trace_processor's RPC port), so the trace must be served there.
pub const PORT: u16 = 9001;
pub const UI_ORIGIN: &str = "https://ui.perfetto.dev";

const MAX_HEADER_BYTES: usize = 16 << 10;
const MAX_CONNECTIONS: usize = 32;
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to wait for the client to close after the last byte.
const LINGER: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(20);

/// What the messages and the browser launch depend on.
#[derive(Debug, Clone)]
pub struct Env {
    /// A browser can be opened here (macOS, or DISPLAY / WAYLAND_DISPLAY set).
    pub display: bool,
    pub macos: bool,
    pub host: Option<String>,
    pub user: Option<String>,
}

impl Env {
    pub fn detect() -> Env {
        let set = |v: &str| std::env::var_os(v).is_some_and(|s| !s.is_empty());
        let macos = cfg!(target_os = "macos");
        // Under sudo, the person who will ssh in is SUDO_USER, not root.
        let user = ["SUDO_USER", "USER"].iter().find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
        Env { display: macos || set("DISPLAY") || set("WAYLAND_DISPLAY"), macos, host: hostname(), user }
    }
}

fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for writes of buf.len() bytes.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..end]).into_owned()).filter(|s| !s.is_empty())
}

/// The name the file is served under: its own name with anything but
/// `[A-Za-z0-9._-]` replaced, so the URL needs no escaping inside the UI's
/// `#!/?url=` (which would otherwise have to be escaped twice).
pub fn url_name(path: &Path) -> String {
    let raw = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name: String =
        raw.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    match name.as_str() {
        "" | "." | ".." => "trace".into(),
        // The UI probes /status for a trace_processor: a trace named so
        // must not answer it.
        "status" => "trace-status".into(),
        _ => name,
    }
}

pub fn deep_link(url_name: &str, port: u16) -> String {
    format!("{UI_ORIGIN}/#!/?url=http://127.0.0.1:{port}/{url_name}")
}

/// What to tell the user once the server listens: the link always, and on a
/// machine without a display the tunnel to run from the laptop first.
pub fn instructions(url_name: &str, port: u16, env: &Env) -> String {
    let link = deep_link(url_name, port);
    let mut s = format!("mltrace: serving {url_name} once on http://127.0.0.1:{port}/{url_name} (Ctrl-C to stop)\n");
    if env.display {
        s += &format!("mltrace: opening {link}\n");
    } else {
        let user = env.user.as_deref().map(|u| format!("{u}@")).unwrap_or_default();
        let host = env.host.as_deref().unwrap_or("THIS-MACHINE");
        s += &format!(
            "mltrace: no display here; on your laptop run\n  ssh -L {port}:127.0.0.1:{port} {user}{host}\n\
             and then open\n  {link}\n"
        );
    }
    // Recent Chrome asks before a public site may reach loopback (Local
    // Network Access); denied, the UI only shows a failed fetch.
    s += "mltrace: if the browser asks, let ui.perfetto.dev access devices on your local network\n";
    s
}

/// Listens on 127.0.0.1:`port`, with a clear error when it is taken.
pub fn bind(port: u16) -> anyhow::Result<TcpListener> {
    match TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => bail!(
            "127.0.0.1:{port} is already in use (a `trace_processor --httpd`, or another `mltrace export --open`?); \
             stop it, or open the trace by hand at {UI_ORIGIN} (Open trace file)"
        ),
        Err(e) => Err(e).with_context(|| format!("listening on 127.0.0.1:{port}")),
    }
}

/// Serves `path` on 127.0.0.1:`port` until the UI has fetched it completely
/// once, opening the UI when this machine has a display.
pub fn serve(path: &Path, port: u16, out: &mut dyn Write) -> anyhow::Result<()> {
    let listener = bind(port)?;
    serve_on(listener, path, &Env::detect(), out)
}

/// [`serve`] on a listener the caller bound, with an explicit [`Env`].
pub fn serve_on(listener: TcpListener, path: &Path, env: &Env, out: &mut dyn Write) -> anyhow::Result<()> {
    File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let port = listener.local_addr()?.port();
    let name = url_name(path);
    write!(out, "{}", instructions(&name, port, env))?;
    out.flush()?;
    if env.display {
        if let Err(e) = launch_browser(&deep_link(&name, port), env.macos) {
            writeln!(out, "mltrace: could not start a browser ({e}); open the link above yourself")?;
        }
    }
    let target = Arc::new(Target { path: path.to_path_buf(), url_path: format!("/{name}") });
    let active = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    // Non-blocking accept so that the loop also sees a finished transfer;
    // one thread per connection so that an idle browser socket blocks nothing.
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    continue;
                }
                active.fetch_add(1, Ordering::SeqCst);
                let (target, active, done_tx) = (target.clone(), active.clone(), done_tx.clone());
                thread::spawn(move || {
                    if let Ok(Some(bytes)) = handle(stream, &target) {
                        let _ = done_tx.send(bytes);
                    }
                    active.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
            Err(e) => return Err(e).context("accepting a connection on 127.0.0.1"),
        }
        match done_rx.recv_timeout(POLL) {
            Ok(bytes) => {
                writeln!(out, "mltrace: the UI has the trace ({bytes} bytes sent)")?;
                return Ok(());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => unreachable!("done_tx is held here"),
        }
    }
}

fn launch_browser(link: &str, macos: bool) -> io::Result<()> {
    let prog = if macos { "open" } else { "xdg-open" };
    let mut child =
        Command::new(prog).arg(link).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    // xdg-open may stay until the browser it started exits: reap it aside.
    thread::spawn(move || child.wait());
    Ok(())
}

struct Target {
    path: PathBuf,
    url_path: String,
}

struct Request {
    method: String,
    path: String,
}

/// Answers one request; Some(bytes) when it sent the whole trace and the
/// client then closed cleanly (a reset means it did not take it all).
fn handle(mut s: TcpStream, target: &Target) -> io::Result<Option<u64>> {
    // Accepted sockets inherit O_NONBLOCK from the listener on BSDs/macOS.
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let sent = match read_request(&mut s)? {
        None => return Ok(None),
        Some(None) => {
            respond(&mut s, "400 Bad Request", "")?;
            None
        }
        Some(Some(req)) => answer(&mut s, &req, target)?,
    };
    s.flush()?;
    s.shutdown(Shutdown::Write)?;
    Ok(if linger(&mut s) { sent } else { None })
}

fn answer(s: &mut TcpStream, req: &Request, target: &Target) -> io::Result<Option<u64>> {
    // The UI may add a query string (cache busting); the path alone counts.
    let path = req.path.split(['?', '#']).next().unwrap_or_default();
    if path != target.url_path {
        respond(s, "404 Not Found", "")?;
        return Ok(None);
    }
    match req.method.as_str() {
        "GET" | "HEAD" => {
            let file = File::open(&target.path)?;
            let len = file.metadata()?.len();
            respond(s, "200 OK", &format!("Content-Type: application/octet-stream\r\nContent-Length: {len}\r\n"))?;
            if req.method == "HEAD" {
                return Ok(None);
            }
            // File to socket: std uses sendfile/splice here on Linux.
            let n = io::copy(&mut file.take(len), s)?;
            if n != len {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the trace file shrank while being sent"));
            }
            Ok(Some(len))
        }
        "OPTIONS" => {
            // Chrome's Private Network Access preflight (a public origin
            // reaching loopback) wants the Allow-Private-Network answer.
            respond(
                s,
                "204 No Content",
                "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n\
                 Access-Control-Allow-Headers: *\r\n\
                 Access-Control-Allow-Private-Network: true\r\n\
                 Access-Control-Max-Age: 600\r\n",
            )?;
            Ok(None)
        }
        _ => {
            respond(s, "404 Not Found", "")?;
            Ok(None)
        }
    }
}

/// Writes a status line and headers; every answer carries the CORS origin
/// (as upstream's does) so the UI sees our 404s as 404s, not network errors.
fn respond(s: &mut TcpStream, status: &str, extra: &str) -> io::Result<()> {
    let length = if extra.contains("Content-Length") { "" } else { "Content-Length: 0\r\n" };
    let head = format!(
        "HTTP/1.1 {status}\r\nAccess-Control-Allow-Origin: {UI_ORIGIN}\r\nCache-Control: no-cache\r\n\
         Connection: close\r\n{length}{extra}\r\n"
    );
    s.write_all(head.as_bytes())
}

/// Reads the request head. None: closed or timed out before a request;
/// Some(None): not a request we can parse.
fn read_request(s: &mut TcpStream) -> io::Result<Option<Option<Request>>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > MAX_HEADER_BYTES {
            return Ok(Some(None));
        }
        match s.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or_default().split_whitespace();
    Ok(Some(match (parts.next(), parts.next(), parts.next()) {
        (Some(method), Some(path), Some(v)) if v.starts_with("HTTP/1.") => {
            Some(Request { method: method.to_string(), path: path.to_string() })
        }
        _ => None,
    }))
}

/// After our FIN, waits (bounded) for the client's: true on a clean close
/// or a client that keeps the socket open, false on a reset (it closed with
/// our data unread, so it did not get everything).
fn linger(s: &mut TcpStream) -> bool {
    let deadline = Instant::now() + LINGER;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return true;
        }
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::thread::JoinHandle;

    const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

    fn no_display() -> Env {
        Env { display: false, macos: false, host: Some("node7".into()), user: Some("alice".into()) }
    }

    /// A trace-sized file (bigger than loopback socket buffers, so the body
    /// really streams) of bytes that are not all alike.
    fn temp_trace(tag: &str, len: usize) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mltrace-open-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run 1.perfetto-trace");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let body: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(&path, body).unwrap();
        path
    }

    fn start(path: &Path) -> (SocketAddr, JoinHandle<(anyhow::Result<()>, String)>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let path = path.to_path_buf();
        let h = thread::spawn(move || {
            let mut out = Vec::new();
            let r = serve_on(listener, &path, &no_display(), &mut out);
            (r, String::from_utf8(out).unwrap())
        });
        (addr, h)
    }

    struct Response {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl Response {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
        }
    }

    fn request(addr: SocketAddr, head: &str) -> Response {
        let mut s = TcpStream::connect_timeout(&addr, CLIENT_TIMEOUT).unwrap();
        s.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(CLIENT_TIMEOUT)).unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head") + 4;
        let head = String::from_utf8(raw[..end].to_vec()).unwrap();
        let mut lines = head.lines();
        let status = lines.next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        Response { status, headers, body: raw[end..].to_vec() }
    }

    fn get(path: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:9001\r\nOrigin: {UI_ORIGIN}\r\n\r\n")
    }

    fn wait_finished<T>(h: &JoinHandle<T>) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !h.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        h.is_finished()
    }

    /// Asks for `file`, reads a little of it and hangs up.
    fn cut_transfer(addr: SocketAddr, file: &str) {
        {
            let mut s = TcpStream::connect_timeout(&addr, CLIENT_TIMEOUT).unwrap();
            s.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
            s.write_all(get(file).as_bytes()).unwrap();
            let mut some = [0u8; 1024];
            s.read_exact(&mut some).unwrap();
        }
        // Time for the server to see the hang-up (it would stop at once).
        thread::sleep(Duration::from_millis(300));
    }

    #[test]
    fn serves_the_trace_once_to_the_ui() {
        let path = temp_trace("once", 8 << 20);
        let want = std::fs::read(&path).unwrap();
        let (addr, server) = start(&path);
        let file = "/run_1.perfetto-trace";

        // The UI's probe for a trace_processor must not succeed.
        for probe in [get("/status"), "POST /status HTTP/1.1\r\nContent-Length: 0\r\n\r\n".into()] {
            let r = request(addr, &probe);
            assert_eq!(r.status, 404, "{probe}");
        }
        assert_eq!(request(addr, &get("/other.perfetto-trace")).status, 404);
        let r = request(
            addr,
            &format!(
                "OPTIONS {file} HTTP/1.1\r\nOrigin: {UI_ORIGIN}\r\nAccess-Control-Request-Method: GET\r\n\
                 Access-Control-Request-Private-Network: true\r\n\r\n"
            ),
        );
        assert_eq!(r.status, 204);
        assert_eq!(r.header("Access-Control-Allow-Origin"), Some(UI_ORIGIN));
        assert!(r.header("Access-Control-Allow-Methods").unwrap().contains("GET"));
        assert_eq!(r.header("Access-Control-Allow-Private-Network"), Some("true"));
        let r = request(addr, &format!("HEAD {file} HTTP/1.1\r\n\r\n"));
        assert_eq!((r.status, r.header("Content-Length")), (200, Some(want.len().to_string().as_str())));
        assert!(r.body.is_empty());

        cut_transfer(addr, file);
        assert!(!server.is_finished(), "the server stopped before a complete transfer");

        let r = request(addr, &get(&format!("{file}?cache=1")));
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Access-Control-Allow-Origin"), Some(UI_ORIGIN));
        assert_eq!(r.header("Content-Length"), Some(want.len().to_string().as_str()));
        assert!(r.body == want, "body differs: {} bytes, want {}", r.body.len(), want.len());

        assert!(wait_finished(&server), "the server still runs after a complete transfer");
        let (result, out) = server.join().unwrap();
        result.unwrap();
        let port = addr.port();
        assert!(out.contains(&format!("https://ui.perfetto.dev/#!/?url=http://127.0.0.1:{port}/run_1.perfetto-trace")));
        assert!(out.contains(&format!("ssh -L {port}:127.0.0.1:{port} alice@node7")), "{out}");
        assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(), "still listening");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_small_trace_cut_short_in_the_socket_buffers_does_not_count() {
        // All of it fits in the loopback buffers, so every write succeeds: only
        // the client's reset on close tells that it did not take it all.
        let path = temp_trace("small", 64 << 10);
        let (addr, server) = start(&path);
        cut_transfer(addr, "/run_1.perfetto-trace");
        assert!(!server.is_finished(), "a cut transfer counted as complete");
        let r = request(addr, &get("/run_1.perfetto-trace"));
        assert!(r.status == 200 && r.body == std::fs::read(&path).unwrap());
        assert!(wait_finished(&server));
        server.join().unwrap().0.unwrap();
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_taken_port_is_a_clear_error() {
        let path = temp_trace("taken", 16);
        let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = taken.local_addr().unwrap().port();
        let mut out = Vec::new();
        let e = serve(&path, port, &mut out).unwrap_err().to_string();
        assert!(e.contains(&format!("127.0.0.1:{port} is already in use")), "{e}");
        assert!(out.is_empty());
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn messages() {
        assert_eq!(
            deep_link("a.perfetto-trace", PORT),
            "https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/a.perfetto-trace"
        );
        assert_eq!(url_name(Path::new("/x/my run (1)&.json")), "my_run__1__.json");
        assert_eq!(url_name(Path::new("/x/status")), "trace-status");
        assert_eq!(url_name(Path::new("/")), "trace");

        let text = instructions("t.perfetto-trace", PORT, &no_display());
        assert!(text.contains("\n  ssh -L 9001:127.0.0.1:9001 alice@node7\n"), "{text}");
        assert!(
            text.contains("\n  https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/t.perfetto-trace\n"),
            "{text}"
        );
        let anon = Env { user: None, host: None, ..no_display() };
        assert!(instructions("t", PORT, &anon).contains("ssh -L 9001:127.0.0.1:9001 THIS-MACHINE\n"));

        let shown = Env { display: true, ..no_display() };
        let text = instructions("t.perfetto-trace", PORT, &shown);
        assert!(!text.contains("ssh"), "{text}");
        assert!(text.contains("local network"), "{text}");
        assert!(text.contains("https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/t.perfetto-trace"));
    }
}
