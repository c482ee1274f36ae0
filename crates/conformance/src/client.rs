//! One HTTP/1.1 request per connection, plain or TLS, never following
//! redirects (the cases check `Location` themselves).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;

pub struct Response {
    pub status: u16,
    /// Header names lower-cased, in arrival order, one entry per field line.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl Response {
    /// All values of `name`, comma-joined as Go's comparison does.
    pub fn header(&self, name: &str) -> Option<String> {
        let values: Vec<&str> = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        (!values.is_empty()).then(|| values.join(","))
    }
}

pub struct Outgoing<'a> {
    pub addr: SocketAddr,
    pub tls: Option<(&'a Arc<rustls::ClientConfig>, &'a str)>,
    pub method: &'a str,
    pub host: &'a str,
    pub path: &'a str,
    pub headers: &'a [(String, String)],
}

const TIMEOUT: Duration = Duration::from_secs(15);

pub async fn send(req: &Outgoing<'_>) -> Result<Response, String> {
    tokio::time::timeout(TIMEOUT, send_inner(req))
        .await
        .map_err(|_| format!("no response within {TIMEOUT:?}"))?
}

async fn send_inner(req: &Outgoing<'_>) -> Result<Response, String> {
    let tcp = tokio::net::TcpStream::connect(req.addr)
        .await
        .map_err(|e| format!("connect {}: {e}", req.addr))?;
    let _ = tcp.set_nodelay(true);
    match req.tls {
        None => exchange(TokioIo::new(tcp), req).await,
        Some((config, sni)) => {
            let name =
                ServerName::try_from(sni.to_string()).map_err(|e| format!("server name {sni:?}: {e}"))?;
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS handshake with SNI {sni:?}: {e}"))?;
            exchange(TokioIo::new(tls), req).await
        }
    }
}

async fn exchange<IO>(io: TokioIo<IO>, req: &Outgoing<'_>) -> Result<Response, String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(io)
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(conn);
    let mut builder = hyper::Request::builder()
        .method(req.method)
        .uri(req.path)
        .header(hyper::header::HOST, req.host);
    for (k, v) in req.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let request = builder
        .body(Empty::new())
        .map_err(|e| format!("building the request: {e}"))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("reading the body: {e}"))?
        .to_bytes();
    Ok(Response {
        status,
        headers,
        body,
    })
}
