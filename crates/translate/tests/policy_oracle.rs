//! The policy checks against the real Envoy: every CEL function (with each
//! arity) and every format command STANDARD accepts is accepted by Envoy.
//! This keeps STANDARD's in-process allow-lists honest: an entry Envoy
//! refused would be a NACK. (The other direction — `string()`, unknown
//! functions, wrong arities are refused by Envoy with "No overload found in
//! reference resolve step" — is what the allow-list exists for; the parser
//! tests in `envoy/cel.rs` pin those cases.)

use translate::envoy::{cel, format};
use translate::output::bootstrap;

const HEADER: &str = r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portcullis}
spec: {controllerName: portcullis.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: app}
spec:
  gatewayClassName: portcullis
  listeners: [{name: http, protocol: HTTP, port: 80}]
"#;

/// One rule per policy body; returns whether Envoy accepts the output.
fn envoy_accepts(bodies: &[String]) -> Result<(), String> {
    let mut m = HEADER.to_string();
    let rules: Vec<String> = (0..bodies.len())
        .map(|i| format!("  - {{name: r{i}, matches: [{{path: {{value: /r{i}}}}}]}}"))
        .collect();
    m.push_str(&format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r, namespace: app}}\nspec:\n  parentRefs: [{{name: gw}}]\n  rules:\n{}\n",
        rules.join("\n")
    ));
    for (i, b) in bodies.iter().enumerate() {
        m.push_str(&format!(
            "---\napiVersion: gateway.portcullis.dev/v1alpha1\nkind: TrafficPolicy\nmetadata: {{name: p{i}, namespace: app}}\nspec:\n  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: r, sectionName: r{i}}}]\n{b}\n"
        ));
    }
    let loaded = api::loader::load_str("oracle.yaml", &m);
    let out = translate::translate(&loaded.inputs, &translate::Settings::default());
    assert!(
        out.replacements.is_empty(),
        "STANDARD replaced something: {:?}",
        out.replacements
    );
    let gw = &out.gateways["app/gw"];
    testkit::envoy::validate(&bootstrap::static_bootstrap(gw, "app/gw", &Default::default()))
}

fn rbac(expr: &str) -> String {
    format!(
        "  rbac: {{matchExpressions: [{}]}}",
        serde_json::to_string(expr).expect("json")
    )
}

/// A valid call of each function with the given number of arguments
/// (receiver included), as a method call or a global one.
fn probe(name: &str, arity: usize, member: bool) -> String {
    match (name, arity, member) {
        ("size", 1, false) => "size(request.path) >= 0".into(),
        ("size", 1, true) => "request.path.size() >= 0".into(),
        ("contains" | "startsWith" | "endsWith" | "matches", 2, true) => format!("request.path.{name}('a')"),
        ("contains" | "startsWith" | "endsWith" | "matches", 2, false) => {
            format!("{name}(request.path, 'a')")
        }
        ("int", 1, false) => "int('1') == 1".into(),
        ("uint", 1, false) => "uint('1') == 1u".into(),
        ("double", 1, false) => "double('1.5') > 1.0".into(),
        ("bytes", 1, false) => "bytes('a') == b'a'".into(),
        ("bool", 1, false) => "bool('true')".into(),
        ("timestamp", 1, false) => "timestamp('2020-01-01T00:00:00Z') < request.time".into(),
        ("duration", 1, false) => "duration('1s') > duration('0s')".into(),
        ("type", 1, false) => "type(1) == int".into(),
        ("dyn", 1, false) => "dyn(1) == 1".into(),
        (n, 1, true) if n.starts_with("get") => format!("request.time.{n}() >= 0"),
        (n, 2, true) if n.starts_with("get") => format!("request.time.{n}('UTC') >= 0"),
        _ => panic!("no probe for {name}/{arity} (member: {member}): add one"),
    }
}

#[test]
fn every_cel_function_standard_accepts_envoy_accepts() {
    let mut exprs = Vec::new();
    for (name, arities, style) in cel::FUNCTIONS {
        let styles: &[bool] = match style {
            cel::Style::Global => &[false],
            cel::Style::Member => &[true],
            cel::Style::Both => &[false, true],
        };
        for &a in *arities {
            for &member in styles {
                let e = probe(name, a, member);
                cel::parse(&e).unwrap_or_else(|err| panic!("{e}: {err}"));
                exprs.push(rbac(&e));
            }
        }
    }
    envoy_accepts(&exprs).expect("Envoy accepts every function STANDARD accepts");
}

#[test]
fn every_format_command_standard_accepts_envoy_accepts() {
    let bodies: Vec<String> = format::known_commands()
        .map(|c| {
            assert_eq!(format::check(&c), Ok(()), "{c}");
            format!(
                "  transformation: {{request: {{set: [{{name: x-probe, value: {v}}}]}}, response: {{set: [{{name: x-probe, value: {v}}}]}}}}",
                v = serde_json::to_string(&c).expect("json")
            )
        })
        .collect();
    envoy_accepts(&bodies).expect("Envoy accepts every format command STANDARD accepts");
}

/// Every command STANDARD accepts is accepted by Envoy inside
/// `COALESCE` too (with its example argument, and with a `max_length`
/// where STANDARD allows one).
#[test]
fn every_format_command_inside_coalesce_envoy_accepts() {
    let mut bodies = Vec::new();
    for c in format::known_commands() {
        let inner = &c[1..c.len() - 1];
        let (name, param) = match inner.split_once('(') {
            Some((name, rest)) => (name, rest.strip_suffix(')').expect("argument closed")),
            None => (inner, ""),
        };
        for max_length in [None, Some(5)] {
            let mut op = serde_json::json!({"command": name});
            if !param.is_empty() {
                op["param"] = param.into();
            }
            if let Some(n) = max_length {
                op["max_length"] = n.into();
            }
            let v = format!("%COALESCE({})%", serde_json::json!({"operators": [op]}));
            match (format::check(&v), max_length) {
                (Ok(()), _) => {}
                (Err(e), None) => panic!("{v}: {e}"),
                (Err(_), Some(_)) => continue,
            }
            bodies.push(format!(
                "  transformation: {{request: {{set: [{{name: x-probe, value: {}}}]}}}}",
                serde_json::to_string(&v).expect("json")
            ));
        }
    }
    envoy_accepts(&bodies).expect("Envoy accepts every command STANDARD accepts inside COALESCE");
}

/// Format strings on each edge of the argument and length rules of
/// `envoy/format.rs`: STANDARD's verdict must equal Envoy's.
const FORMAT_EDGES: &[&str] = &[
    // `?` alternatives: at most one, either side may be empty.
    "%REQ(a?b)%",
    "%REQ(a?)%",
    "%REQ(?b)%",
    "%REQ(?)%",
    "%REQ(a?b?c)%",
    "%REQ(a??)%",
    // Length: any value that fits a size_t, leading zeros allowed.
    "%REQ(x):0%",
    "%REQ(x):18446744073709551615%",
    "%REQ(x):000000000000000000000000000000000000005%",
    "%REQ(x):18446744073709551616%",
    "%REQ(x):99999999999999999999%",
    // Which commands take a length.
    "%RESP(x):5%",
    "%TRAILER(x):5%",
    "%DYNAMIC_METADATA(envoy.lb:key):5%",
    "%FILTER_STATE(x):5%",
    "%ENVIRONMENT(HOME):5%",
    "%START_TIME:10%",
    "%START_TIME(%s):5%",
    "%UPSTREAM_METADATA(envoy.lb:key):5%",
    "%CLUSTER_METADATA(envoy.lb:key):5%",
    "%PROTOCOL:10%",
    "%RESPONSE_CODE:10%",
    "%RESPONSE_CODE_DETAILS:10%",
    "%DURATION:10%",
    "%HOSTNAME:10%",
    "%DOWNSTREAM_REMOTE_ADDRESS:10%",
    "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT:10%",
    "%REQUESTED_SERVER_NAME:10%",
    // FILTER_STATE(key[:TYPE[:field]]).
    "%FILTER_STATE(x:PLAIN)%",
    "%FILTER_STATE(x:TYPED)%",
    "%FILTER_STATE(x:)%",
    "%FILTER_STATE(x::)%",
    "%FILTER_STATE(x:PLAIN:)%",
    "%FILTER_STATE(x:PLAIN::z)%",
    "%FILTER_STATE(x:FIELD:y)%",
    "%FILTER_STATE(x:FIELD:y:z)%",
    "%FILTER_STATE(x:FIELD:FIELD)%",
    "%FILTER_STATE(x y)%",
    "%FILTER_STATE(x:BAD)%",
    "%FILTER_STATE(x:plain)%",
    "%FILTER_STATE(x:FIELD)%",
    "%FILTER_STATE(x:FIELD:)%",
    "%FILTER_STATE(x:FIELD::z)%",
    "%FILTER_STATE(x:PLAIN:FIELD:y)%",
    "%FILTER_STATE(x:PLAIN:FOO)%",
    "%FILTER_STATE(x::y)%",
    "%FILTER_STATE(:PLAIN)%",
    "%FILTER_STATE(:)%",
    // Header names: token characters (any case), `:` only to start a
    // pseudo-header.
    "%REQ(:authority)%",
    "%REQ(:A)%",
    "%REQ(A-B)%",
    "%REQ(!#$&'*+-.^_`|~09az)%",
    "%REQ(a%b)%",
    "%REQ(:a?:b)%",
    "%REQ(:)%",
    "%REQ(::)%",
    "%REQ(::a)%",
    "%REQ(a?::)%",
    "%REQ(x y)%",
    "%REQ(a:b)%",
    "%REQ(a/b)%",
    "%RESP(é)%",
    "%TRAILER(a b)%",
    "%REQ(a?b c)%",
    "%REQ(a b):5%",
    "%REQ(a\"b)%",
    "%REQ(a(b)%",
    "%REQ(a,b)%",
    "%REQ(a;b)%",
    "%REQ(a<b)%",
    "%REQ(a=b)%",
    "%REQ(a>b)%",
    "%REQ(a@b)%",
    "%REQ(a[b)%",
    "%REQ(a\\b)%",
    "%REQ(a]b)%",
    "%REQ(a{b)%",
    "%REQ(a}b)%",
    "%REQ(a\tb)%",
    "%REQ(a\u{7f}b)%",
    "%REQ(a\u{1}b)%",
    // Other commands' arguments are not header names.
    "%DYNAMIC_METADATA(a:b:c)%",
    "%ENVIRONMENT(a b)%",
    // Empty parentheses are no argument at all.
    "%START_TIME()%",
    "%PROTOCOL()%",
    "%RESPONSE_FLAGS()%",
    "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT()%",
    "%REQUESTED_SERVER_NAME()%",
    "%REQ()%",
    "%DYNAMIC_METADATA()%",
    "%ENVIRONMENT()%",
    "%FILTER_STATE()%",
    "%PROTOCOL():5%",
    "%START_TIME():5%",
    "%REQ():5%",
    // START_TIME(format): anything but a strftime newline
    // (`%[-_0^#]*[1-9]*(E|O)?n`, wherever it starts).
    "%START_TIME(%Y-%m-%dT%H:%M:%S.%3fZ)%",
    "%START_TIME(%Q)%",
    "%START_TIME(%)%",
    "%START_TIME(a(b)%",
    "%START_TIME(%10n)%",
    "%START_TIME(%EOn)%",
    "%START_TIME(%1-n)%",
    "%START_TIME(%n)%",
    "%START_TIME(%%n)%",
    "%START_TIME(%On)%",
    "%START_TIME(%01n)%",
    "%START_TIME(%Y %-_0^#19En)%",
    // RESPONSE_CODE_DETAILS takes any argument, no length.
    "%RESPONSE_CODE_DETAILS(ALLOW_WHITESPACES)%",
    "%RESPONSE_CODE_DETAILS(a b)%",
    "%RESPONSE_CODE_DETAILS(ALLOW_WHITESPACES):5%",
    "%RESPONSE_CODE(ALLOW_WHITESPACES)%",
    // The *_ADDRESS_WITHOUT_PORT commands take any argument (MASK_PREFIX_LEN
    // is not validated at load), no length; the others take none.
    "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:16)%",
    "%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:16)%",
    "%DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:24)%",
    "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:abc)%",
    "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT(x)%",
    "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:16):5%",
    "%DOWNSTREAM_REMOTE_ADDRESS(MASK_PREFIX_LEN:16)%",
    "%DOWNSTREAM_LOCAL_ADDRESS(MASK_PREFIX_LEN:16)%",
    "%UPSTREAM_REMOTE_ADDRESS(MASK_PREFIX_LEN:16)%",
    // REQUESTED_SERVER_NAME(sni[:host]): each empty or an exact option
    // name; later parts ignored.
    "%REQUESTED_SERVER_NAME(SNI_ONLY)%",
    "%REQUESTED_SERVER_NAME(SNI_FIRST)%",
    "%REQUESTED_SERVER_NAME(HOST_FIRST)%",
    "%REQUESTED_SERVER_NAME(SNI_ONLY:ORIG)%",
    "%REQUESTED_SERVER_NAME(SNI_FIRST:HOST)%",
    "%REQUESTED_SERVER_NAME(HOST_FIRST:ORIG_OR_HOST)%",
    "%REQUESTED_SERVER_NAME(:ORIG)%",
    "%REQUESTED_SERVER_NAME(:)%",
    "%REQUESTED_SERVER_NAME(SNI_ONLY:ORIG:x)%",
    "%REQUESTED_SERVER_NAME(x)%",
    "%REQUESTED_SERVER_NAME(sni_only)%",
    "%REQUESTED_SERVER_NAME(SNI_ONLY )%",
    "%REQUESTED_SERVER_NAME(SNI_ONLY?x)%",
    "%REQUESTED_SERVER_NAME(SNI_ONLY:x)%",
    "%REQUESTED_SERVER_NAME(:orig)%",
    "%REQUESTED_SERVER_NAME(SNI_ONLY):5%",
    // The argument ends at the first `)` followed by `%` or `:N%`, so it
    // may hold `)`; a length that overflows there ends the search.
    "%START_TIME(a)b)%",
    "%START_TIME(a):5)%",
    "%RESPONSE_CODE_DETAILS())%",
    "%DYNAMIC_METADATA(a)b)%",
    "%ENVIRONMENT(a)b):5%",
    "%START_TIME(a)b%",
    "%START_TIME(a)%b)%",
    "%PROTOCOL()x)%",
    "%REQ(a)b)%",
    "%REQUESTED_SERVER_NAME(SNI_ONLY)b)%",
    "%ENVIRONMENT(a):99999999999999999999%)%",
    // Commands added from the probe of the Envoy 1.40 binary.
    "%UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%",
    "%UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT(MASK_PREFIX_LEN:16)%",
    "%UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT:5%",
    "%UPSTREAM_HOST_NAME_WITHOUT_PORT%",
    "%UPSTREAM_HOST_NAME_WITHOUT_PORT(x)%",
    "%TLS_JA4_FINGERPRINT:5%",
    "%DOWNSTREAM_TLS_GROUP%",
    "%ROUTE_RESOLUTION_TIME_US%",
    "%UNIQUE_ID()%",
    // Header-name arguments.
    "%REQUEST_HEADER(a?b):5%",
    "%RESPONSE_HEADER(a b)%",
    "%RESPONSE_TRAILER(a?b?c)%",
    "%STREAM_INFO_REQ(:path)%",
    "%STREAM_INFO_REQ(::)%",
    "%REQUEST_HEADER%",
    // Any text, with a length.
    "%QUERY_PARAM(a b:c)%",
    "%QUERY_PARAM(a):5%",
    "%QUERY_PARAM()%",
    // UPSTREAM_FILTER_STATE is FILTER_STATE.
    "%UPSTREAM_FILTER_STATE(x:FIELD:y):5%",
    "%UPSTREAM_FILTER_STATE(x:BAD)%",
    "%UPSTREAM_FILTER_STATE%",
    // Time formats.
    "%START_TIME_LOCAL(%s)%",
    "%EMIT_TIME%",
    "%EMIT_TIME_LOCAL(%1n)%",
    "%DOWNSTREAM_PEER_CERT_V_END(%Y)%",
    "%UPSTREAM_PEER_CERT_V_START(%On)%",
    "%EMIT_TIME:5%",
    // PATH(query[:source]).
    "%PATH%",
    "%PATH(WQ:ORIG):5%",
    "%PATH(:PATH)%",
    "%PATH(NQ:ORIG_OR_PATH:x)%",
    "%PATH(wq)%",
    "%PATH(WQ:x)%",
    "%PATH(WQ :ORIG)%",
    // QUERY_PARAMS(ORIG|DECODED), the whole argument.
    "%QUERY_PARAMS(DECODED):5%",
    "%QUERY_PARAMS()%",
    "%QUERY_PARAMS(ORIG:x)%",
    "%QUERY_PARAMS(orig)%",
    // GRPC_STATUS(format).
    "%GRPC_STATUS(CAMEL_STRING)%",
    "%GRPC_STATUS(NUMBER)%",
    "%GRPC_STATUS(number)%",
    "%GRPC_STATUS(NUMBER):5%",
    // COMMON_DURATION(start:end[:ms|us|ns]).
    "%COMMON_DURATION(a:b)%",
    "%COMMON_DURATION(:)%",
    "%COMMON_DURATION(a b:c:ns)%",
    "%COMMON_DURATION(a:b:s)%",
    "%COMMON_DURATION(a:b:)%",
    "%COMMON_DURATION(a:b:ms:x)%",
    "%COMMON_DURATION(a)%",
    "%COMMON_DURATION(a:b):5%",
    // METADATA(TYPE:...).
    "%METADATA(LISTENER_FILTER_CHAIN)%",
    "%METADATA(VIRTUAL_HOST:a:b):5%",
    "%METADATA(DYNAMIC:)%",
    "%METADATA(dynamic:a)%",
    "%METADATA(HOST:a)%",
    "%METADATA(:a)%",
    "%METADATA()%",
    // XFCC_VALUE(key), any case, length ignored.
    "%XFCC_VALUE(Dns):5%",
    "%XFCC_VALUE(by)%",
    "%XFCC_VALUE(email)%",
    "%XFCC_VALUE(uri )%",
    "%XFCC_VALUE%",
    // CEL(expr), length ignored.
    "%CEL(request.path):5%",
    "%CEL(x)%",
    "%CEL(1 +)%",
    "%CEL(foo(1))%",
    "%CEL()%",
    // COALESCE(json): an object with a non-empty `operators` array.
    r#"%COALESCE({"operators":["PROTOCOL"]})%"#,
    r#"%COALESCE( {"operators" : [ "PROTOCOL" , "UNIQUE_ID" ] } )%"#,
    r#"%COALESCE({"operators":["PROTOCOL"]}):5%"#,
    r#"%COALESCE({"operators":["PROTOCOL"]}):0%"#,
    r#"%COALESCE({"operators":["PROTOCOL"]}):99999999999999999999%"#,
    "%COALESCE()%",
    "%COALESCE%",
    "%COALESCE:5%",
    "%COALESCE( )%",
    r#"%COALESCE({"operators":[]})%"#,
    r#"%COALESCE({"operators":"PROTOCOL"})%"#,
    r#"%COALESCE({"operators":{}})%"#,
    r#"%COALESCE({})%"#,
    r#"%COALESCE(["PROTOCOL"])%"#,
    // A scalar at the top level crashes Envoy 1.40 (segfault at load).
    "%COALESCE(1)%",
    r#"%COALESCE({"operators":["PROTOCOL"],})%"#,
    r#"%COALESCE({'operators':['PROTOCOL']})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"]} x)%"#,
    // Operators: a command name, or an object with `command`, optional
    // `param` (a string; "" is none) and `max_length` (an integer > 0).
    r#"%COALESCE({"operators":[{"command":"PROTOCOL"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x-a?x-b","max_length":5}]})%"#,
    r#"%COALESCE({"operators":["DOWNSTREAM_REMOTE_ADDRESS",{"command":"RESP","param":"?x-b"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x-a?x-b?x-c"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"a b"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x\u0029%"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x)%"}]})%"#,
    r#"%COALESCE({"operators":["REQ"]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":""}]})%"#,
    r#"%COALESCE({"operators":["PROTOCOL",{"command":"REQ"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"PROTOCOL","param":""}]})%"#,
    r#"%COALESCE({"operators":[{"command":"PROTOCOL","param":"x"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"PROTOCOL","param":null}]})%"#,
    r#"%COALESCE({"operators":[{"command":"PROTOCOL","param":1}]})%"#,
    r#"%COALESCE({"operators":[{"command":"PROTOCOL","max_length":5}]})%"#,
    r#"%COALESCE({"operators":[{"command":"START_TIME","max_length":5}]})%"#,
    r#"%COALESCE({"operators":[{"command":"START_TIME","param":"%s"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"START_TIME","param":"%n"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"FILTER_STATE","param":"x:PLAIN","max_length":3}]})%"#,
    r#"%COALESCE({"operators":[{"command":"FILTER_STATE","param":"x:BAD"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":1}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":9223372036854775807}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":0}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":-1}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":-0}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":1.0}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":1e2}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":"5"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":null}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":18446744073709551616}]})%"#,
    r#"%COALESCE({"operators":[{"command":"PROTOCOL","other":[1,{"a":null}]}]})%"#,
    r#"%COALESCE({"operators":[1]})%"#,
    r#"%COALESCE({"operators":[null]})%"#,
    r#"%COALESCE({"operators":[["PROTOCOL"]]})%"#,
    r#"%COALESCE({"operators":[{"command":1}]})%"#,
    r#"%COALESCE({"operators":[{"param":"x"}]})%"#,
    // Command names: exact, no `%`, no argument in the name.
    r#"%COALESCE({"operators":["FOO"]})%"#,
    r#"%COALESCE({"operators":["PROTOCOL","FOO"]})%"#,
    r#"%COALESCE({"operators":[""]})%"#,
    r#"%COALESCE({"operators":["protocol"]})%"#,
    r#"%COALESCE({"operators":["%PROTOCOL%"]})%"#,
    r#"%COALESCE({"operators":["REQ(x)"]})%"#,
    // Extension-looking commands and COALESCE itself are reachable inside.
    r#"%COALESCE({"operators":[{"command":"CEL","param":"request.path","max_length":3}]})%"#,
    r#"%COALESCE({"operators":[{"command":"CEL","param":"1 +"}]})%"#,
    r#"%COALESCE({"operators":["CEL"]})%"#,
    r#"%COALESCE({"operators":[{"command":"METADATA","param":"ROUTE:a","max_length":3}]})%"#,
    r#"%COALESCE({"operators":[{"command":"METADATA","param":"HOST:a"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"XFCC_VALUE","param":"uri","max_length":3}]})%"#,
    r#"%COALESCE({"operators":[{"command":"XFCC_VALUE","param":"email"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"COALESCE","param":"{\"operators\":[\"PROTOCOL\"]}","max_length":3}]})%"#,
    r#"%COALESCE({"operators":[{"command":"COALESCE","param":"{\"operators\":[\"FOO\"]}"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"COALESCE","param":"{\"operators\":[]}"}]})%"#,
    r#"%COALESCE({"operators":["COALESCE"]})%"#,
    // Where serde_json and Envoy's JSON reader (nlohmann) could differ:
    // duplicate keys (the last wins), a leading byte order mark (skipped),
    // integers above i64::MAX within u64 (refused, wherever they are),
    // larger ones (doubles), surrogates, control characters.
    r#"%COALESCE({"operators":["PROTOCOL"],"operators":[]})%"#,
    r#"%COALESCE({"operators":[],"operators":["PROTOCOL"]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","command":"PROTOCOL"}]})%"#,
    r#"%COALESCE({"operators":[{"command":"REQ","param":"x","max_length":0,"max_length":5}]})%"#,
    "%COALESCE(\u{feff}{\"operators\":[\"PROTOCOL\"]})%",
    "%COALESCE( \u{feff}{\"operators\":[\"PROTOCOL\"]})%",
    "%COALESCE(\u{feff}\u{feff}{\"operators\":[\"PROTOCOL\"]})%",
    r#"%COALESCE({"operators":["PROTOCOL"],"x":9223372036854775807})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":9223372036854775808})%"#,
    r#"%COALESCE({"x":18446744073709551615,"x":1,"operators":["PROTOCOL"]})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":"9223372036854775808"})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":18446744073709551616})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":-9223372036854775809})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":[1E5,-0,1e-400]})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":1e400})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":01})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":"\ud800\udc00"})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":"\ud800"})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":"\udc00"})%"#,
    r#"%COALESCE({"operators":["PROTOCOL"],"x":"\x"})%"#,
    "%COALESCE({\"operators\":[\"PROTOCOL\"],\"x\":\"a\tb\"})%",
    "%COALESCE({\"operators\":[\"PROTOCOL\"],\"x\":\"a\u{7f}b\"})%",
];

/// Envoy's verdict on one format string alone, as a route's
/// `request_headers_to_add` value: the same substitution format parser the
/// transformation output uses, but reachable for strings STANDARD refuses
/// (which it never emits).
fn envoy_verdict(value: &str) -> Result<(), String> {
    let b = serde_json::json!({"static_resources": {"listeners": [{
        "name": "l",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
        "filter_chains": [{"filters": [{"name": "hcm", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "x",
            "route_config": {"virtual_hosts": [{"name": "v", "domains": ["*"], "routes": [{
                "match": {"prefix": "/"},
                "direct_response": {"status": 200},
                "request_headers_to_add": [{"header": {"key": "x-p", "value": value}}]
            }]}]},
            "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]
        }}]}]
    }]}});
    testkit::envoy::validate(&b)
}

#[test]
fn format_edge_cases_standard_agrees_with_envoy() {
    let mut disagreements = Vec::new();
    let mut accepted = Vec::new();
    for s in FORMAT_EDGES {
        let ours = format::check(s);
        let envoy = envoy_verdict(s);
        if ours.is_ok() != envoy.is_ok() {
            disagreements.push(format!("{s:?}: STANDARD {ours:?}, Envoy {envoy:?}"));
        } else if ours.is_ok() {
            accepted.push(*s);
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    // Both sides of every rule are exercised.
    assert!(accepted.len() > 10 && accepted.len() < FORMAT_EDGES.len() - 10);
    // And the accepted ones also pass through the real transformation
    // output (request and response).
    let bodies: Vec<String> = accepted
        .iter()
        .map(|c| {
            format!(
                "  transformation: {{request: {{set: [{{name: x-probe, value: {v}}}]}}, response: {{set: [{{name: x-probe, value: {v}}}]}}}}",
                v = serde_json::to_string(c).expect("json")
            )
        })
        .collect();
    envoy_accepts(&bodies).expect("Envoy accepts the accepted edge cases as transformations");
}
