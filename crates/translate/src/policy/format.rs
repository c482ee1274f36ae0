//! Envoy substitution format strings (`%REQ(x-user)%`,
//! `%DOWNSTREAM_REMOTE_ADDRESS%`, `%%` for a literal percent), as used by
//! TrafficPolicy `transformation` header values. Envoy rejects an unknown
//! command or a malformed one when it loads the route, so STANDARD checks
//! them here. The command list is checked against the real Envoy by
//! `tests/policy_oracle.rs`.

/// Whether a command takes a parenthesised argument.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arg {
    None,
    Required,
    Optional,
}

const COMMANDS: &[(&str, Arg)] = &[
    ("REQ", Arg::Required),
    ("RESP", Arg::Required),
    ("TRAILER", Arg::Required),
    ("START_TIME", Arg::Optional),
    ("DYNAMIC_METADATA", Arg::Required),
    ("UPSTREAM_METADATA", Arg::Required),
    ("CLUSTER_METADATA", Arg::Required),
    ("FILTER_STATE", Arg::Required),
    ("ENVIRONMENT", Arg::Required),
    ("PROTOCOL", Arg::None),
    ("UPSTREAM_PROTOCOL", Arg::None),
    ("RESPONSE_CODE", Arg::None),
    ("RESPONSE_CODE_DETAILS", Arg::None),
    ("RESPONSE_FLAGS", Arg::None),
    ("BYTES_RECEIVED", Arg::None),
    ("BYTES_SENT", Arg::None),
    ("DURATION", Arg::None),
    ("REQUEST_DURATION", Arg::None),
    ("RESPONSE_DURATION", Arg::None),
    ("UPSTREAM_HOST", Arg::None),
    ("UPSTREAM_CLUSTER", Arg::None),
    ("UPSTREAM_LOCAL_ADDRESS", Arg::None),
    ("UPSTREAM_REMOTE_ADDRESS", Arg::None),
    ("UPSTREAM_TRANSPORT_FAILURE_REASON", Arg::None),
    ("DOWNSTREAM_REMOTE_ADDRESS", Arg::None),
    ("DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT", Arg::None),
    ("DOWNSTREAM_REMOTE_PORT", Arg::None),
    ("DOWNSTREAM_DIRECT_REMOTE_ADDRESS", Arg::None),
    ("DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT", Arg::None),
    ("DOWNSTREAM_LOCAL_ADDRESS", Arg::None),
    ("DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT", Arg::None),
    ("DOWNSTREAM_LOCAL_PORT", Arg::None),
    ("DOWNSTREAM_PEER_URI_SAN", Arg::None),
    ("DOWNSTREAM_LOCAL_URI_SAN", Arg::None),
    ("DOWNSTREAM_PEER_SUBJECT", Arg::None),
    ("DOWNSTREAM_TLS_VERSION", Arg::None),
    ("DOWNSTREAM_TLS_CIPHER", Arg::None),
    ("CONNECTION_ID", Arg::None),
    ("REQUESTED_SERVER_NAME", Arg::None),
    ("ROUTE_NAME", Arg::None),
    ("HOSTNAME", Arg::None),
    ("STREAM_ID", Arg::None),
];

/// Every command this checker accepts (for the Envoy oracle test).
pub fn known_commands() -> impl Iterator<Item = String> {
    COMMANDS.iter().map(|(name, arg)| match arg {
        Arg::None | Arg::Optional => format!("%{name}%"),
        Arg::Required if *name == "ENVIRONMENT" => "%ENVIRONMENT(HOME)%".to_string(),
        Arg::Required if name.ends_with("METADATA") => format!("%{name}(envoy.lb:key)%"),
        Arg::Required => format!("%{name}(x-test)%"),
    })
}

/// Checks one format string; the error says what is wrong and where.
pub fn check(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        let start = i;
        i += 1;
        let name_start = i;
        while i < b.len() && (b[i].is_ascii_uppercase() || b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
        let name = &s[name_start..i];
        if name.is_empty() {
            return Err(format!(
                "'%' at offset {start} does not start a command (write %% for a literal percent)"
            ));
        }
        let Some((_, arg)) = COMMANDS.iter().find(|(n, _)| *n == name) else {
            return Err(format!("unknown format command %{name}%"));
        };
        let mut has_arg = false;
        if b.get(i) == Some(&b'(') {
            has_arg = true;
            let close = s[i..].find(')').ok_or_else(|| format!("%{name}(: missing ')'"))?;
            if close == 1 {
                return Err(format!("%{name}(): empty argument"));
            }
            i += close + 1;
        }
        if b.get(i) == Some(&b':') {
            let digits_start = i + 1;
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == digits_start {
                return Err(format!("%{name}: a length limit needs digits after ':'"));
            }
        }
        if b.get(i) != Some(&b'%') {
            return Err(format!("%{name}: not closed by '%'"));
        }
        i += 1;
        match (arg, has_arg) {
            (Arg::Required, false) => return Err(format!("%{name}% needs an argument, e.g. %{name}(x)%")),
            (Arg::None, true) => return Err(format!("%{name}% takes no argument")),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn accepts_envoy_format_strings() {
        for s in [
            "plain",
            "%REQ(x-user)%",
            "user=%REQ(x-user)% from %DOWNSTREAM_REMOTE_ADDRESS%",
            "100%%",
            "%REQ(x-a?x-b):10%",
            "%START_TIME(%s)%",
            "%START_TIME%",
        ] {
            assert_eq!(check(s), Ok(()), "{s}");
        }
    }

    #[test]
    fn rejects_what_envoy_rejects() {
        for s in [
            "50%",
            "%NOPE%",
            "%REQ%",
            "%REQ(x-user%",
            "%PROTOCOL(x)%",
            "%REQ()%",
            "%REQ(x):%",
            "%req(x)%",
        ] {
            assert!(check(s).is_err(), "{s}");
        }
    }
}
