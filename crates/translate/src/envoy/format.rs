//! Envoy substitution format strings (`%REQ(x-user)%`,
//! `%DOWNSTREAM_REMOTE_ADDRESS%`, `%%` for a literal percent), as used by
//! TrafficPolicy `transformation` header values. Envoy rejects an unknown
//! command or a malformed one when it loads the route, so STANDARD checks
//! them here. The command list is checked against the real Envoy by
//! `tests/policy_oracle.rs`.
//!
//! The rules follow Envoy 1.40's built-in command parsers
//! (`source/common/formatter/stream_info_formatter.cc`,
//! `http_specific_formatter.cc`) and were each confirmed against the
//! 1.40 binary:
//!
//! - Envoy's `CommandSyntaxChecker` looks only at whether the argument is
//!   empty, so `%CMD()%` is the same as `%CMD%`: accepted for a command
//!   without an argument or with an optional one, refused for a command
//!   that requires one.
//! - The argument runs to the first `)` followed by `%` or `:N%`, so it
//!   may itself hold `)` (`closing_paren`).
//! - `:N` is allowed only where the command says so (`LENGTH_ALLOWED`).
//! - Optional arguments: the time commands (`START_TIME(format)`,
//!   `EMIT_TIME`, the `*_PEER_CERT_V_*` ones, `TIME_FORMATS`) refuse a
//!   strftime format that prints a newline; `RESPONSE_CODE_DETAILS` and
//!   the `*_ADDRESS_WITHOUT_PORT` commands take any argument (only
//!   `ALLOW_WHITESPACES` and `MASK_PREFIX_LEN:N` mean something, nothing
//!   is validated at load); `REQUESTED_SERVER_NAME(sni[:host])`,
//!   `PATH(query[:source])`, `QUERY_PARAMS` and `GRPC_STATUS` check their
//!   option names.
//! - Required arguments with rules: header names (`REQ` and its kin),
//!   `FILTER_STATE`, `COMMON_DURATION(start:end[:precision])`,
//!   `METADATA(TYPE:…)`, `XFCC_VALUE(key)`, and `CEL(expr)` — the last
//!   checked with this crate's CEL parser, a subset of what Envoy takes
//!   (no comprehension macros), so STANDARD may refuse a CEL Envoy would
//!   accept but never the reverse.
//! - `COALESCE(json)`, `:N` allowed: the JSON must be an object
//!   with a non-empty `operators` array; each operator, a command name or
//!   `{"command", "param", "max_length"}`, is checked by the same rules as
//!   `%command(param):max_length%` (every command here is reachable from
//!   inside, `COALESCE` itself included), except that `max_length` must be
//!   an integer above 0 and `param`, if present, a string (`""` is no
//!   argument). The JSON is read by serde_json, adjusted to Envoy's
//!   nlohmann reader where they differ (`check_coalesce`); JSON nested
//!   deeper than 127 levels is refused here though Envoy takes it. A
//!   scalar at the top level crashes Envoy 1.40 at load (segfault).
//!
//! The command list was found by probing Envoy 1.40 (`--mode validate`)
//! with every command-shaped string in its binary, `%NAME(x)%` each: an
//! unknown name fails with "Not supported field", a known one loads or
//! fails with a different message. `XFCC_VALUE`, not a separate string in
//! the binary, comes from Envoy's source.

use super::cel::CelError;

/// Why a format string is refused. The text is what status and
/// diagnostics show after the field (the caller wraps it in a
/// `RuleError` or an extension failure, which carry field and class).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("'%' at offset {offset} does not start a command (write %% for a literal percent)")]
    StrayPercent { offset: usize },
    #[error("unknown format command %{name}%")]
    UnknownCommand { name: String },
    #[error("%{name}(: missing ')'")]
    UnclosedArgument { name: String },
    #[error("%{name}: not closed by '%'")]
    NotClosed { name: String },
    #[error("%{name}: a length limit needs digits after ':'")]
    EmptyLength { name: String },
    #[error("%{name}: length limit {digits} is too large (at most {max})", max = u64::MAX)]
    LengthTooLarge { name: String, digits: String },
    #[error("%{name}% needs an argument, e.g. %{name}(x)%")]
    MissingArgument { name: String },
    #[error("%{name}% takes no argument")]
    UnexpectedArgument { name: String },
    #[error("%{name}% does not allow a length limit (':N')")]
    LengthNotAllowed { name: String },
    /// The argument breaks the command's own rules.
    #[error("%{name}({arg})%: {problem}")]
    Argument {
        name: String,
        arg: String,
        problem: ArgumentProblem,
    },
    #[error("%CEL({arg})%: {cel}")]
    Cel {
        arg: String,
        #[source]
        cel: CelError,
    },
    #[error("%COALESCE: {0}")]
    Coalesce(#[from] CoalesceError),
}

/// What is wrong with one command's argument (`FormatError::Argument`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentProblem {
    #[error("at most one '?' alternative header is allowed")]
    TooManyAlternatives,
    #[error(
        "'{header}' is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only; ':' only to start a pseudo-header)"
    )]
    HeaderName { header: String },
    #[error("the key cannot be empty")]
    EmptyKey,
    #[error("serialize type '{kind}' is not PLAIN, TYPED or FIELD")]
    SerializeType { kind: String },
    #[error("a field name goes with the FIELD type, and only with it (key:FIELD:name)")]
    FieldName,
    #[error("'{specifier}' prints a newline, which a header value cannot hold")]
    Newline { specifier: String },
    #[error("option '{option}' is not SNI_ONLY, SNI_FIRST or HOST_FIRST")]
    SniOption { option: String },
    #[error("host option '{option}' is not ORIG_OR_HOST, HOST or ORIG")]
    HostOption { option: String },
    #[error("option '{option}' is not WQ (with query) or NQ (no query)")]
    PathQueryOption { option: String },
    #[error("option '{option}' is not ORIG, PATH or ORIG_OR_PATH")]
    PathSourceOption { option: String },
    #[error("option is not ORIG or DECODED")]
    QueryParamsOption,
    #[error("write start:end or start:end:precision")]
    DurationShape,
    #[error("precision '{precision}' is not ms, us or ns")]
    DurationPrecision { precision: String },
    #[error("format is not CAMEL_STRING, SNAKE_STRING or NUMBER")]
    GrpcStatusFormat,
    #[error("metadata type '{kind}' is not one of {types}", types = METADATA_TYPES.join(", "))]
    MetadataType { kind: String },
    #[error("key is not one of {keys}", keys = XFCC_KEYS.join(", "))]
    XfccKey,
}

/// What is wrong with `COALESCE`'s JSON argument.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CoalesceError {
    /// serde_json's message (its error is neither `Clone` nor `Eq`).
    #[error("the argument is not valid JSON: {detail}")]
    InvalidJson { detail: String },
    #[error("the JSON number {number} is larger than Envoy's JSON parser takes (at most {max})", max = i64::MAX)]
    NumberTooLarge { number: String },
    #[error("the JSON must be an object with an 'operators' array")]
    NotAnObject,
    #[error("'operators' must be an array")]
    OperatorsNotArray,
    #[error("the JSON has no 'operators' array")]
    NoOperators,
    #[error("'operators' must not be empty")]
    EmptyOperators,
    #[error("operators[{index}]: {problem}")]
    Operator {
        index: usize,
        #[source]
        problem: Box<OperatorError>,
    },
}

/// What is wrong with one entry of `COALESCE`'s `operators`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OperatorError {
    #[error("'command' must be a string")]
    CommandNotString,
    #[error("an operator object needs a 'command'")]
    NoCommand,
    #[error("'param' of '{command}' must be a string")]
    ParamNotString { command: String },
    #[error("'max_length' of '{command}' is {value}: it must be above 0")]
    MaxLengthNotPositive { command: String, value: i64 },
    #[error("'max_length' of '{command}' must be an integer")]
    MaxLengthNotInteger { command: String },
    #[error("an operator is a command name (a string) or an object with a 'command'")]
    NotAnOperator,
    #[error("unknown command '{command}'")]
    UnknownCommand { command: String },
    #[error("'{command}' needs a non-empty 'param'")]
    MissingParam { command: String },
    #[error("'{command}' takes no 'param'")]
    UnexpectedParam { command: String },
    #[error("'{command}' does not take a 'max_length'")]
    MaxLengthNotAllowed { command: String },
    /// The command, with its param and length, as `%command(param):N%`.
    #[error(transparent)]
    Command(#[from] FormatError),
}

/// The argument of `name` refused for `problem`.
fn bad(name: &str, arg: &str, problem: ArgumentProblem) -> FormatError {
    FormatError::Argument {
        name: name.to_string(),
        arg: arg.to_string(),
        problem,
    }
}

/// `METADATA(TYPE:…)`'s types.
const METADATA_TYPES: &[&str] = &[
    "DYNAMIC",
    "CLUSTER",
    "ROUTE",
    "UPSTREAM_HOST",
    "LISTENER",
    "LISTENER_FILTER_CHAIN",
    "VIRTUAL_HOST",
];

/// `XFCC_VALUE(key)`'s keys, lowercase.
const XFCC_KEYS: &[&str] = &["by", "hash", "cert", "chain", "subject", "uri", "dns"];

/// Whether a command takes a parenthesised argument.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arg {
    None,
    Required,
    Optional,
}

/// The commands that accept a `:N` length limit (Envoy's `LENGTH_ALLOWED`
/// syntax flag, or a parser that ignores the length: `CEL`, `METADATA`,
/// `XFCC_VALUE`; `COALESCE` truncates its result itself); every
/// other command in `COMMANDS` refuses one, checked
/// against Envoy 1.40 by `tests/policy_oracle.rs`.
const LENGTH_ALLOWED: &[&str] = &[
    "REQ",
    "RESP",
    "TRAILER",
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
    "RESPONSE_TRAILER",
    "STREAM_INFO_REQ",
    "DYNAMIC_METADATA",
    "FILTER_STATE",
    "UPSTREAM_FILTER_STATE",
    "ENVIRONMENT",
    "PATH",
    "QUERY_PARAM",
    "QUERY_PARAMS",
    "CEL",
    "METADATA",
    "XFCC_VALUE",
    "COALESCE",
];

/// The `strftime`-style optional arguments (Envoy's `SystemTimeFormatter`).
const TIME_FORMATS: &[&str] = &[
    "START_TIME",
    "START_TIME_LOCAL",
    "EMIT_TIME",
    "EMIT_TIME_LOCAL",
    "DOWNSTREAM_PEER_CERT_V_START",
    "DOWNSTREAM_PEER_CERT_V_END",
    "UPSTREAM_PEER_CERT_V_START",
    "UPSTREAM_PEER_CERT_V_END",
];

/// Every command Envoy 1.40 is known to take in a route's header value:
/// found by probing the binary's command-shaped strings, plus
/// `XFCC_VALUE` from Envoy's source (not a separate string in the binary,
/// so others could be missing the same way; see the module doc).
/// `COALESCE(json)` is checked in full: its JSON (`check_coalesce`) and
/// each of its operators against this same table (`check_command`);
/// every command here is reachable from inside it in Envoy 1.40,
/// `COALESCE` itself, `CEL` and `METADATA` included.
const COMMANDS: &[(&str, Arg)] = &[
    // Arguments: headers (`check_headers`).
    ("REQ", Arg::Required),
    ("RESP", Arg::Required),
    ("TRAILER", Arg::Required),
    ("REQUEST_HEADER", Arg::Required),
    ("RESPONSE_HEADER", Arg::Required),
    ("RESPONSE_TRAILER", Arg::Required),
    ("STREAM_INFO_REQ", Arg::Required),
    // Arguments: any text.
    ("DYNAMIC_METADATA", Arg::Required),
    ("UPSTREAM_METADATA", Arg::Required),
    ("CLUSTER_METADATA", Arg::Required),
    ("ENVIRONMENT", Arg::Required),
    ("QUERY_PARAM", Arg::Required),
    ("RESPONSE_CODE_DETAILS", Arg::Optional),
    ("DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT", Arg::Optional),
    ("DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT", Arg::Optional),
    ("DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT", Arg::Optional),
    ("DOWNSTREAM_DIRECT_LOCAL_ADDRESS_WITHOUT_PORT", Arg::Optional),
    ("UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT", Arg::Optional),
    ("UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT", Arg::Optional),
    // Arguments checked by their own function.
    ("FILTER_STATE", Arg::Required),
    ("UPSTREAM_FILTER_STATE", Arg::Required),
    ("START_TIME", Arg::Optional),
    ("START_TIME_LOCAL", Arg::Optional),
    ("EMIT_TIME", Arg::Optional),
    ("EMIT_TIME_LOCAL", Arg::Optional),
    ("DOWNSTREAM_PEER_CERT_V_START", Arg::Optional),
    ("DOWNSTREAM_PEER_CERT_V_END", Arg::Optional),
    ("UPSTREAM_PEER_CERT_V_START", Arg::Optional),
    ("UPSTREAM_PEER_CERT_V_END", Arg::Optional),
    ("REQUESTED_SERVER_NAME", Arg::Optional),
    ("PATH", Arg::Optional),
    ("QUERY_PARAMS", Arg::Optional),
    ("GRPC_STATUS", Arg::Optional),
    ("COMMON_DURATION", Arg::Required),
    ("METADATA", Arg::Required),
    ("XFCC_VALUE", Arg::Required),
    ("CEL", Arg::Required),
    ("COALESCE", Arg::Required),
    // No argument.
    ("ACCESS_LOG_TYPE", Arg::None),
    ("BYTES_RECEIVED", Arg::None),
    ("BYTES_RETRANSMITTED", Arg::None),
    ("BYTES_SENT", Arg::None),
    ("CONNECTION_ID", Arg::None),
    ("CONNECTION_TERMINATION_DETAILS", Arg::None),
    ("CUSTOM_FLAGS", Arg::None),
    ("DOWNSTREAM_CX_RTT", Arg::None),
    ("DOWNSTREAM_DECOMPRESSED_HEADER_BYTES_RECEIVED", Arg::None),
    ("DOWNSTREAM_DECOMPRESSED_HEADER_BYTES_SENT", Arg::None),
    ("DOWNSTREAM_DETECTED_CLOSE_TYPE", Arg::None),
    ("DOWNSTREAM_DIRECT_LOCAL_ADDRESS", Arg::None),
    ("DOWNSTREAM_DIRECT_LOCAL_ADDRESS_ENDPOINT_ID", Arg::None),
    ("DOWNSTREAM_DIRECT_LOCAL_PORT", Arg::None),
    ("DOWNSTREAM_DIRECT_REMOTE_ADDRESS", Arg::None),
    ("DOWNSTREAM_DIRECT_REMOTE_PORT", Arg::None),
    ("DOWNSTREAM_HANDSHAKE_DURATION", Arg::None),
    ("DOWNSTREAM_HEADER_BYTES_RECEIVED", Arg::None),
    ("DOWNSTREAM_HEADER_BYTES_SENT", Arg::None),
    ("DOWNSTREAM_LOCAL_ADDRESS", Arg::None),
    ("DOWNSTREAM_LOCAL_ADDRESS_ENDPOINT_ID", Arg::None),
    ("DOWNSTREAM_LOCAL_CLOSE_REASON", Arg::None),
    ("DOWNSTREAM_LOCAL_DNS_SAN", Arg::None),
    ("DOWNSTREAM_LOCAL_EMAIL_SAN", Arg::None),
    ("DOWNSTREAM_LOCAL_IP_SAN", Arg::None),
    ("DOWNSTREAM_LOCAL_OTHERNAME_SAN", Arg::None),
    ("DOWNSTREAM_LOCAL_PORT", Arg::None),
    ("DOWNSTREAM_LOCAL_SUBJECT", Arg::None),
    ("DOWNSTREAM_LOCAL_URI_SAN", Arg::None),
    ("DOWNSTREAM_PEER_CERT", Arg::None),
    ("DOWNSTREAM_PEER_CHAIN_FINGERPRINTS_1", Arg::None),
    ("DOWNSTREAM_PEER_CHAIN_FINGERPRINTS_256", Arg::None),
    ("DOWNSTREAM_PEER_CHAIN_SERIALS", Arg::None),
    ("DOWNSTREAM_PEER_DNS_SAN", Arg::None),
    ("DOWNSTREAM_PEER_EMAIL_SAN", Arg::None),
    ("DOWNSTREAM_PEER_FINGERPRINT_1", Arg::None),
    ("DOWNSTREAM_PEER_FINGERPRINT_256", Arg::None),
    ("DOWNSTREAM_PEER_IP_SAN", Arg::None),
    ("DOWNSTREAM_PEER_ISSUER", Arg::None),
    ("DOWNSTREAM_PEER_ISSUER_FINGERPRINT_256", Arg::None),
    ("DOWNSTREAM_PEER_ISSUER_SERIAL", Arg::None),
    ("DOWNSTREAM_PEER_OTHERNAME_SAN", Arg::None),
    ("DOWNSTREAM_PEER_SERIAL", Arg::None),
    ("DOWNSTREAM_PEER_SUBJECT", Arg::None),
    ("DOWNSTREAM_PEER_URI_SAN", Arg::None),
    ("DOWNSTREAM_REMOTE_ADDRESS", Arg::None),
    ("DOWNSTREAM_REMOTE_PORT", Arg::None),
    ("DOWNSTREAM_TLS_CIPHER", Arg::None),
    ("DOWNSTREAM_TLS_GROUP", Arg::None),
    ("DOWNSTREAM_TLS_SESSION_ID", Arg::None),
    ("DOWNSTREAM_TLS_VERSION", Arg::None),
    ("DOWNSTREAM_TRANSPORT_FAILURE_REASON", Arg::None),
    ("DOWNSTREAM_WIRE_BYTES_RECEIVED", Arg::None),
    ("DOWNSTREAM_WIRE_BYTES_SENT", Arg::None),
    ("DURATION", Arg::None),
    ("FILTER_CHAIN_NAME", Arg::None),
    ("GRPC_STATUS_NUMBER", Arg::None),
    ("HOSTNAME", Arg::None),
    ("LISTENER_NAME", Arg::None),
    ("LOCAL_REPLY_BODY", Arg::None),
    ("PACKETS_RETRANSMITTED", Arg::None),
    ("PROTOCOL", Arg::None),
    ("REQUEST_DURATION", Arg::None),
    ("REQUEST_HEADERS_BYTES", Arg::None),
    ("REQUEST_TX_DURATION", Arg::None),
    ("RESPONSE_CODE", Arg::None),
    ("RESPONSE_DURATION", Arg::None),
    ("RESPONSE_FLAGS", Arg::None),
    ("RESPONSE_FLAGS_LONG", Arg::None),
    ("RESPONSE_HEADERS_BYTES", Arg::None),
    ("RESPONSE_TRAILERS_BYTES", Arg::None),
    ("RESPONSE_TX_DURATION", Arg::None),
    ("ROUNDTRIP_DURATION", Arg::None),
    ("ROUTE_NAME", Arg::None),
    ("ROUTE_RESOLUTION_COUNT", Arg::None),
    ("ROUTE_RESOLUTION_TIME_US", Arg::None),
    ("SPAN_ID", Arg::None),
    ("STREAM_ID", Arg::None),
    ("TLS_JA3_FINGERPRINT", Arg::None),
    ("TLS_JA4_FINGERPRINT", Arg::None),
    ("TRACE_ID", Arg::None),
    ("UNIQUE_ID", Arg::None),
    ("UPSTREAM_CLUSTER", Arg::None),
    ("UPSTREAM_CLUSTER_RAW", Arg::None),
    ("UPSTREAM_CONNECTION_ID", Arg::None),
    ("UPSTREAM_CONNECTION_IDS_ATTEMPTED", Arg::None),
    ("UPSTREAM_CONNECTION_POOL_READY_DURATION", Arg::None),
    ("UPSTREAM_DECOMPRESSED_HEADER_BYTES_RECEIVED", Arg::None),
    ("UPSTREAM_DECOMPRESSED_HEADER_BYTES_SENT", Arg::None),
    ("UPSTREAM_DETECTED_CLOSE_TYPE", Arg::None),
    ("UPSTREAM_HEADER_BYTES_RECEIVED", Arg::None),
    ("UPSTREAM_HEADER_BYTES_SENT", Arg::None),
    ("UPSTREAM_HOST", Arg::None),
    ("UPSTREAM_HOSTS_ATTEMPTED", Arg::None),
    ("UPSTREAM_HOSTS_ATTEMPTED_WITHOUT_PORT", Arg::None),
    ("UPSTREAM_HOST_NAME", Arg::None),
    ("UPSTREAM_HOST_NAMES_ATTEMPTED", Arg::None),
    ("UPSTREAM_HOST_NAMES_ATTEMPTED_WITHOUT_PORT", Arg::None),
    ("UPSTREAM_HOST_NAME_WITHOUT_PORT", Arg::None),
    ("UPSTREAM_LOCAL_ADDRESS", Arg::None),
    ("UPSTREAM_LOCAL_CLOSE_REASON", Arg::None),
    ("UPSTREAM_LOCAL_DNS_SAN", Arg::None),
    ("UPSTREAM_LOCAL_IP_SAN", Arg::None),
    ("UPSTREAM_LOCAL_PORT", Arg::None),
    ("UPSTREAM_LOCAL_URI_SAN", Arg::None),
    ("UPSTREAM_PEER_CERT", Arg::None),
    ("UPSTREAM_PEER_DNS_SAN", Arg::None),
    ("UPSTREAM_PEER_IP_SAN", Arg::None),
    ("UPSTREAM_PEER_ISSUER", Arg::None),
    ("UPSTREAM_PEER_SUBJECT", Arg::None),
    ("UPSTREAM_PEER_URI_SAN", Arg::None),
    ("UPSTREAM_PROTOCOL", Arg::None),
    ("UPSTREAM_REMOTE_ADDRESS", Arg::None),
    ("UPSTREAM_REMOTE_ADDRESS_ENDPOINT_ID", Arg::None),
    ("UPSTREAM_REMOTE_PORT", Arg::None),
    ("UPSTREAM_REQUEST_ATTEMPT_COUNT", Arg::None),
    ("UPSTREAM_SERVER_NAME", Arg::None),
    ("UPSTREAM_TLS_CIPHER", Arg::None),
    ("UPSTREAM_TLS_GROUP", Arg::None),
    ("UPSTREAM_TLS_SESSION_ID", Arg::None),
    ("UPSTREAM_TLS_VERSION", Arg::None),
    ("UPSTREAM_TRANSPORT_FAILURE_REASON", Arg::None),
    ("UPSTREAM_WIRE_BYTES_RECEIVED", Arg::None),
    ("UPSTREAM_WIRE_BYTES_SENT", Arg::None),
    ("VIRTUAL_CLUSTER_NAME", Arg::None),
];

/// Every command this checker accepts (for the Envoy oracle test); a
/// command with an optional argument comes both without and with one.
pub fn known_commands() -> impl Iterator<Item = String> {
    COMMANDS.iter().flat_map(|(name, arg)| match arg {
        Arg::None => vec![format!("%{name}%")],
        Arg::Optional => vec![
            format!("%{name}%"),
            format!("%{name}({})%", optional_example(name)),
        ],
        Arg::Required => vec![format!("%{name}({})%", required_example(name))],
    })
}

/// A meaningful argument for each command whose argument is optional.
fn optional_example(name: &str) -> &'static str {
    match name {
        n if TIME_FORMATS.contains(&n) => "%Y-%m-%dT%H:%M:%S.%3fZ",
        "RESPONSE_CODE_DETAILS" => "ALLOW_WHITESPACES",
        "REQUESTED_SERVER_NAME" => "SNI_FIRST:HOST",
        "PATH" => "NQ:ORIG_OR_PATH",
        "QUERY_PARAMS" => "DECODED",
        "GRPC_STATUS" => "SNAKE_STRING",
        _ => "MASK_PREFIX_LEN:16",
    }
}

/// A valid argument for each command that requires one.
fn required_example(name: &str) -> &'static str {
    match name {
        "ENVIRONMENT" => "HOME",
        "FILTER_STATE" | "UPSTREAM_FILTER_STATE" => "envoy.string:PLAIN",
        "COMMON_DURATION" => "DS_RX_BEG:US_TX_END:us",
        "METADATA" => "ROUTE:envoy.lb:key",
        "XFCC_VALUE" => "uri",
        "CEL" => "request.headers['x-user']",
        "COALESCE" => r#"{"operators":["PROTOCOL",{"command":"REQ","param":"x-a?x-b","max_length":5}]}"#,
        n if n.ends_with("METADATA") => "envoy.lb:key",
        _ => "x-test",
    }
}

/// Checks one format string; the error says what is wrong and where.
pub fn check(s: &str) -> Result<(), FormatError> {
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
            return Err(FormatError::StrayPercent { offset: start });
        }
        if !COMMANDS.iter().any(|(n, _)| *n == name) {
            return Err(FormatError::UnknownCommand { name: name.into() });
        }
        let mut arg = None;
        if b.get(i) == Some(&b'(') {
            if !s[i..].contains(')') {
                return Err(FormatError::UnclosedArgument { name: name.into() });
            }
            let close = closing_paren(b, i).ok_or_else(|| FormatError::NotClosed { name: name.into() })?;
            // Envoy's syntax check only asks whether the argument is
            // empty: `%CMD()%` is `%CMD%`.
            if close > i + 1 {
                arg = Some(&s[i + 1..close]);
            }
            i = close + 1;
        }
        let mut has_len = false;
        if b.get(i) == Some(&b':') {
            let digits_start = i + 1;
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == digits_start {
                return Err(FormatError::EmptyLength { name: name.into() });
            }
            // Envoy's command regex captures the length into a size_t; a
            // value that overflows it makes the whole command not match.
            if s[digits_start..i].parse::<u64>().is_err() {
                return Err(FormatError::LengthTooLarge {
                    name: name.into(),
                    digits: s[digits_start..i].into(),
                });
            }
            has_len = true;
        }
        if b.get(i) != Some(&b'%') {
            return Err(FormatError::NotClosed { name: name.into() });
        }
        i += 1;
        check_command(name, arg, has_len)?;
    }
    Ok(())
}

/// One command as Envoy's built-in command parsers see it: its name, its
/// argument (`None` for none or an empty one: Envoy does not tell them
/// apart) and whether a length limit comes with it. The format-string
/// scanner (`check`) and `COALESCE`'s operators both end here.
fn check_command(name: &str, arg: Option<&str>, has_len: bool) -> Result<(), FormatError> {
    let Some((_, kind)) = COMMANDS.iter().find(|(n, _)| *n == name) else {
        return Err(FormatError::UnknownCommand { name: name.into() });
    };
    match (kind, arg.is_some()) {
        (Arg::Required, false) => return Err(FormatError::MissingArgument { name: name.into() }),
        (Arg::None, true) => return Err(FormatError::UnexpectedArgument { name: name.into() }),
        _ => {}
    }
    if has_len && !LENGTH_ALLOWED.contains(&name) {
        return Err(FormatError::LengthNotAllowed { name: name.into() });
    }
    let Some(a) = arg else {
        return Ok(());
    };
    match name {
        "REQ" | "RESP" | "TRAILER" | "REQUEST_HEADER" | "RESPONSE_HEADER" | "RESPONSE_TRAILER"
        | "STREAM_INFO_REQ" => check_headers(name, a),
        "FILTER_STATE" | "UPSTREAM_FILTER_STATE" => check_filter_state(name, a),
        n if TIME_FORMATS.contains(&n) => check_time_format(name, a),
        "REQUESTED_SERVER_NAME" => check_server_name(a),
        "PATH" => check_path(a),
        "QUERY_PARAMS" => check_query_params(a),
        "COMMON_DURATION" => check_common_duration(a),
        "GRPC_STATUS" => check_grpc_status(a),
        "METADATA" => check_metadata(a),
        "XFCC_VALUE" => check_xfcc(a),
        "CEL" => super::cel::parse(a)
            .map(|_| ())
            .map_err(|cel| FormatError::Cel { arg: a.into(), cel }),
        "COALESCE" => check_coalesce(a).map_err(FormatError::from),
        _ => Ok(()),
    }
}

/// The `)` that ends the argument opened at `open`. Envoy's command regex
/// takes the argument lazily (`\((.*?)\)(:[0-9]+)?%`): the first `)`
/// followed by `%` or by `:digits%`, so an argument may hold `)`
/// (`%START_TIME(a)b)%` is the format `a)b`). A length that then overflows
/// does not make the regex look further: the command does not match.
fn closing_paren(b: &[u8], open: usize) -> Option<usize> {
    (open + 1..b.len()).find(|&k| {
        if b[k] != b')' {
            return false;
        }
        match b.get(k + 1) {
            Some(b'%') => true,
            Some(b':') => {
                let digits = b[k + 2..].iter().take_while(|c| c.is_ascii_digit()).count();
                digits > 0 && b.get(k + 2 + digits) == Some(&b'%')
            }
            _ => false,
        }
    })
}

/// `REQ`/`RESP`/`TRAILER` take `header` or `header?alternative`. Envoy
/// (`SubstitutionFormatUtils::parseSubcommandHeaders`) refuses a second
/// `?` and validates each name, lowercased, with
/// `HeaderUtility::headerNameIsValid`: RFC 9110 token characters, or a
/// `:` followed by a non-empty token for a pseudo-header. An empty name
/// (`%REQ(?x)%`) is accepted.
fn check_headers(name: &str, arg: &str) -> Result<(), FormatError> {
    let parts: Vec<&str> = arg.split('?').collect();
    if parts.len() > 2 {
        return Err(bad(name, arg, ArgumentProblem::TooManyAlternatives));
    }
    for h in parts {
        let token = h.strip_prefix(':').unwrap_or(h);
        let pseudo_empty = h.starts_with(':') && token.is_empty();
        if pseudo_empty || !token.bytes().all(is_tchar) {
            return Err(bad(name, arg, ArgumentProblem::HeaderName { header: h.into() }));
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
fn check_filter_state(name: &str, arg: &str) -> Result<(), FormatError> {
    let mut parts = arg.split(':');
    let key = parts.next().unwrap_or("");
    let kind = parts.next().unwrap_or("");
    let field = parts.next().unwrap_or("");
    if key.is_empty() {
        return Err(bad(name, arg, ArgumentProblem::EmptyKey));
    }
    match kind {
        "" | "PLAIN" | "TYPED" | "FIELD" => {}
        _ => {
            return Err(bad(
                name,
                arg,
                ArgumentProblem::SerializeType { kind: kind.into() },
            ));
        }
    }
    if (kind == "FIELD") == field.is_empty() {
        return Err(bad(name, arg, ArgumentProblem::FieldName));
    }
    Ok(())
}

/// `START_TIME(format)`: Envoy's `SystemTimeFormatter` refuses a format
/// in which its regex `%[-_0^#]*[1-9]*(E|O)?n` finds a match (a strftime
/// newline, whatever precedes the `%`: `%%n` too); any other text is
/// accepted, unknown specifiers included.
fn check_time_format(name: &str, arg: &str) -> Result<(), FormatError> {
    let b = arg.as_bytes();
    for (at, _) in arg.match_indices('%') {
        let mut j = at + 1;
        // The classes are disjoint, so greedy matching is the regex's.
        while j < b.len() && b"-_0^#".contains(&b[j]) {
            j += 1;
        }
        while j < b.len() && (b'1'..=b'9').contains(&b[j]) {
            j += 1;
        }
        if j < b.len() && (b[j] == b'E' || b[j] == b'O') {
            j += 1;
        }
        if b.get(j) == Some(&b'n') {
            return Err(bad(
                name,
                arg,
                ArgumentProblem::Newline {
                    specifier: arg[at..=j].into(),
                },
            ));
        }
    }
    Ok(())
}

/// `REQUESTED_SERVER_NAME(sni[:host])`: each option may be empty (the
/// default) or one of Envoy's names, exactly; parts after the second are
/// ignored (confirmed against Envoy 1.40).
fn check_server_name(arg: &str) -> Result<(), FormatError> {
    let mut parts = arg.split(':');
    let sni = parts.next().unwrap_or("");
    let host = parts.next().unwrap_or("");
    if !matches!(sni, "" | "SNI_ONLY" | "SNI_FIRST" | "HOST_FIRST") {
        return Err(bad(
            "REQUESTED_SERVER_NAME",
            arg,
            ArgumentProblem::SniOption { option: sni.into() },
        ));
    }
    if !matches!(host, "" | "ORIG_OR_HOST" | "HOST" | "ORIG") {
        return Err(bad(
            "REQUESTED_SERVER_NAME",
            arg,
            ArgumentProblem::HostOption { option: host.into() },
        ));
    }
    Ok(())
}

/// `PATH(query[:source])`: each option may be empty (the default) or one
/// of Envoy's names, exactly; parts after the second are ignored
/// (confirmed against Envoy 1.40).
fn check_path(arg: &str) -> Result<(), FormatError> {
    let mut parts = arg.split(':');
    let query = parts.next().unwrap_or("");
    let source = parts.next().unwrap_or("");
    if !matches!(query, "" | "WQ" | "NQ") {
        return Err(bad(
            "PATH",
            arg,
            ArgumentProblem::PathQueryOption { option: query.into() },
        ));
    }
    if !matches!(source, "" | "ORIG" | "PATH" | "ORIG_OR_PATH") {
        return Err(bad(
            "PATH",
            arg,
            ArgumentProblem::PathSourceOption {
                option: source.into(),
            },
        ));
    }
    Ok(())
}

/// `QUERY_PARAMS(ORIG|DECODED)`: the whole argument, exactly.
fn check_query_params(arg: &str) -> Result<(), FormatError> {
    if matches!(arg, "ORIG" | "DECODED") {
        Ok(())
    } else {
        Err(bad("QUERY_PARAMS", arg, ArgumentProblem::QueryParamsOption))
    }
}

/// `COMMON_DURATION(start:end[:precision])`: two time points (any names:
/// an unknown one is a custom downstream timing key) and an optional
/// precision `ms`, `us` or `ns`, exactly (Envoy's
/// `CommonDurationFormatter::create`).
fn check_common_duration(arg: &str) -> Result<(), FormatError> {
    let parts: Vec<&str> = arg.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return Err(bad("COMMON_DURATION", arg, ArgumentProblem::DurationShape));
    }
    if let Some(p) = parts.get(2)
        && !matches!(*p, "ms" | "us" | "ns")
    {
        return Err(bad(
            "COMMON_DURATION",
            arg,
            ArgumentProblem::DurationPrecision {
                precision: (*p).into(),
            },
        ));
    }
    Ok(())
}

/// `GRPC_STATUS(format)`: Envoy's `GrpcStatusFormatter::parseFormat`.
fn check_grpc_status(arg: &str) -> Result<(), FormatError> {
    if matches!(arg, "CAMEL_STRING" | "SNAKE_STRING" | "NUMBER") {
        Ok(())
    } else {
        Err(bad("GRPC_STATUS", arg, ArgumentProblem::GrpcStatusFormat))
    }
}

/// `METADATA(TYPE[:namespace[:path...]])` (the built-in metadata
/// formatter): only the type is checked, exactly.
fn check_metadata(arg: &str) -> Result<(), FormatError> {
    let kind = arg.split(':').next().unwrap_or("");
    if METADATA_TYPES.contains(&kind) {
        Ok(())
    } else {
        Err(bad(
            "METADATA",
            arg,
            ArgumentProblem::MetadataType { kind: kind.into() },
        ))
    }
}

/// `XFCC_VALUE(key)`: an `x-forwarded-client-cert` element key, in any
/// ASCII case (Envoy lowercases it).
fn check_xfcc(arg: &str) -> Result<(), FormatError> {
    if XFCC_KEYS.contains(&arg.to_ascii_lowercase().as_str()) {
        Ok(())
    } else {
        Err(bad("XFCC_VALUE", arg, ArgumentProblem::XfccKey))
    }
}

/// `COALESCE(json)`, Envoy's `CoalesceFormatter::create`: the argument
/// is JSON (nlohmann, strict RFC 8259) holding an object whose
/// `operators` is a non-empty array; each operator is a command name or
/// `{"command": …, "param": …, "max_length": …}`, created by Envoy's
/// built-in command parsers, so it obeys the same rules as `%command%`
/// (`check_command`). Where serde_json and Envoy's parser differ, this
/// follows Envoy (each confirmed against 1.40):
///
/// - one leading byte order mark is skipped (nlohmann skips it);
/// - an integer above `i64::MAX` that fits a `u64`, anywhere (even under
///   a key later overwritten by a duplicate), fails Envoy's parse; larger
///   integers become doubles there and here;
/// - a duplicate key keeps its last value on both sides;
/// - a scalar at the top level crashes Envoy 1.40 at load (it
///   dereferences an empty root), an array is refused: both refused here.
///
/// One difference is left: serde_json refuses JSON nested deeper than 127
/// levels, which Envoy takes; STANDARD refuses it (never the reverse).
fn check_coalesce(arg: &str) -> Result<(), CoalesceError> {
    use serde_json::Value;
    let text = arg.strip_prefix('\u{feff}').unwrap_or(arg);
    let json: Value = serde_json::from_str(text).map_err(|e| CoalesceError::InvalidJson {
        detail: e.to_string(),
    })?;
    if let Some(n) = int64_overflow(text) {
        return Err(CoalesceError::NumberTooLarge { number: n.into() });
    }
    let Value::Object(top) = &json else {
        return Err(CoalesceError::NotAnObject);
    };
    let operators = match top.get("operators") {
        Some(Value::Array(ops)) => ops,
        Some(_) => return Err(CoalesceError::OperatorsNotArray),
        None => return Err(CoalesceError::NoOperators),
    };
    if operators.is_empty() {
        return Err(CoalesceError::EmptyOperators);
    }
    for (index, op) in operators.iter().enumerate() {
        check_operator(op).map_err(|problem| CoalesceError::Operator {
            index,
            problem: Box::new(problem),
        })?;
    }
    Ok(())
}

/// One entry of `COALESCE`'s `operators`, in Envoy's order: the command
/// (a string), `param` (a string if present at all, `null` included; empty
/// is no argument), `max_length` (an integer above 0 if present).
fn check_operator(op: &serde_json::Value) -> Result<(), OperatorError> {
    use serde_json::Value;
    let (command, param, max_length) = match op {
        Value::String(c) => (c.as_str(), None, None),
        Value::Object(o) => {
            let command = match o.get("command") {
                Some(Value::String(c)) => c.as_str(),
                Some(_) => return Err(OperatorError::CommandNotString),
                None => return Err(OperatorError::NoCommand),
            };
            let param = match o.get("param") {
                Some(Value::String(p)) => Some(p.as_str()),
                Some(_) => {
                    return Err(OperatorError::ParamNotString {
                        command: command.into(),
                    });
                }
                None => None,
            };
            let max_length = match o.get("max_length") {
                Some(Value::Number(n)) => match n.as_i64() {
                    Some(v) if v > 0 => Some(v),
                    Some(value) => {
                        return Err(OperatorError::MaxLengthNotPositive {
                            command: command.into(),
                            value,
                        });
                    }
                    None => {
                        return Err(OperatorError::MaxLengthNotInteger {
                            command: command.into(),
                        });
                    }
                },
                Some(_) => {
                    return Err(OperatorError::MaxLengthNotInteger {
                        command: command.into(),
                    });
                }
                None => None,
            };
            (command, param, max_length)
        }
        _ => return Err(OperatorError::NotAnOperator),
    };
    let Some((_, kind)) = COMMANDS.iter().find(|(n, _)| *n == command) else {
        return Err(OperatorError::UnknownCommand {
            command: command.into(),
        });
    };
    // `"param": ""` is no argument, as `%CMD()%` is `%CMD%`.
    let param = param.filter(|p| !p.is_empty());
    match (kind, param) {
        (Arg::Required, None) => {
            return Err(OperatorError::MissingParam {
                command: command.into(),
            });
        }
        (Arg::None, Some(_)) => {
            return Err(OperatorError::UnexpectedParam {
                command: command.into(),
            });
        }
        _ => {}
    }
    if max_length.is_some() && !LENGTH_ALLOWED.contains(&command) {
        return Err(OperatorError::MaxLengthNotAllowed {
            command: command.into(),
        });
    }
    Ok(check_command(command, param, max_length.is_some())?)
}

/// The first integer in `json` (already valid JSON) that nlohmann reads
/// as unsigned and Envoy's JSON loader then refuses: above `i64::MAX`,
/// within `u64` (a larger one is read as a double). Numbers are found by
/// skipping strings; a negative one is never refused.
fn int64_overflow(json: &str) -> Option<&str> {
    let b = json.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    i += 1;
                }
                let token = &json[start..i];
                if token.bytes().all(|c| c.is_ascii_digit())
                    && token.parse::<u64>().is_ok_and(|v| v > i64::MAX as u64)
                {
                    return Some(token);
                }
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error is its variant, and its text is what status shows.
    #[test]
    fn errors_name_the_variant_and_keep_their_text() {
        let cases: Vec<(&str, FormatError, &str)> = vec![
            (
                "50%",
                FormatError::StrayPercent { offset: 2 },
                "'%' at offset 2 does not start a command (write %% for a literal percent)",
            ),
            (
                "%REQ(x):18446744073709551616%",
                FormatError::LengthTooLarge {
                    name: "REQ".into(),
                    digits: "18446744073709551616".into(),
                },
                "%REQ: length limit 18446744073709551616 is too large (at most 18446744073709551615)",
            ),
            (
                "%REQ%",
                FormatError::MissingArgument { name: "REQ".into() },
                "%REQ% needs an argument, e.g. %REQ(x)%",
            ),
            (
                "%REQ(x y)%",
                FormatError::Argument {
                    name: "REQ".into(),
                    arg: "x y".into(),
                    problem: ArgumentProblem::HeaderName { header: "x y".into() },
                },
                "%REQ(x y)%: 'x y' is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only; ':' only to start a pseudo-header)",
            ),
            (
                "%METADATA(FOO)%",
                FormatError::Argument {
                    name: "METADATA".into(),
                    arg: "FOO".into(),
                    problem: ArgumentProblem::MetadataType { kind: "FOO".into() },
                },
                "%METADATA(FOO)%: metadata type 'FOO' is not one of DYNAMIC, CLUSTER, ROUTE, UPSTREAM_HOST, LISTENER, LISTENER_FILTER_CHAIN, VIRTUAL_HOST",
            ),
            (
                r#"%COALESCE({"operators":[{"command":"REQ"}]})%"#,
                FormatError::Coalesce(CoalesceError::Operator {
                    index: 0,
                    problem: Box::new(OperatorError::MissingParam {
                        command: "REQ".into(),
                    }),
                }),
                "%COALESCE: operators[0]: 'REQ' needs a non-empty 'param'",
            ),
            (
                r#"%COALESCE({"operators":[{"command":"REQ","param":"a b"}]})%"#,
                FormatError::Coalesce(CoalesceError::Operator {
                    index: 0,
                    problem: Box::new(OperatorError::Command(FormatError::Argument {
                        name: "REQ".into(),
                        arg: "a b".into(),
                        problem: ArgumentProblem::HeaderName { header: "a b".into() },
                    })),
                }),
                "%COALESCE: operators[0]: %REQ(a b)%: 'a b' is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only; ':' only to start a pseudo-header)",
            ),
        ];
        for (input, variant, text) in cases {
            let err = check(input).err();
            assert_eq!(err.as_ref(), Some(&variant), "{input}");
            assert_eq!(err.map(|e| e.to_string()).as_deref(), Some(text), "{input}");
        }
    }

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
            "%START_TIME()%",
            "%PROTOCOL()%",
            "%START_TIME(%10n)%",
            "%START_TIME(%EOn %)%",
            "%RESPONSE_CODE_DETAILS(ALLOW_WHITESPACES)%",
            "%RESPONSE_CODE_DETAILS(anything)%",
            "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:16)%",
            "%DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT(x)%",
            "%REQUESTED_SERVER_NAME(SNI_ONLY)%",
            "%REQUESTED_SERVER_NAME(:ORIG)%",
            "%REQUESTED_SERVER_NAME(HOST_FIRST:ORIG_OR_HOST:x)%",
            "%START_TIME(a)b)%",
            "%START_TIME(a):5)%",
            "%ENVIRONMENT(a)b):5%",
            "%RESPONSE_CODE_DETAILS())%",
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
            "%PROTOCOL():5%",
            "%START_TIME(%n)%",
            "%START_TIME(%%n)%",
            "%START_TIME(%-_0^#19En)%",
            "%RESPONSE_CODE_DETAILS:5%",
            "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:16):5%",
            "%UPSTREAM_REMOTE_ADDRESS(MASK_PREFIX_LEN:16)%",
            "%REQUESTED_SERVER_NAME(sni_only)%",
            "%REQUESTED_SERVER_NAME(:x)%",
            "%REQUESTED_SERVER_NAME(SNI_ONLY :ORIG)%",
            "%START_TIME(a)b%",
            "%START_TIME(a)%b)%",
            "%PROTOCOL()x)%",
            "%ENVIRONMENT(a):99999999999999999999%)%",
            "%REQUESTED_SERVER_NAME(SNI_ONLY)b)%",
        ] {
            assert!(check(s).is_err(), "{s}");
        }
    }

    fn coalesce(json: &str) -> String {
        format!("%COALESCE({json})%")
    }

    #[test]
    fn coalesce_accepts_what_envoy_accepts() {
        for j in [
            r#"{"operators":["PROTOCOL"]}"#,
            r#" {"operators" : [ "PROTOCOL" ] } "#,
            "\u{feff}{\"operators\":[\"PROTOCOL\"]}",
            r#"{"operators":[{"command":"REQ","param":"x-a?x-b","max_length":5}]}"#,
            r#"{"operators":[{"command":"PROTOCOL","param":""}]}"#,
            r#"{"operators":[{"command":"PROTOCOL","other":[1,{"a":null}]}]}"#,
            r#"{"operators":[],"operators":["PROTOCOL"]}"#,
            r#"{"operators":[{"command":"REQ","param":"x","max_length":0,"max_length":9223372036854775807}]}"#,
            r#"{"operators":["PROTOCOL"],"x":[18446744073709551616,-9223372036854775809,1e-400,1E5]}"#,
            r#"{"operators":["PROTOCOL"],"x":"\ud800\udc00 9223372036854775808 \" 9223372036854775808"}"#,
            r#"{"operators":[{"command":"CEL","param":"request.path","max_length":3}]}"#,
            r#"{"operators":[{"command":"COALESCE","param":"{\"operators\":[\"PROTOCOL\"]}","max_length":3}]}"#,
            r#"{"operators":[{"command":"START_TIME","param":"a\nb"}]}"#,
        ] {
            assert_eq!(check(&coalesce(j)), Ok(()), "{j}");
        }
        assert_eq!(check(r#"%COALESCE({"operators":["PROTOCOL"]}):0%"#), Ok(()));
    }

    #[test]
    fn coalesce_rejects_what_envoy_rejects() {
        for (j, want) in [
            ("1", "must be an object"),
            (r#"["PROTOCOL"]"#, "must be an object"),
            ("{}", "no 'operators'"),
            (r#"{"operators":[]}"#, "must not be empty"),
            (r#"{"operators":"PROTOCOL"}"#, "must be an array"),
            (
                r#"{"operators":["PROTOCOL"],"operators":[]}"#,
                "must not be empty",
            ),
            (r#"{"operators":["PROTOCOL"],}"#, "not valid JSON"),
            (r#"{'operators':['PROTOCOL']}"#, "not valid JSON"),
            (r#"{"operators":["PROTOCOL"],"x":"\ud800"}"#, "not valid JSON"),
            (r#"{"operators":["PROTOCOL"],"x":1e400}"#, "not valid JSON"),
            (" ", "not valid JSON"),
            (" \u{feff}{\"operators\":[\"PROTOCOL\"]}", "not valid JSON"),
            (
                r#"{"operators":["PROTOCOL"],"x":9223372036854775808}"#,
                "9223372036854775808 is larger",
            ),
            (
                r#"{"x":9223372036854775808,"x":1,"operators":["PROTOCOL"]}"#,
                "larger",
            ),
            (r#"{"operators":[1]}"#, "a command name"),
            (r#"{"operators":[""]}"#, "operators[0]: unknown command ''"),
            (
                r#"{"operators":["PROTOCOL","FOO"]}"#,
                "operators[1]: unknown command 'FOO'",
            ),
            (r#"{"operators":["REQ(x)"]}"#, "unknown command"),
            (r#"{"operators":["REQ"]}"#, "'REQ' needs a non-empty 'param'"),
            (
                r#"{"operators":[{"command":"REQ","param":""}]}"#,
                "needs a non-empty 'param'",
            ),
            (
                r#"{"operators":[{"command":"PROTOCOL","param":"x"}]}"#,
                "takes no 'param'",
            ),
            (
                r#"{"operators":[{"command":"PROTOCOL","param":null}]}"#,
                "must be a string",
            ),
            (
                r#"{"operators":[{"command":"PROTOCOL","max_length":5}]}"#,
                "does not take a 'max_length'",
            ),
            (
                r#"{"operators":[{"command":"REQ","param":"x","max_length":0}]}"#,
                "above 0",
            ),
            (
                r#"{"operators":[{"command":"REQ","param":"x","max_length":-0}]}"#,
                "max_length",
            ),
            (
                r#"{"operators":[{"command":"REQ","param":"x","max_length":1.0}]}"#,
                "must be an integer",
            ),
            (
                r#"{"operators":[{"command":"REQ","param":"x","max_length":"5"}]}"#,
                "must be an integer",
            ),
            (r#"{"operators":[{"command":1}]}"#, "'command' must be a string"),
            (r#"{"operators":[{"param":"x"}]}"#, "needs a 'command'"),
            (
                r#"{"operators":[{"command":"REQ","param":"a b"}]}"#,
                "not a valid header name",
            ),
            (
                r#"{"operators":[{"command":"START_TIME","param":"%n"}]}"#,
                "newline",
            ),
            (r#"{"operators":[{"command":"CEL","param":"1 +"}]}"#, "%CEL(1 +)%"),
            (
                r#"{"operators":[{"command":"COALESCE","param":"1"}]}"#,
                "operators[0]: %COALESCE: the JSON must be",
            ),
        ] {
            let got = check(&coalesce(j));
            assert!(
                got.as_ref().is_err_and(|e| e.to_string().contains(want)),
                "{j}: {got:?}, want {want:?}"
            );
        }
        for s in ["%COALESCE%", "%COALESCE()%", "%COALESCE:5%"] {
            assert!(check(s).is_err(), "{s}");
        }
        // `)%` ends the argument, inside a JSON string too.
        assert!(check(r#"%COALESCE({"operators":[{"command":"REQ","param":"x)%"}]})%"#).is_err());
        // Nested too deep for serde_json (Envoy would take it): refused,
        // without overflowing the stack.
        let deep = format!(
            r#"{{"operators":["PROTOCOL"],"x":{}{}}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert!(check(&coalesce(&deep)).is_err());
        let ok = format!(
            r#"{{"operators":["PROTOCOL"],"x":{}{}}}"#,
            "[".repeat(126),
            "]".repeat(126)
        );
        assert_eq!(check(&coalesce(&ok)), Ok(()));
    }
}
