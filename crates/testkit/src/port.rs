//! Free loopback ports for tests, taken from below the kernel's ephemeral
//! range.
//!
//! A port found with `bind(127.0.0.1:0)` is released before the process
//! under test binds it, and in between the kernel may hand it to any
//! outgoing connection (every HTTP request a test sends takes a local port
//! from that range). The process then fails to bind, rarely but for real
//! (CI saw it). Ports below the range are never given to connections, and
//! one counter per test process hands each out once; a port something else
//! already holds is skipped because this process cannot bind it.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The first port this module hands out.
const FLOOR: u32 = 10_000;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The kernel's ephemeral range's first port (Linux's default when it
/// cannot be read).
fn ephemeral_floor() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32_768)
}

/// A loopback port nothing holds now and no other call of this process
/// returned; from the kernel (`bind(0)`) when the ephemeral range leaves no
/// room below it.
pub fn free() -> u16 {
    let ceiling = ephemeral_floor();
    if ceiling <= FLOOR + 1_000 {
        return kernel_port();
    }
    let span = ceiling - FLOOR;
    // Test processes of one run start at different offsets, so a process
    // left over from an earlier suite rarely sits on the ports of the next.
    let _ = NEXT.compare_exchange(
        0,
        1 + std::process::id() % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = FLOOR + n % span;
        let Ok(port) = u16::try_from(port) else { continue };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() && TcpListener::bind(("0.0.0.0", port)).is_ok() {
            return port;
        }
    }
    kernel_port()
}

fn kernel_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding a free loopback port")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports: Vec<u16> = (0..200).map(|_| free()).collect();
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        let floor = ephemeral_floor();
        for port in ports {
            assert!(
                u32::from(port) < floor,
                "{port} is in the ephemeral range from {floor}"
            );
            TcpListener::bind(("127.0.0.1", port)).expect("bindable");
        }
    }

    #[test]
    fn a_held_port_is_skipped() {
        let port = free();
        let _held = TcpListener::bind(("127.0.0.1", port)).expect("bind");
        // The counter moved past it; hold the next candidate as well and
        // check it is not returned.
        let next = NEXT.load(Ordering::Relaxed);
        let candidate = u16::try_from(FLOOR + next % (ephemeral_floor() - FLOOR)).expect("port");
        let _also = TcpListener::bind(("127.0.0.1", candidate));
        assert_ne!(free(), candidate);
    }
}
