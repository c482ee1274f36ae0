//! What the randomised tests share: a small seeded generator (xorshift64*,
//! so a seed replays the same sequence), a TLS pair Envoy accepts, and the
//! check that an incremental translation's output is a full one's.

#![allow(dead_code)] // each test binary uses its own part

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// A certificate and key (for `example.com`, `*.example.com`) from a
/// golden fixture, base64 as a Secret carries them.
pub fn tls_pair() -> (String, String) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/httpproxy-tls.yaml"
    ))
    .expect("read the httpproxy-tls fixture");
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .map(|v| v.trim().to_string())
            .expect("the fixture carries a TLS Secret")
    };
    (value("tls.crt:"), value("tls.key:"))
}

/// Asserts that `inc` (an incremental translation) is `full` (a full
/// translation of the same inputs): the Gateways, each route configuration's
/// bytes, each Gateway's xDS, status, diagnostics, HTTPProxy reports, then
/// the whole output — the named parts first, so a failure says which part.
pub fn assert_same_output(what: &str, full: &translate::Output, inc: &translate::Output) {
    assert_eq!(
        full.gateways.keys().collect::<Vec<_>>(),
        inc.gateways.keys().collect::<Vec<_>>(),
        "{what}: Gateways differ"
    );
    for (k, f) in &full.gateways {
        let i = &inc.gateways[k];
        let f_routes: Vec<(&str, &[u8])> = f.routes.iter().map(|r| (r.name.as_str(), r.bytes())).collect();
        let i_routes: Vec<(&str, &[u8])> = i.routes.iter().map(|r| (r.name.as_str(), r.bytes())).collect();
        assert!(
            f_routes == i_routes,
            "{what}: route configuration bytes of {k} differ"
        );
        assert_eq!(f, i, "{what}: xDS of {k} differs");
    }
    assert_eq!(full.status, inc.status, "{what}: status differs");
    assert_eq!(full.diagnostics, inc.diagnostics, "{what}: diagnostics differ");
    assert_eq!(
        full.http_proxies, inc.http_proxies,
        "{what}: HTTPProxy reports differ"
    );
    assert!(full == inc, "{what}: outputs differ");
}
