//! Fenced means fenced (shared by `fenced.rs` and `property.rs`): every
//! route portcullis
//! replaced (a rule answering the replacement 500, or a guard standing in
//! for a match it cannot program) is asked for through the real Envoy —
//! at its own path and at every normalization variant of that path
//! (`/./p`, `/x/../p`, `//p`, doubled slashes, a percent-encoded
//! unreserved letter, `p/../last`) — and must answer the 500 with the
//! replacement body every time, never a backend.
//!
//! Each fixture Gateway runs as a static Envoy (`static_bootstrap`) with its
//! listeners moved to free loopback ports and every cluster endpoint moved
//! to one loopback responder that answers `200 BACKEND`: a request that
//! escapes the fence is seen, and no traffic leaves loopback.
//!
//! A request is built from the replaced route's match (path, exact
//! headers, method, exact query parameters). Which route Envoy picks is
//! first-match in the virtual host, so the request is only asserted where
//! a small model of Envoy's matching says the replaced route (or another
//! replaced route) is the first to match; routes the model cannot reason
//! about (regex headers, TLS chains) are counted as skipped and printed.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use translate::output::bootstrap;
use translate::replacement::BODY;

fn free_port() -> u16 {
    testkit::port::free()
}

/// A backend stand-in: answers every request `200 BACKEND`.
pub fn responder() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind responder");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 8192];
                let _ = s.read(&mut buf);
                let _ =
                    s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nBACKEND");
            });
        }
    });
    port
}

struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request: (status, body).
fn request(
    port: u16,
    method: &str,
    host: &str,
    target: &str,
    headers: &[(String, String)],
) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).ok()?;
    // Read up to the end of the body by its length: Envoy holds a closing
    // connection open for its delayed-close timeout (1 s) after answering.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.split_once(':')
                        .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                })
                .and_then(|(_, v)| v.trim().parse::<usize>().ok());
            if len.is_some_and(|len| body.len() >= len) {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

fn is_fenced(route: &Value) -> bool {
    route.pointer("/direct_response/status").and_then(Value::as_u64) == Some(500)
        && route
            .pointer("/direct_response/body/inline_string")
            .and_then(Value::as_str)
            == Some(BODY)
}

/// The request a route's match asks for, or why none can be built.
struct Probe {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
}

fn probe_for(m: &Value) -> Result<Probe, &'static str> {
    let path = if let Some(p) = m.get("path").and_then(Value::as_str) {
        p.to_string()
    } else if let Some(p) = m.get("prefix").and_then(Value::as_str) {
        p.to_string()
    } else if let Some(p) = m.get("path_separated_prefix").and_then(Value::as_str) {
        p.to_string()
    } else {
        return Err("regex path");
    };
    if path.is_empty() {
        return Err("empty path");
    }
    let mut method = "GET".to_string();
    let mut headers = Vec::new();
    for h in m.get("headers").and_then(Value::as_array).into_iter().flatten() {
        if h.get("invert_match").and_then(Value::as_bool) == Some(true) {
            return Err("inverted header match");
        }
        let name = h.get("name").and_then(Value::as_str).unwrap_or("");
        let value = if let Some(v) = h.pointer("/string_match/exact").and_then(Value::as_str) {
            v.to_string()
        } else if h.get("present_match").and_then(Value::as_bool) == Some(true) {
            "1".to_string()
        } else {
            return Err("non-exact header match");
        };
        if name == ":method" {
            method = value;
        } else if name.starts_with(':') || name.eq_ignore_ascii_case("host") {
            return Err("pseudo-header match");
        } else {
            headers.push((name.to_string(), value));
        }
    }
    let mut query = String::new();
    for q in m
        .get("query_parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = q.get("name").and_then(Value::as_str).unwrap_or("");
        let value = if let Some(v) = q.pointer("/string_match/exact").and_then(Value::as_str) {
            v.to_string()
        } else if q.get("present_match").and_then(Value::as_bool) == Some(true) {
            "1".to_string()
        } else {
            return Err("non-exact query match");
        };
        if name
            .bytes()
            .chain(value.bytes())
            .any(|b| !(b.is_ascii_alphanumeric() || b"-._~".contains(&b)))
        {
            return Err("query needs escaping");
        }
        query.push(if query.is_empty() { '?' } else { '&' });
        query.push_str(&format!("{name}={value}"));
    }
    if path.bytes().any(|b| b <= b' ' || b >= 0x7f || b == b'%') {
        return Err("path needs escaping");
    }
    // Envoy's path normalization reads `\` as `/`: no request reaches a
    // path with a backslash (nor the route it fences, had it been valid).
    if path.contains('\\') {
        return Err("path with a backslash (Envoy reads it as '/')");
    }
    Ok(Probe {
        method,
        path,
        query,
        headers,
    })
}

/// Does Envoy's route `m` match the (normalized) request? `None`: this
/// model cannot tell.
fn matches(m: &Value, p: &Probe) -> Option<bool> {
    let path = p.path.as_str();
    let path_ok = if let Some(x) = m.get("path").and_then(Value::as_str) {
        path == x
    } else if let Some(x) = m.get("prefix").and_then(Value::as_str) {
        path.starts_with(x)
    } else if let Some(x) = m.get("path_separated_prefix").and_then(Value::as_str) {
        path == x || path.strip_prefix(x).is_some_and(|rest| rest.starts_with('/'))
    } else if let Some(re) = m.pointer("/safe_regex/regex").and_then(Value::as_str) {
        let re = regex_automata::meta::Regex::new(&format!("^(?:{re})$")).ok()?;
        re.is_match(path)
    } else {
        return None;
    };
    if !path_ok {
        return Some(false);
    }
    for h in m.get("headers").and_then(Value::as_array).into_iter().flatten() {
        let name = h.get("name").and_then(Value::as_str).unwrap_or("");
        let got: Option<&str> = if name == ":method" {
            Some(p.method.as_str())
        } else {
            p.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let ok = if let Some(v) = h.pointer("/string_match/exact").and_then(Value::as_str) {
            got == Some(v)
        } else if h.get("present_match").and_then(Value::as_bool) == Some(true) {
            got.is_some()
        } else {
            // A regex or other matcher on a header the probe does not send
            // cannot match; one it sends is beyond this model.
            if got.is_some() {
                return None;
            }
            false
        };
        let inverted = h.get("invert_match").and_then(Value::as_bool) == Some(true);
        if ok == inverted {
            return Some(false);
        }
    }
    for q in m
        .get("query_parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = q.get("name").and_then(Value::as_str).unwrap_or("");
        let got = p
            .query
            .trim_start_matches('?')
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v);
        let ok = if let Some(v) = q.pointer("/string_match/exact").and_then(Value::as_str) {
            got == Some(v)
        } else if q.get("present_match").and_then(Value::as_bool) == Some(true) {
            got.is_some()
        } else {
            if got.is_some() {
                return None;
            }
            false
        };
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

/// A Host header that selects this virtual host, if one can be told.
fn host_for(vhost: &Value, all: &[Value]) -> Option<String> {
    let domains: Vec<&str> = vhost
        .get("domains")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let pick = domains
        .iter()
        .find(|d| !d.contains('*'))
        .map(|d| d.to_string())
        .or_else(|| {
            domains.iter().find_map(|d| {
                d.strip_prefix("*.")
                    .map(|rest| format!("fenced-probe.{rest}"))
                    .or_else(|| (*d == "*").then(|| "fenced-probe.invalid".to_string()))
            })
        })?;
    // The probe host must select this virtual host, not another.
    (select(all, &pick) == vhost.get("name").and_then(Value::as_str)).then_some(pick)
}

/// Envoy's virtual host selection: an exact domain, then the longest
/// suffix wildcard (`*.x`, `*x`), then the longest prefix wildcard
/// (`x*`), then `*`.
fn select<'a>(all: &'a [Value], host: &str) -> Option<&'a str> {
    let mut best: Option<(u8, usize, &str)> = None;
    for v in all {
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        for d in v
            .get("domains")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let score = if d == host {
                Some((3, d.len()))
            } else if d == "*" {
                Some((0, 0))
            } else if let Some(suffix) = d.strip_prefix('*') {
                (host.len() > suffix.len() && host.ends_with(suffix)).then_some((2, d.len()))
            } else if let Some(prefix) = d.strip_suffix('*') {
                (host.len() > prefix.len() && host.starts_with(prefix)).then_some((1, d.len()))
            } else {
                None
            };
            if let Some((class, len)) = score
                && best.is_none_or(|(c, l, _)| (class, len) > (c, l))
            {
                best = Some((class, len, name));
            }
        }
    }
    best.map(|(_, _, n)| n)
}

/// Paths that RFC 3986 normalization, slash merging and unreserved
/// percent-decoding turn back into `p`.
pub fn variants(p: &str) -> Vec<String> {
    let mut out = vec![
        format!("/.{p}"),
        format!("/x/..{p}"),
        format!("/{p}"),
        p.replace('/', "//"),
    ];
    if let Some((i, c)) = p.char_indices().find(|(_, c)| c.is_ascii_alphanumeric()) {
        out.push(format!("{}%{:02X}{}", &p[..i], c as u32, &p[i + 1..]));
        out.push(format!("{}%{:02x}{}", &p[..i], c as u32, &p[i + 1..]));
    }
    if !p.ends_with('/')
        && let Some(last) = p.rsplit('/').next().filter(|l| !l.is_empty())
    {
        out.push(format!("{p}/../{last}"));
        out.push(format!("{p}/./../{last}"));
    }
    out.sort();
    out.dedup();
    out.retain(|v| v != p);
    out
}

#[derive(Default)]
pub struct Tally {
    pub asserted: usize,
    pub variants: usize,
    pub skipped: std::collections::BTreeMap<&'static str, usize>,
    pub failures: Vec<String>,
}

/// Moves the Gateway's listeners to free loopback ports (returning them by
/// listener name) and every endpoint to the responder.
fn relocate(b: &mut Value, backend: u16) -> Vec<(String, u16)> {
    let mut ports = Vec::new();
    for l in b
        .pointer_mut("/static_resources/listeners")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let port = free_port();
        let name = l.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        if let Some(sa) = l.pointer_mut("/address/socket_address") {
            sa["address"] = json!("127.0.0.1");
            sa["port_value"] = json!(port);
        }
        ports.push((name, port));
    }
    for c in b
        .pointer_mut("/static_resources/clusters")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if c.get("type").and_then(Value::as_str) == Some("STRICT_DNS") {
            c["type"] = json!("STATIC");
        }
        for le in c
            .pointer_mut("/load_assignment/endpoints")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for e in le
                .get_mut("lb_endpoints")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                if let Some(sa) = e.pointer_mut("/endpoint/address/socket_address") {
                    *sa = json!({"address": "127.0.0.1", "port_value": backend});
                }
            }
        }
    }
    ports
}

fn start_envoy(b: &Value, dir: &Path, ports: &[(String, u16)]) -> Envoy {
    let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let cfg = dir.join(format!(
        "bootstrap-{}.json",
        ports.first().map(|p| p.1).unwrap_or(0)
    ));
    std::fs::write(&cfg, b.to_string()).expect("write bootstrap");
    let child = Command::new(bin)
        .args([
            "--disable-hot-restart",
            "--concurrency",
            "1",
            "--log-level",
            "error",
            "-c",
        ])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start envoy");
    let envoy = Envoy(child);
    let start = Instant::now();
    for (_, port) in ports {
        while TcpStream::connect(("127.0.0.1", *port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "Envoy did not open port {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    envoy
}

/// At most this many fenced routes are asked for per Gateway: generated
/// inputs can fence a thousand copies of one match.
const MAX_ASSERTED_PER_GATEWAY: usize = 40;

pub fn check_gateway(
    fixture: &str,
    gw_key: &str,
    gw: &translate::GatewayXds,
    backend: u16,
    dir: &Path,
    t: &mut Tally,
) {
    let mut asserted_here = 0usize;
    let mut b = bootstrap::static_bootstrap(gw, gw_key, &Default::default());
    let has_fenced = b.to_string().contains(BODY);
    if !has_fenced {
        return;
    }
    let ports = relocate(&mut b, backend);
    // (listener port, route configuration) of every plain-HTTP chain.
    let mut targets: Vec<(u16, Value)> = Vec::new();
    for (li, l) in b
        .pointer("/static_resources/listeners")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let port = ports[li].1;
        let chains = l
            .get("filter_chains")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(l.get("default_filter_chain"));
        for c in chains {
            let rc = c.pointer("/filters/0/typed_config/route_config").cloned();
            match (c.get("transport_socket"), rc) {
                (Some(_), Some(rc)) => {
                    let n = rc.to_string().matches(BODY).count();
                    *t.skipped.entry("TLS chain").or_default() += n;
                }
                (None, Some(rc)) => targets.push((port, rc)),
                _ => {}
            }
        }
    }
    if targets.is_empty() {
        return;
    }
    let _envoy = start_envoy(&b, dir, &ports);
    for (port, rc) in targets {
        let vhosts: Vec<Value> = rc
            .get("virtual_hosts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for vh in &vhosts {
            let routes: Vec<Value> = vh
                .get("routes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (ri, r) in routes.iter().enumerate() {
                if !is_fenced(r) {
                    continue;
                }
                let name = r.get("name").and_then(Value::as_str).unwrap_or("?");
                let Some(host) = host_for(vh, &vhosts) else {
                    *t.skipped.entry("no probe host").or_default() += 1;
                    continue;
                };
                let m = r.get("match").cloned().unwrap_or(Value::Null);
                let probe = match probe_for(&m) {
                    Ok(p) => p,
                    Err(why) => {
                        *t.skipped.entry(why).or_default() += 1;
                        continue;
                    }
                };
                // The first route that matches must be a fenced one.
                let mut first = None;
                for earlier in &routes[..=ri] {
                    match matches(earlier.get("match").unwrap_or(&Value::Null), &probe) {
                        Some(true) => {
                            first = Some(Some(earlier));
                            break;
                        }
                        Some(false) => {}
                        None => {
                            first = Some(None);
                            break;
                        }
                    }
                }
                match first {
                    Some(Some(winner)) if is_fenced(winner) => {}
                    Some(Some(_)) => {
                        *t.skipped.entry("shadowed by an earlier route").or_default() += 1;
                        continue;
                    }
                    _ => {
                        *t.skipped.entry("earlier route beyond the model").or_default() += 1;
                        continue;
                    }
                }
                if asserted_here == MAX_ASSERTED_PER_GATEWAY {
                    *t.skipped.entry("over the per-Gateway cap").or_default() += 1;
                    continue;
                }
                asserted_here += 1;
                t.asserted += 1;
                for path in std::iter::once(probe.path.clone()).chain(variants(&probe.path)) {
                    if path != probe.path {
                        t.variants += 1;
                    }
                    let target = format!("{path}{}", probe.query);
                    let got = request(port, &probe.method, &host, &target, &probe.headers);
                    let fenced = matches!(&got, Some((500, body)) if body == BODY);
                    if !fenced {
                        t.failures.push(format!(
                            "{fixture} {gw_key} route {name}: {} {target} (Host {host}) answered {:?}, not the fence",
                            probe.method,
                            got.map(|(s, b)| format!("{s} {}", b.chars().take(60).collect::<String>()))
                        ));
                    }
                }
            }
        }
    }
}

/// RFC 3986 `remove_dot_segments` after merging slashes and decoding
/// percent-encoded unreserved characters: what the variants must come
/// back to.
pub fn normalize(p: &str) -> String {
    let mut decoded = String::new();
    let mut rest = p;
    while let Some(i) = rest.find('%') {
        decoded.push_str(&rest[..i]);
        let hex = rest
            .get(i + 1..i + 3)
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(b) if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => {
                decoded.push(b as char);
                rest = &rest[i + 3..];
            }
            _ => {
                decoded.push('%');
                rest = &rest[i + 1..];
            }
        }
    }
    decoded.push_str(rest);
    let mut merged = String::new();
    for c in decoded.chars() {
        if !(c == '/' && merged.ends_with('/')) {
            merged.push(c);
        }
    }
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = merged.split('/').skip(1).collect();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                out.pop();
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}
