//! What the randomised tests share: a small seeded generator (xorshift64*,
//! so a seed replays the same sequence) and a TLS pair Envoy accepts.

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
