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

/// The commands that accept a `:N` length limit (Envoy's `LENGTH_ALLOWED`
/// syntax flag; every other command in `COMMANDS` refuses one, checked
/// against Envoy 1.40 by `tests/policy_oracle.rs`).
const LENGTH_ALLOWED: &[&str] = &[
    "REQ",
    "RESP",
    "TRAILER",
    "DYNAMIC_METADATA",
    "FILTER_STATE",
    "ENVIRONMENT",
];

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
        let mut arg_text = None;
        if b.get(i) == Some(&b'(') {
            let close = s[i..].find(')').ok_or_else(|| format!("%{name}(: missing ')'"))?;
            if close == 1 {
                return Err(format!("%{name}(): empty argument"));
            }
            arg_text = Some(&s[i + 1..i + close]);
            i += close + 1;
        }
        let has_arg = arg_text.is_some();
        let mut has_len = false;
        if b.get(i) == Some(&b':') {
            let digits_start = i + 1;
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == digits_start {
                return Err(format!("%{name}: a length limit needs digits after ':'"));
            }
            // Envoy's command regex captures the length into a size_t; a
            // value that overflows it makes the whole command not match.
            if s[digits_start..i].parse::<u64>().is_err() {
                return Err(format!(
                    "%{name}: length limit {} is too large (at most {})",
                    &s[digits_start..i],
                    u64::MAX
                ));
            }
            has_len = true;
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
        if has_len && !LENGTH_ALLOWED.contains(&name) {
            return Err(format!("%{name}% does not allow a length limit (':N')"));
        }
        if let Some(a) = arg_text {
            match name {
                "REQ" | "RESP" | "TRAILER" => check_headers(name, a)?,
                "FILTER_STATE" => check_filter_state(a)?,
                _ => {}
            }
        }
    }
    Ok(())
}

/// `REQ`/`RESP`/`TRAILER` take `header` or `header?alternative`. Envoy
/// (`SubstitutionFormatUtils::parseSubcommandHeaders`) refuses a second
/// `?` and validates each name, lowercased, with
/// `HeaderUtility::headerNameIsValid`: RFC 9110 token characters, or a
/// `:` followed by a non-empty token for a pseudo-header. An empty name
/// (`%REQ(?x)%`) is accepted.
fn check_headers(name: &str, arg: &str) -> Result<(), String> {
    let parts: Vec<&str> = arg.split('?').collect();
    if parts.len() > 2 {
        return Err(format!(
            "%{name}({arg})%: at most one '?' alternative header is allowed"
        ));
    }
    for h in parts {
        let token = h.strip_prefix(':').unwrap_or(h);
        let pseudo_empty = h.starts_with(':') && token.is_empty();
        if pseudo_empty || !token.bytes().all(is_tchar) {
            return Err(format!(
                "%{name}({arg})%: '{h}' is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only; ':' only to start a pseudo-header)"
            ));
        }
    }
    Ok(())
}

/// RFC 9110 `tchar`, Envoy's `kGenericHeaderNameCharTable`.
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

/// `FILTER_STATE(key[:TYPE[:field]])`: Envoy refuses an empty key, a type
/// other than PLAIN/TYPED/FIELD (or empty, the default), FIELD without a
/// field name and a field name with any other type; parts after the
/// field name are ignored (all confirmed against Envoy 1.40).
fn check_filter_state(arg: &str) -> Result<(), String> {
    let mut parts = arg.split(':');
    let key = parts.next().unwrap_or("");
    let kind = parts.next().unwrap_or("");
    let field = parts.next().unwrap_or("");
    if key.is_empty() {
        return Err(format!("%FILTER_STATE({arg})%: the key cannot be empty"));
    }
    match kind {
        "" | "PLAIN" | "TYPED" | "FIELD" => {}
        _ => {
            return Err(format!(
                "%FILTER_STATE({arg})%: serialize type '{kind}' is not PLAIN, TYPED or FIELD"
            ));
        }
    }
    if (kind == "FIELD") == field.is_empty() {
        return Err(format!(
            "%FILTER_STATE({arg})%: a field name goes with the FIELD type, and only with it (key:FIELD:name)"
        ));
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
            "%REQ(:authority)%",
            "%REQ(?x)%",
            "%REQ(x):18446744073709551615%",
            "%FILTER_STATE(x:FIELD:y)%",
            "%FILTER_STATE(x:)%",
            "%ENVIRONMENT(HOME):3%",
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
            "%REQ(a?b?c)%",
            "%REQ(x):18446744073709551616%",
            "%START_TIME:10%",
            "%PROTOCOL:10%",
            "%FILTER_STATE(x:BAD)%",
            "%FILTER_STATE(x:FIELD)%",
            "%FILTER_STATE(x:PLAIN:FOO)%",
            "%FILTER_STATE(:PLAIN)%",
            "%REQ(x y)%",
            "%REQ(::)%",
            "%RESP(\u{e9})%",
        ] {
            assert!(check(s).is_err(), "{s}");
        }
    }
}
