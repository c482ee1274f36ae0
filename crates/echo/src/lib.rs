//! A test backend honouring the Gateway API conformance "echo-basic"
//! contract, for end-to-end tests, the quickstart and conformance runs on
//! loopback. HTTP/1.1 and h2c (prior knowledge) share one port.
//!
//! * Any path: `200`, `Content-Type: application/json`, body
//!   `{"path", "host", "method", "proto", "headers", "httpPort",
//!   "namespace", "ingress", "service", "pod"}` laid out as Go's
//!   `json.MarshalIndent(v, "", " ")` (headers keyed by canonical Go names,
//!   `Host` not among them). `?delay=<Go duration>` sleeps first; request
//!   header `X-Echo-Set-Header: Name:value,Name2:value2` sets response
//!   headers (a repeated name is comma-joined).
//! * `/retry` and `/retry/…`: `uuid` and `succeedAfter` required (else
//!   400); the first `succeedAfter` requests per `uuid` get `responseCode`,
//!   or, without one, an abrupt TCP reset (`SO_LINGER` 0; on h2c the whole
//!   connection); optional `delayRetry=<Go duration>` before a failure;
//!   later requests are echoed.
//! * `/health`: `200 OK`; `/status/NNN`: status NNN (400 if malformed).
//! * gRPC (`content-type: application/grpc…`, over h2c): health `Check`
//!   answers SERVING; any other method an echo-basic `EchoResponse`
//!   message with `grpc-status: 0` (echo-basic's unimplemented
//!   `GrpcEcho/EchoThree` answers 12); all carry `x-echo-grpc-path`.

mod duration;
mod gostyle;
mod grpc;
mod query;

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// Who this backend pretends to be (echo-basic's `NAMESPACE` and
/// `POD_NAME`). `ingress` and `service` are always echoed as "".
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub namespace: String,
    pub pod: String,
}

/// Serving knobs beyond the echoed identity.
#[derive(Clone, Debug)]
pub struct Options {
    /// Print `Echoing back request made to URI to client (ADDR)` on stdout
    /// for every echoed request, like echo-basic (off by default: a reader
    /// that stops draining a piped stdout would otherwise stall the server).
    pub log_requests: bool,
    /// How long [`serve_with`] lets in-flight requests finish after its
    /// shutdown future completes.
    pub grace: Duration,
    /// Every echoed request's URI is appended here: the in-process
    /// equivalent of reading echo-basic's log (the conformance runner checks
    /// request mirroring with it).
    pub requests: Option<RequestLog>,
}

/// Request URIs (path and query) in arrival order.
pub type RequestLog = Arc<Mutex<Vec<String>>>;

impl Default for Options {
    fn default() -> Self {
        Options {
            log_requests: false,
            grace: Duration::from_secs(5),
            requests: None,
        }
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

/// Request bodies are read and discarded (so connections stay reusable) up
/// to this many bytes.
const DRAIN_LIMIT: usize = 16 << 20;

struct State {
    config: Config,
    port: u16,
    log: bool,
    requests: Option<RequestLog>,
    retries: Mutex<HashMap<String, i64>>,
}

/// Per connection: a handler asks for an abrupt reset here.
#[derive(Default)]
struct ConnCtl {
    reset: AtomicBool,
    notify: Notify,
}

impl ConnCtl {
    fn request_reset(&self) {
        self.reset.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// The accepted socket; when dropped after a reset request it closes with
/// `SO_LINGER` 0, i.e. sends RST instead of FIN.
struct ResetStream {
    inner: TcpStream,
    ctl: Arc<ConnCtl>,
}

impl Drop for ResetStream {
    fn drop(&mut self) {
        if self.ctl.reset.load(Ordering::SeqCst) {
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResetStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResetStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Serves on `listener` until the returned future is dropped (or accepting
/// fails permanently, which it does not: accept errors are retried).
pub async fn serve(listener: TcpListener, config: Config) -> io::Result<()> {
    serve_with(listener, config, Options::default(), std::future::pending()).await
}

/// Serves on `listener` until `shutdown` completes; then stops accepting,
/// asks every connection to finish (HTTP/2 GOAWAY, HTTP/1 close after the
/// current response) and waits up to `options.grace` for them.
pub async fn serve_with(
    listener: TcpListener,
    config: Config,
    options: Options,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let port = listener.local_addr()?.port();
    let state = Arc::new(State {
        config,
        port,
        log: options.log_requests,
        requests: options.requests,
        retries: Mutex::new(HashMap::new()),
    });
    let builder = Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE, ECONNABORTED, …: back off and keep serving.
                    eprintln!("echo: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let ctl = Arc::new(ConnCtl::default());
        let io = TokioIo::new(ResetStream {
            inner: stream,
            ctl: ctl.clone(),
        });
        let svc = {
            let (state, ctl) = (state.clone(), ctl.clone());
            hyper::service::service_fn(move |req| handle(req, state.clone(), ctl.clone(), peer))
        };
        let conn = graceful.watch(builder.serve_connection(io, svc).into_owned());
        tokio::spawn(async move {
            tokio::select! {
                _ = conn => {}
                // Dropping the connection drops the socket: RST.
                () = ctl.notify.notified() => {}
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(options.grace, graceful.shutdown()).await;
    Ok(())
}

/// A server on 127.0.0.1 (ephemeral port) in a background thread with its
/// own runtime. Dropping it stops the server at once (open connections are
/// closed, in-flight requests abandoned).
pub struct Handle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Handle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// [`spawn_with`] default options.
pub fn spawn(config: Config) -> io::Result<Handle> {
    spawn_with(config, Options::default())
}

pub fn spawn_with(config: Config, options: Options) -> io::Result<Handle> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(format!("echo-{}", addr.port()))
        .spawn(move || {
            rt.block_on(async move {
                let listener = match TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        eprintln!("echo: {e}");
                        return;
                    }
                };
                tokio::select! {
                    r = serve_with(listener, config, options, std::future::pending()) => {
                        if let Err(e) = r {
                            eprintln!("echo: {e}");
                        }
                    }
                    _ = rx => {}
                }
            });
            // Dropping `rt` here cancels every connection task.
        })?;
    Ok(Handle {
        addr,
        stop: Some(tx),
        thread: Some(thread),
    })
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
    ctl: Arc<ConnCtl>,
    peer: SocketAddr,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    drain(body).await;
    if grpc::is_grpc(&parts.headers) {
        return Ok(grpc::respond(&parts, &state.config));
    }
    // echo-basic's mux sees the path with `//` collapsed.
    let path = parts.uri.path().replace("//", "/");
    let resp = if path == "/health" {
        text(StatusCode::OK, "OK")
    } else if path.starts_with("/status/") {
        status(&parts, &ctl).await
    } else if path == "/retry" || path.starts_with("/retry/") {
        retry(&parts, &state, &ctl, peer).await
    } else {
        echo(&parts, &state, peer).await
    };
    Ok(resp)
}

/// Reads and discards the request body (bounded).
async fn drain(mut body: Incoming) {
    let mut seen = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            seen += data.len();
            if seen > DRAIN_LIMIT {
                break;
            }
        }
    }
}

fn text(code: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full(body))
        .unwrap_or_default()
}

/// `{"message": err}` with `code`, like echo-basic's `processError`.
fn error(code: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(CONTENT_TYPE, "application/json")
        .header("x-content-type-options", "nosniff")
        .body(full(gostyle::marshal(&serde_json::json!({ "message": message }))))
        .unwrap_or_default()
}

/// An empty response with status `code` as Go's `WriteHeader(code)` would
/// end up sending: a 1xx is informational, so the final status is 200; a
/// code outside 100..=999 makes Go's handler panic, which aborts the
/// connection.
async fn bare_status(code: i64, ctl: &ConnCtl) -> Response<Body> {
    let status = u16::try_from(code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok());
    match status {
        None => reset(ctl).await,
        Some(s) => Response::builder()
            .status(if s.is_informational() { StatusCode::OK } else { s })
            .body(full(Bytes::new()))
            .unwrap_or_default(),
    }
}

/// Resets the TCP connection (the connection task drops the socket with
/// `SO_LINGER` 0). The response is never sent; the pause only keeps an
/// HTTP/2 stream task from answering before the connection is gone.
async fn reset(ctl: &ConnCtl) -> Response<Body> {
    ctl.request_reset();
    tokio::time::sleep(Duration::from_secs(2)).await;
    error(StatusCode::INTERNAL_SERVER_ERROR, "connection reset")
}

/// The RequestURI as received: origin-form `path?query` (HTTP/1 and
/// HTTP/2 `:path`), or the whole target in absolute/authority form.
fn request_uri(parts: &Parts) -> String {
    let uri = &parts.uri;
    let h1_full_target =
        parts.version != Version::HTTP_2 && (uri.scheme().is_some() || uri.path_and_query().is_none());
    if h1_full_target {
        return uri.to_string();
    }
    uri.path_and_query()
        .map_or_else(|| uri.path().to_string(), |p| p.as_str().to_string())
}

/// `/status/NNN` (on the raw RequestURI, so a query makes it malformed).
async fn status(parts: &Parts, ctl: &ConnCtl) -> Response<Body> {
    let uri = request_uri(parts);
    match uri.strip_prefix("/status/") {
        Some(d) if d.len() == 3 && d.bytes().all(|b| b.is_ascii_digit()) => {
            bare_status(d.parse().unwrap_or(0), ctl).await
        }
        _ => bare_status(400, ctl).await,
    }
}

async fn retry(parts: &Parts, state: &State, ctl: &ConnCtl, peer: SocketAddr) -> Response<Body> {
    let q = query::Query::parse(parts.uri.query());
    let uuid = q.get("uuid");
    if uuid.is_empty() {
        return text(StatusCode::BAD_REQUEST, "uuid is required");
    }
    let Ok(succeed_after) = q.get("succeedAfter").parse::<i64>() else {
        return text(StatusCode::BAD_REQUEST, "succeedAfter is required");
    };
    let fail = {
        let mut attempts = state.retries.lock().unwrap_or_else(|p| p.into_inner());
        let seen = attempts.get(uuid).copied().unwrap_or(0);
        if seen < succeed_after {
            attempts.insert(uuid.to_string(), seen + 1);
        }
        seen < succeed_after
    };
    if !fail {
        return echo(parts, state, peer).await;
    }
    if let Err(e) = delay(&q, "delayRetry").await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, &e);
    }
    match q.get("responseCode").parse::<i64>() {
        Ok(code) => bare_status(code, ctl).await,
        Err(_) => reset(ctl).await,
    }
}

/// Sleeps for the Go duration in query parameter `key`, if any.
async fn delay(q: &query::Query, key: &str) -> Result<(), String> {
    let d = q.get(key);
    if d.is_empty() {
        return Ok(());
    }
    let d = duration::parse(d)?;
    tokio::time::sleep(d).await;
    Ok(())
}

async fn echo(parts: &Parts, state: &State, peer: SocketAddr) -> Response<Body> {
    let uri = request_uri(parts);
    if state.log {
        println!("Echoing back request made to {uri} to client ({peer})");
    }
    if let Some(log) = &state.requests
        && let Ok(mut log) = log.lock()
    {
        log.push(uri.clone());
    }
    let q = query::Query::parse(parts.uri.query());
    if let Err(e) = delay(&q, "delay").await {
        return error(StatusCode::INTERNAL_SERVER_ERROR, &e);
    }
    let h2 = parts.version == Version::HTTP_2;
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in &parts.headers {
        // Go moves Host to r.Host and consumes Transfer-Encoding.
        if k == "host" || (!h2 && k == "transfer-encoding") {
            continue;
        }
        headers
            .entry(gostyle::canonical_header(k.as_str()))
            .or_default()
            .push(String::from_utf8_lossy(v.as_bytes()).into_owned());
    }
    if h2 && let Some(cookies) = headers.get_mut("Cookie") {
        // Go's HTTP/2 server joins split cookie fields.
        if cookies.len() > 1 {
            *cookies = vec![cookies.join("; ")];
        }
    }
    let host = parts
        .uri
        .authority()
        .map(|a| a.to_string())
        .or_else(|| {
            parts
                .headers
                .get("host")
                .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        })
        .unwrap_or_default();
    let proto = match parts.version {
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    };
    let body = serde_json::json!({
        "path": uri,
        "host": host,
        "method": parts.method.as_str(),
        "proto": proto,
        "headers": headers,
        "httpPort": state.port.to_string(),
        "namespace": state.config.namespace,
        "ingress": "",
        "service": "",
        "pod": state.config.pod,
    });
    let mut resp = Response::builder().status(StatusCode::OK);
    if let Some(h) = resp.headers_mut() {
        for (name, value) in echo_set_headers(parts) {
            h.insert(name, value);
        }
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    }
    resp.body(full(gostyle::marshal_indent(&body)))
        .unwrap_or_default()
}

/// Response headers requested by `X-Echo-Set-Header: Name:value,Name2:value2`
/// (every instance of the header). A repeated name gets its values joined
/// with `,`; pairs with an invalid name or value are dropped, as Go drops
/// invalid header fields when writing.
fn echo_set_headers(parts: &Parts) -> Vec<(HeaderName, HeaderValue)> {
    let mut merged: Vec<(String, String)> = Vec::new();
    for list in parts.headers.get_all("x-echo-set-header") {
        let list = String::from_utf8_lossy(list.as_bytes());
        for pair in list.split(',') {
            let (name, value) = pair.trim().split_once(':').unwrap_or((pair.trim(), ""));
            let value = value.trim();
            match merged.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                Some((_, v)) => {
                    v.push(',');
                    v.push_str(value);
                }
                None => merged.push((name.to_string(), value.to_string())),
            }
        }
    }
    merged
        .into_iter()
        .filter_map(|(n, v)| {
            Some((
                HeaderName::from_bytes(n.as_bytes()).ok()?,
                HeaderValue::from_str(&v).ok()?,
            ))
        })
        .collect()
}
