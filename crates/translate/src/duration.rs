//! Gateway API durations (GEP-2257): `1h`, `30s`, `500ms`, `1m30s`.

use std::time::Duration;

/// A string that is not a Gateway API duration; the caller adds the
/// field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a Gateway API duration (e.g. 10s, 1m30s, 500ms)")]
pub struct DurationError {
    pub input: String,
}

/// Parses `^([0-9]{1,5}(h|m|s|ms)){1,4}$`.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError { input: s.to_string() };
    let mut total = Duration::ZERO;
    let mut rest = s;
    let mut parts = 0;
    if s.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 5 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(n), 2)
        } else if rest.starts_with('h') {
            (Duration::from_secs(n * 3600), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(n * 60), 1)
        } else if rest.starts_with('s') {
            (Duration::from_secs(n), 1)
        } else {
            return Err(bad());
        };
        total += unit;
        rest = &rest[len..];
        parts += 1;
        if parts > 4 {
            return Err(bad());
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_spec_examples() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("1h2m3s4ms"), Ok(Duration::from_millis(3_723_004)));
        assert!(parse("").is_err());
        assert!(parse("1.5s").is_err());
        assert!(parse("10").is_err());
        assert!(parse("123456s").is_err());
        assert!(parse("1s1s1s1s1s").is_err());
        assert!(parse("-1s").is_err());
    }

    #[test]
    fn the_error_names_the_input() {
        let err = parse("1.5s").err();
        assert_eq!(err, Some(DurationError { input: "1.5s".into() }));
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#""1.5s" is not a Gateway API duration (e.g. 10s, 1m30s, 500ms)"#)
        );
    }
}
