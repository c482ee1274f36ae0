//! The echo backend over real sockets: HTTP/1.1 (raw and hyper), h2c,
//! delay, X-Echo-Set-Header, retry simulation (status codes and TCP
//! resets), gRPC health and echo (hand-made h2 and a real tonic client),
//! and the binary's CLI and SIGTERM handling.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;

const POD: &str = "infra-backend-v1-7b9c8d-x2x4z";

fn server() -> echo::Handle {
    echo::spawn(echo::Config {
        namespace: "gateway-conformance-infra".into(),
        pod: POD.into(),
    })
    .expect("spawn echo")
}

struct Raw {
    status: u16,
    /// Lower-cased names, in order.
    headers: Vec<(String, String)>,
    body: String,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("json body")
    }
}

/// Sends `request` verbatim on a fresh connection and reads to EOF.
fn raw(addr: SocketAddr, request: &str) -> std::io::Result<Raw> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(request.as_bytes())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no response head: {text:?}")))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("bad status line"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Raw {
        status,
        headers,
        body: body.to_string(),
    })
}

fn get(addr: SocketAddr, path: &str) -> std::io::Result<Raw> {
    raw(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: echo.test\r\nConnection: close\r\n\r\n"),
    )
}

#[test]
fn http1_echoes_the_request_like_echo_basic() {
    let srv = server();
    let r = raw(
        srv.addr(),
        "GET /some/path?x=1&y=%20z HTTP/1.1\r\nHost: very.specific.com:1234\r\nuser-agent: test/1\r\nx-forwarded-for: 10.0.0.1\r\nX-Multi: a\r\nx-multi: b, c\r\nConnection: close\r\n\r\n",
    )
    .expect("request");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    // Go's json.MarshalIndent(v, "", " ") layout, field order and HTML-safe
    // escaping.
    assert!(
        r.body
            .starts_with("{\n \"path\": \"/some/path?x=1\\u0026y=%20z\",\n \"host\""),
        "{}",
        r.body
    );
    let j = r.json();
    assert_eq!(j["path"], "/some/path?x=1&y=%20z");
    assert_eq!(j["host"], "very.specific.com:1234");
    assert_eq!(j["method"], "GET");
    assert_eq!(j["proto"], "HTTP/1.1");
    assert_eq!(j["namespace"], "gateway-conformance-infra");
    assert_eq!(j["pod"], POD);
    assert_eq!(j["ingress"], "");
    assert_eq!(j["service"], "");
    assert_eq!(j["httpPort"], srv.port().to_string());
    assert!(j.get("tls").is_none());
    let h = &j["headers"];
    assert_eq!(h["User-Agent"], serde_json::json!(["test/1"]));
    assert_eq!(h["X-Forwarded-For"], serde_json::json!(["10.0.0.1"]));
    assert_eq!(h["X-Multi"], serde_json::json!(["a", "b, c"]));
    assert_eq!(h["Connection"], serde_json::json!(["close"]));
    assert!(h.get("Host").is_none(), "{h}");

    // Absolute-form target: RequestURI and host come from the target.
    let r = raw(
        srv.addr(),
        "OPTIONS http://abs.example:8080/p?q HTTP/1.1\r\nHost: ignored\r\nConnection: close\r\n\r\n",
    )
    .expect("absolute form");
    let j = r.json();
    assert_eq!(j["path"], "http://abs.example:8080/p?q");
    assert_eq!(j["host"], "abs.example:8080");
    assert_eq!(j["method"], "OPTIONS");
}

#[tokio::test]
async fn http1_keep_alive_with_request_bodies() {
    let srv = server();
    let tcp = tokio::net::TcpStream::connect(srv.addr()).await.expect("connect");
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .expect("h1 handshake");
    tokio::spawn(conn);
    for i in 0..3 {
        let req = hyper::Request::post(format!("/post/{i}"))
            .header("host", "keep.alive")
            .header("content-type", "text/plain")
            .body(Full::new(Bytes::from(vec![b'x'; 100_000])))
            .expect("request");
        let resp = send
            .send_request(req)
            .await
            .expect("response on the same connection");
        assert_eq!(resp.status(), 200);
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        let j: Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(j["path"], format!("/post/{i}"));
        assert_eq!(j["method"], "POST");
        assert_eq!(j["headers"]["Content-Length"], serde_json::json!(["100000"]));
    }
}

type H2 = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

async fn h2c(addr: SocketAddr) -> H2 {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
        .await
        .expect("h2c handshake");
    tokio::spawn(conn);
    send
}

#[tokio::test]
async fn h2c_prior_knowledge_on_the_same_port() {
    let srv = server();
    let mut send = h2c(srv.addr()).await;
    let req = hyper::Request::get("http://h2.example:8080/h2/path?a=b")
        .header("x-custom", "v1")
        .header("x-custom", "v2")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let resp = send.send_request(req).await.expect("h2 response");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    let j: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(j["proto"], "HTTP/2.0");
    assert_eq!(j["path"], "/h2/path?a=b");
    assert_eq!(j["host"], "h2.example:8080");
    assert_eq!(j["method"], "GET");
    assert_eq!(j["pod"], POD);
    assert_eq!(j["headers"]["X-Custom"], serde_json::json!(["v1", "v2"]));
    assert!(j["headers"].get("Host").is_none());
}

#[test]
fn delay_query_sleeps_and_bad_durations_are_500() {
    let srv = server();
    let start = Instant::now();
    let r = get(srv.addr(), "/request-timeout?delay=300ms").expect("delayed");
    let took = start.elapsed();
    assert_eq!(r.status, 200);
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");

    let r = get(srv.addr(), "/?delay=soon").expect("bad delay");
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["message"], r#"time: invalid duration "soon""#);
}

#[test]
fn echo_set_header_sets_response_headers() {
    let srv = server();
    let r = raw(
        srv.addr(),
        "GET / HTTP/1.1\r\nHost: x\r\nX-Echo-Set-Header: X-Foo: a, X-Bar:b,x-foo:c\r\nx-echo-set-header: Set-Cookie:k=v\r\nConnection: close\r\n\r\n",
    )
    .expect("request");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-foo"), Some("a,c"));
    assert_eq!(r.header("x-bar"), Some("b"));
    assert_eq!(r.header("set-cookie"), Some("k=v"));
    assert_eq!(r.header("content-type"), Some("application/json"));

    // The conformance harness always sends the header, often empty.
    let r = raw(
        srv.addr(),
        "GET / HTTP/1.1\r\nHost: x\r\nX-Echo-Set-Header: \r\nConnection: close\r\n\r\n",
    )
    .expect("empty");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["headers"]["X-Echo-Set-Header"], serde_json::json!([""]));
}

#[test]
fn retry_answers_response_code_then_echoes() {
    let srv = server();
    let path = "/retry/code-500-attempts-3?responseCode=503&succeedAfter=2&uuid=u-1";
    for _ in 0..2 {
        let r = get(srv.addr(), path).expect("failing attempt");
        assert_eq!(r.status, 503);
        assert_eq!(r.body, "");
    }
    for _ in 0..2 {
        let r = get(srv.addr(), path).expect("echo");
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["pod"], POD);
        assert_eq!(r.json()["path"], path);
    }
    // Counts are per uuid.
    let r = get(srv.addr(), "/retry/x?responseCode=500&succeedAfter=1&uuid=u-2").expect("other uuid");
    assert_eq!(r.status, 500);
    // succeedAfter=0 echoes at once.
    let r = get(srv.addr(), "/retry?responseCode=500&succeedAfter=0&uuid=u-3").expect("zero");
    assert_eq!(r.status, 200);

    let r = get(srv.addr(), "/retry/x?succeedAfter=1").expect("no uuid");
    assert_eq!((r.status, r.body.as_str()), (400, "uuid is required"));
    let r = get(srv.addr(), "/retry/x?uuid=u-4&succeedAfter=many").expect("bad succeedAfter");
    assert_eq!((r.status, r.body.as_str()), (400, "succeedAfter is required"));
}

#[test]
fn retry_without_response_code_resets_the_connection() {
    let srv = server();
    let path = "/retry/no-status-code-attempts-3?succeedAfter=2&uuid=reset-1";
    for attempt in 0..2 {
        match get(srv.addr(), path) {
            Err(e) => assert_eq!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset,
                "attempt {attempt}: {e}"
            ),
            Ok(r) => panic!("attempt {attempt}: expected a reset, got {} {}", r.status, r.body),
        }
    }
    let r = get(srv.addr(), path).expect("third attempt is echoed");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["pod"], POD);
}

#[tokio::test]
async fn retry_reset_over_h2c_fails_the_connection() {
    let srv = server();
    let mut send = h2c(srv.addr()).await;
    let req = hyper::Request::get("http://h2.example/retry/x?succeedAfter=1&uuid=h2-reset")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let err = send.send_request(req).await.expect_err("connection reset");
    assert!(!err.to_string().is_empty());
    // A new connection gets the echo.
    let mut send = h2c(srv.addr()).await;
    let req = hyper::Request::get("http://h2.example/retry/x?succeedAfter=1&uuid=h2-reset")
        .body(Full::new(Bytes::new()))
        .expect("request");
    let resp = send.send_request(req).await.expect("echo");
    assert_eq!(resp.status(), 200);
}

#[test]
fn health_and_status_endpoints() {
    let srv = server();
    let r = get(srv.addr(), "/health").expect("health");
    assert_eq!((r.status, r.body.as_str()), (200, "OK"));
    assert_eq!(get(srv.addr(), "/status/418").expect("418").status, 418);
    assert_eq!(get(srv.addr(), "/status/204").expect("204").status, 204);
    assert_eq!(get(srv.addr(), "/status/41").expect("short").status, 400);
    assert_eq!(get(srv.addr(), "/status/418?x").expect("query").status, 400);
}

fn grpc_request(path: &str, message: &[u8]) -> hyper::Request<Full<Bytes>> {
    let mut framed = vec![0u8];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(message);
    hyper::Request::post(format!("http://grpc.example:50051{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(framed)))
        .expect("request")
}

#[tokio::test]
async fn grpc_health_check_over_h2c_is_serving() {
    let srv = server();
    let mut send = h2c(srv.addr()).await;
    let resp = send
        .send_request(grpc_request("/grpc.health.v1.Health/Check", &[]))
        .await
        .expect("grpc response");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/grpc");
    assert_eq!(resp.headers()["x-echo-grpc-path"], "/grpc.health.v1.Health/Check");
    let collected = resp.into_body().collect().await.expect("body");
    let trailers = collected.trailers().cloned().expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
    // 5-byte prefix, then HealthCheckResponse { status: SERVING (1) }.
    assert_eq!(collected.to_bytes().as_ref(), [0, 0, 0, 0, 2, 0x08, 0x01]);

    // Any other method: grpc-status 0 and its path echoed.
    let resp = send
        .send_request(grpc_request("/routing.Test/Method", &[0x0a, 0x01, b'x']))
        .await
        .expect("grpc response");
    assert_eq!(resp.headers()["x-echo-grpc-path"], "/routing.Test/Method");
    let collected = resp.into_body().collect().await.expect("body");
    assert_eq!(collected.trailers().expect("trailers")["grpc-status"], "0");
}

mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct HealthCheckRequest {
        #[prost(string, tag = "1")]
        pub service: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct HealthCheckResponse {
        #[prost(int32, tag = "1")]
        pub status: i32,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EchoRequest {}
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct EchoResponse {
        #[prost(message, optional, tag = "1")]
        pub assertions: Option<Assertions>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Assertions {
        #[prost(string, tag = "1")]
        pub fully_qualified_method: String,
        #[prost(message, repeated, tag = "2")]
        pub headers: Vec<Header>,
        #[prost(string, tag = "3")]
        pub authority: String,
        #[prost(message, optional, tag = "4")]
        pub context: Option<Context>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Header {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Context {
        #[prost(string, tag = "1")]
        pub namespace: String,
        #[prost(string, tag = "2")]
        pub ingress: String,
        #[prost(string, tag = "3")]
        pub service_name: String,
        #[prost(string, tag = "4")]
        pub pod: String,
    }
}

#[tokio::test]
async fn grpc_with_a_real_tonic_client() {
    use tonic::codegen::http::uri::PathAndQuery;
    let srv = server();
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", srv.addr()))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut client = tonic::client::Grpc::new(channel);

    client.ready().await.expect("ready");
    let resp: tonic::Response<pb::HealthCheckResponse> = client
        .unary(
            tonic::Request::new(pb::HealthCheckRequest {
                service: String::new(),
            }),
            PathAndQuery::from_static("/grpc.health.v1.Health/Check"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .expect("health check");
    assert_eq!(resp.get_ref().status, 1, "SERVING");

    client.ready().await.expect("ready");
    let mut req = tonic::Request::new(pb::EchoRequest {});
    req.metadata_mut().insert("x-test", "yes".parse().expect("value"));
    let resp: tonic::Response<pb::EchoResponse> = client
        .unary(
            req,
            PathAndQuery::from_static("/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .expect("echo");
    assert_eq!(
        resp.metadata()
            .get("x-echo-grpc-path")
            .and_then(|v| v.to_str().ok()),
        Some("/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo")
    );
    let a = resp.into_inner().assertions.expect("assertions");
    assert_eq!(
        a.fully_qualified_method,
        "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo"
    );
    assert_eq!(a.authority, srv.addr().to_string());
    let ctx = a.context.expect("context");
    assert_eq!(
        (ctx.namespace.as_str(), ctx.pod.as_str()),
        ("gateway-conformance-infra", POD)
    );
    assert!(
        a.headers.iter().any(|h| h.key == "x-test" && h.value == "yes"),
        "{:?}",
        a.headers
    );
    assert!(a.headers.iter().any(|h| h.key == ":authority"));

    client.ready().await.expect("ready");
    let status = client
        .unary::<_, pb::EchoResponse, _>(
            tonic::Request::new(pb::EchoRequest {}),
            PathAndQuery::from_static("/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/EchoThree"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .expect_err("EchoThree is unimplemented upstream");
    assert_eq!(status.code(), tonic::Code::Unimplemented);
}

#[test]
fn dropping_the_handle_stops_the_server() {
    let srv = server();
    let addr = srv.addr();
    assert_eq!(get(addr, "/").expect("up").status, 200);
    drop(srv);
    assert!(TcpStream::connect(addr).is_err(), "still accepting after drop");
}

#[test]
fn binary_prints_its_port_writes_the_port_file_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("echo-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let port_file = dir.join("port");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_echo"))
        .args(["--listen", "127.0.0.1:0", "--namespace", "ns-cli", "--pod"])
        .arg("web-backend-1-2")
        .arg("--port-file")
        .arg(&port_file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn echo binary");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("first line");
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    assert_eq!(addr.ip().to_string(), "127.0.0.1");
    assert_ne!(addr.port(), 0);
    assert_eq!(
        std::fs::read_to_string(&port_file).expect("port file"),
        addr.port().to_string()
    );
    let j = get(addr, "/cli").expect("request").json();
    assert_eq!(
        (j["namespace"].as_str(), j["pod"].as_str()),
        (Some("ns-cli"), Some("web-backend-1-2"))
    );
    assert_eq!(j["httpPort"], addr.port().to_string());

    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(Instant::now() < deadline, "echo did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);

    let usage = std::process::Command::new(env!("CARGO_BIN_EXE_echo"))
        .arg("--bogus")
        .output()
        .expect("run");
    assert_eq!(usage.status.code(), Some(2));
}
