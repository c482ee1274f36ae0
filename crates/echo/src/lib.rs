//! A test backend honouring the Gateway API conformance "echo-basic"
//! contract: answers every request with a JSON description of it (path,
//! host, method, proto, headers, namespace, pod), sets response headers
//! from `X-Echo-Set-Header`, sleeps for `?delay=`, and answers gRPC health
//! checks. HTTP/1.1 and h2c on one port.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;

#[derive(Clone, Debug, Default)]
pub struct Config {
    pub namespace: String,
    pub pod: String,
}

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed()
}

/// Go-style canonical header name (`x-foo-bar` → `X-Foo-Bar`).
fn canonical(name: &str) -> String {
    name.split('-')
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// Go duration subset: `1s`, `500ms`, `1m`, `2h`.
fn parse_delay(s: &str) -> Option<Duration> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .map(|i| s.split_at(i))?;
    let n: f64 = num.parse().ok()?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    Some(Duration::from_secs_f64(secs.clamp(0.0, 60.0)))
}

fn query(uri: &hyper::Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

struct Shared {
    config: Config,
    port: u16,
    retries: Mutex<HashMap<String, u32>>,
}

async fn handle(req: Request<Incoming>, shared: Arc<Shared>) -> Result<Response<Body>, Infallible> {
    let is_grpc = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"));
    if is_grpc {
        return Ok(grpc(req.uri().path()));
    }
    let q = query(req.uri());
    if let Some(d) = q.get("delay").and_then(|d| parse_delay(d)) {
        tokio::time::sleep(d).await;
    }
    if req.uri().path().starts_with("/retry") {
        let uuid = q.get("uuid").cloned().unwrap_or_default();
        let succeed_after: u32 = q.get("succeedAfter").and_then(|v| v.parse().ok()).unwrap_or(0);
        let seen = {
            let mut m = shared.retries.lock().unwrap_or_else(|p| p.into_inner());
            let c = m.entry(uuid).or_insert(0);
            *c += 1;
            *c
        };
        if seen <= succeed_after {
            let code = q
                .get("responseCode")
                .and_then(|v| v.parse::<u16>().ok())
                .and_then(|c| StatusCode::from_u16(c).ok());
            return Ok(Response::builder()
                .status(code.unwrap_or(StatusCode::SERVICE_UNAVAILABLE))
                .body(full(""))
                .unwrap_or_default());
        }
    }
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in req.headers() {
        if k == "host" {
            continue;
        }
        headers
            .entry(canonical(k.as_str()))
            .or_default()
            .push(String::from_utf8_lossy(v.as_bytes()).into_owned());
    }
    let host = req
        .headers()
        .get("host")
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let proto = match req.version() {
        hyper::Version::HTTP_2 => "HTTP/2.0",
        hyper::Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    let body = serde_json::json!({
        "path": path,
        "host": host,
        "method": req.method().as_str(),
        "proto": proto,
        "headers": headers,
        "namespace": shared.config.namespace,
        "ingress": "",
        "service": "",
        "pod": shared.config.pod,
        "httpPort": shared.port.to_string(),
    });
    let mut resp = Response::builder()
        .status(200)
        .header("content-type", "application/json");
    // X-Echo-Set-Header: Name:value,Name2:value2
    if let Some(set) = req
        .headers()
        .get("x-echo-set-header")
        .and_then(|v| v.to_str().ok())
    {
        for pair in set.split(',').filter(|p| !p.is_empty()) {
            if let Some((n, v)) = pair.split_once(':') {
                resp = resp.header(n.trim(), v.trim());
            }
        }
    }
    Ok(resp.body(full(body.to_string())).unwrap_or_else(|_| {
        Response::builder()
            .status(500)
            .body(full("bad X-Echo-Set-Header"))
            .unwrap_or_default()
    }))
}

/// A unary gRPC answer: health checks get SERVING; any other method gets
/// an empty message, with the path echoed in `x-echo-grpc-path`.
fn grpc(path: &str) -> Response<Body> {
    let message: &[u8] = if path == "/grpc.health.v1.Health/Check" {
        &[0x08, 0x01]
    } else {
        &[]
    };
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
    let body = Full::new(Bytes::from(framed))
        .with_trailers(async move { Some(Ok(trailers)) })
        .boxed();
    Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .header("x-echo-grpc-path", path)
        .body(body)
        .unwrap_or_default()
}

/// Serves on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, config: Config) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let shared = Arc::new(Shared {
        config,
        port,
        retries: Mutex::new(HashMap::new()),
    });
    loop {
        let (stream, _) = listener.accept().await?;
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| handle(req, shared.clone()));
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// A server on 127.0.0.1:0 in a background thread; stops when dropped.
pub struct Handle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Handle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
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

pub fn spawn(config: Config) -> std::io::Result<Handle> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    std_listener.set_nonblocking(true)?;
    let addr = std_listener.local_addr()?;
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        rt.block_on(async move {
            let Ok(listener) = TcpListener::from_std(std_listener) else {
                return;
            };
            tokio::select! {
                _ = serve(listener, config) => {}
                _ = rx => {}
            }
        });
    });
    Ok(Handle {
        addr,
        stop: Some(tx),
        thread: Some(thread),
    })
}
