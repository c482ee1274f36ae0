//! Go's `time.ParseDuration`, as echo-basic uses it for `?delay=` and
//! `?delayRetry=`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, e.g. `1s`, `500ms`,
//! `1h30m`, `1.5s`, `0`. Negative durations do not sleep (as in Go).

use std::time::Duration;

const MAX: u64 = 1 << 63;

/// The duration, or Go's error text (`time: invalid duration "x"`).
pub(crate) fn parse(orig: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {}", quote(orig));
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // Integer part.
        let mut v: u64 = 0;
        let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
        for &c in &s[..digits] {
            if v > MAX / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(c - b'0');
            if v > MAX {
                return Err(invalid());
            }
        }
        let pre = digits > 0;
        s = &s[digits..];
        // Fraction: digits past what fits are ignored, as in Go.
        let (mut frac, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
            let mut overflow = false;
            for &c in &s[..digits] {
                if overflow {
                    continue;
                }
                if frac > (MAX - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = frac * 10 + u64::from(c - b'0');
                if y > MAX {
                    overflow = true;
                    continue;
                }
                frac = y;
                scale *= 10.0;
            }
            post = digits > 0;
            s = &s[digits..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .iter()
            .take_while(|&&c| c != b'.' && !c.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let unit_text = &s[..unit_len];
        s = &s[unit_len..];
        let unit: u64 = match unit_text {
            b"ns" => 1,
            b"us" => 1_000,
            u if u == "µs".as_bytes() || u == "μs".as_bytes() => 1_000,
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            other => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(&String::from_utf8_lossy(other)),
                    quote(orig)
                ));
            }
        };
        if v > MAX / unit {
            return Err(invalid());
        }
        v *= unit;
        if frac > 0 {
            // Go computes this in float64 and truncates.
            v = v.saturating_add((frac as f64 * (unit as f64 / scale)) as u64);
            if v > MAX {
                return Err(invalid());
            }
        }
        total = total.saturating_add(v);
        if total > MAX {
            return Err(invalid());
        }
    }
    if neg {
        return Ok(Duration::ZERO);
    }
    if total > MAX - 1 {
        return Err(invalid());
    }
    Ok(Duration::from_nanos(total))
}

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&c.escape_default().to_string()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn accepts_go_syntax() {
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("1s"), Ok(ms(1000)));
        assert_eq!(parse("500ms"), Ok(ms(500)));
        assert_eq!(parse("+2m"), Ok(ms(120_000)));
        assert_eq!(parse("1h30m"), Ok(ms(5_400_000)));
        assert_eq!(parse("1.5s"), Ok(ms(1500)));
        assert_eq!(parse(".5s"), Ok(ms(500)));
        assert_eq!(parse("1.s"), Ok(ms(1000)));
        assert_eq!(parse("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse("10µs"), Ok(Duration::from_micros(10)));
        assert_eq!(parse("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse("-1s"), Ok(Duration::ZERO));
        assert_eq!(
            parse("2562047h47m16.854775807s"),
            Ok(Duration::from_nanos((1 << 63) - 1))
        );
    }

    #[test]
    fn rejects_like_go() {
        assert_eq!(parse(""), Err(r#"time: invalid duration """#.into()));
        assert_eq!(parse("abc"), Err(r#"time: invalid duration "abc""#.into()));
        assert_eq!(parse("."), Err(r#"time: invalid duration ".""#.into()));
        assert_eq!(parse("-"), Err(r#"time: invalid duration "-""#.into()));
        assert_eq!(parse("1"), Err(r#"time: missing unit in duration "1""#.into()));
        assert_eq!(
            parse("1x"),
            Err(r#"time: unknown unit "x" in duration "1x""#.into())
        );
        assert_eq!(
            parse("9223372036854775808ns"),
            Err(r#"time: invalid duration "9223372036854775808ns""#.into())
        );
        assert_eq!(
            parse("99999999999999999999h"),
            Err(r#"time: invalid duration "99999999999999999999h""#.into())
        );
    }
}
