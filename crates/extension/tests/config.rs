//! The configuration in Envoy Gateway's shape: defaults, pasted configs,
//! and errors that name the field.

use std::time::Duration;

use extension::config::{
    ConfigError, DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_TIMEOUT, ExtensionConfig, ExtensionManagerSpec,
    RetryPolicy, ServiceAddress,
};
use translate::extension::{GroupKind, Hook, TranslationIncludes};

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    extension_manager: Option<ExtensionManagerSpec>,
    extension_managers: Option<Vec<ExtensionManagerSpec>>,
}

fn load(yaml: &str) -> Result<ExtensionConfig, ConfigError> {
    let f: File = serde_saphyr::from_str(yaml).expect("YAML parses");
    ExtensionConfig::from_spec(f.extension_manager.as_ref(), f.extension_managers.as_deref())
}

fn err(yaml: &str) -> String {
    load(yaml).expect_err("invalid").to_string()
}

/// Envoy Gateway's documented example (extension server docs), with the
/// Kubernetes-only TLS reference dropped.
#[test]
fn envoy_gateways_example_with_its_defaults() {
    let c = load(
        r#"
extensionManager:
  resources:
  - group: example.myextension.io
    version: v2
    kind: OAuth2Filter
  policyResources:
  - group: example.myextension.io
    version: v1
    kind: ListenerPolicy
  backendResources:
  - group: example.myextension.io
    version: v1
    kind: S3Backend
  hooks:
    xdsTranslator:
      post:
      - Route
      - VirtualHost
      - HTTPListener
      - Cluster
      - Endpoints
      - Translation
  service:
    fqdn:
      hostname: my-extension.example
      port: 443
"#,
    )
    .expect("valid");
    let m = &c.managers[0];
    assert_eq!(
        m.name, "my-extension.example:443",
        "unnamed: named by its address"
    );
    assert_eq!(
        m.address,
        ServiceAddress::Fqdn {
            hostname: "my-extension.example".into(),
            port: 443
        }
    );
    assert_eq!(m.hooks.len(), 6);
    assert!(!m.fail_open, "failOpen defaults to false");
    assert_eq!(m.max_message_size, DEFAULT_MAX_MESSAGE_SIZE);
    assert_eq!(m.max_message_size, 4 * 1024 * 1024);
    assert_eq!(m.timeout, DEFAULT_TIMEOUT);
    assert_eq!(m.timeout, Duration::from_secs(2));
    // Envoy Gateway's buildServiceConfig defaults.
    assert_eq!(
        m.retry,
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            backoff_multiplier: 2.0,
            retryable: vec![tonic::Code::Unavailable],
        }
    );
    // Listener and route lists are not sent unless asked for; clusters
    // are; secrets never (unlike Envoy Gateway).
    assert_eq!(
        m.translation,
        TranslationIncludes {
            listeners: false,
            routes: false,
            clusters: true,
            secrets: false
        }
    );
    let r = c.registration();
    assert!(r.resources.contains(&GroupKind {
        group: "example.myextension.io".into(),
        kind: "OAuth2Filter".into()
    }));
    assert!(r.policy_resources.contains(&GroupKind {
        group: "example.myextension.io".into(),
        kind: "ListenerPolicy".into()
    }));
    assert!(r.backend_resources.contains(&GroupKind {
        group: "example.myextension.io".into(),
        kind: "S3Backend".into()
    }));
    assert!(r.hooks.contains(&Hook::HttpListener));
}

#[test]
fn every_setting_read() {
    let c = load(
        r#"
extensionManager:
  name: ai
  hooks:
    xdsTranslator:
      post: [Route]
      translation:
        listener: {includeAll: true}
        route: {includeAll: true}
        cluster: {includeAll: false}
        secret: {includeAll: false}
  service:
    ip: {address: "::1", port: 5005}
    retry:
      maxAttempts: 3
      initialBackoff: 50ms
      maxBackoff: 1m30s
      backoffMultiplier: {numerator: 150}
      RetryableStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED]
  failOpen: true
  maxMessageSize: 8Mi
  timeout: 750ms
"#,
    )
    .expect("valid");
    let m = &c.managers[0];
    assert_eq!(m.name, "ai");
    assert_eq!(
        m.address,
        ServiceAddress::Ip {
            address: "::1".parse().expect("ip"),
            port: 5005
        }
    );
    assert_eq!(m.address.to_string(), "[::1]:5005");
    assert!(m.fail_open);
    assert_eq!(m.max_message_size, 8 << 20);
    assert_eq!(m.timeout, Duration::from_millis(750));
    assert_eq!(m.retry.max_attempts, 3);
    assert_eq!(m.retry.initial_backoff, Duration::from_millis(50));
    assert_eq!(m.retry.max_backoff, Duration::from_secs(90));
    assert!((m.retry.backoff_multiplier - 1.5).abs() < 1e-9, "150/100");
    assert_eq!(
        m.retry.retryable,
        vec![tonic::Code::Unavailable, tonic::Code::ResourceExhausted]
    );
    assert_eq!(
        m.translation,
        TranslationIncludes {
            listeners: true,
            routes: true,
            clusters: false,
            secrets: false
        }
    );
    // The Translation hook is not registered: the registration carries
    // the defaults, unused.
    assert_eq!(c.registration().translation, TranslationIncludes::default());
}

#[test]
fn chained_managers_in_order_and_their_union() {
    let c = load(
        r#"
extensionManagers:
- name: first
  resources: [{group: a.io, version: v1, kind: A}]
  hooks: {xdsTranslator: {post: [Route, Translation], translation: {listener: {includeAll: true}}}}
  service: {unix: {path: /run/first.sock}}
- name: second
  policyResources: [{group: b.io, version: v1, kind: B}]
  hooks: {xdsTranslator: {post: [HTTPListener, Translation], translation: {route: {includeAll: true}}}}
  service: {fqdn: {hostname: second.local, port: 80}}
"#,
    )
    .expect("valid");
    assert_eq!(
        c.managers.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
        ["first", "second"]
    );
    let r = c.registration();
    assert_eq!(
        r.hooks.iter().copied().collect::<Vec<_>>(),
        [Hook::Route, Hook::HttpListener, Hook::Translation]
    );
    assert_eq!(r.resources.len(), 1);
    assert_eq!(r.policy_resources.len(), 1);
    assert_eq!(
        r.translation,
        TranslationIncludes {
            listeners: true,
            routes: true,
            clusters: true,
            secrets: false
        }
    );
}

#[test]
fn secrets_are_never_sent_to_an_extension() {
    let err = load(
        r#"
extensionManager:
  hooks: {xdsTranslator: {post: [Translation], translation: {secret: {includeAll: true}}}}
  service: {unix: {path: /run/ext.sock}}
"#,
    )
    .expect_err("secret.includeAll: true is refused");
    assert_eq!(
        err.field(),
        "extensionManager.hooks.xdsTranslator.translation.secret.includeAll"
    );
    assert!(
        err.to_string().contains("no secret leaves the control plane"),
        "{err}"
    );
}

#[test]
fn deprecated_host_and_port_as_envoy_gateway_dials_them() {
    let c =
        load("extensionManager:\n  hooks: {xdsTranslator: {post: [Route]}}\n  service: {host: ext.local}\n")
            .expect("valid");
    assert_eq!(
        c.managers[0].address,
        ServiceAddress::Fqdn {
            hostname: "ext.local".into(),
            port: 80
        }
    );
}

#[test]
fn errors_name_the_field() {
    let base = |service: &str, extra: &str| {
        format!(
            "extensionManager:\n  hooks: {{xdsTranslator: {{post: [Route]}}}}\n  service: {service}\n{extra}"
        )
    };
    let cases: &[(String, &str)] = &[
        (
            base("{fqdn: {hostname: ext.local, port: 70000}}", ""),
            "extensionManager.service.fqdn.port: 70000 is not a port (1-65535)",
        ),
        (
            base("{fqdn: {hostname: ext.local}}", ""),
            "extensionManager.service.fqdn.port: required",
        ),
        (
            base("{fqdn: {hostname: Ext_Local, port: 1}}", ""),
            "extensionManager.service.fqdn.hostname: \"Ext_Local\" is not a lower-case DNS name",
        ),
        (
            base("{ip: {address: 10.0.0.256, port: 1}}", ""),
            "extensionManager.service.ip.address: \"10.0.0.256\" is not an IPv4 or IPv6 address",
        ),
        (
            base("{fqdn: {hostname: a, port: 1}, unix: {path: /x}}", ""),
            "extensionManager.service.unix: cannot be set together with extensionManager.service.fqdn",
        ),
        (
            base("{}", ""),
            "extensionManager.service: extension service must contain a configured target (fqdn, ip or unix)",
        ),
        (
            base("{unix: {path: /x}, retry: {RetryableStatusCodes: [NOPE]}}", ""),
            "extensionManager.service.retry.RetryableStatusCodes[0]: invalid gRPC status code \"NOPE\"",
        ),
        (
            base("{unix: {path: /x}, retry: {initialBackoff: 1.5s}}", ""),
            "extensionManager.service.retry.initialBackoff: \"1.5s\" is not a Gateway API duration",
        ),
        (
            base("{unix: {path: /x}}", "  maxMessageSize: 4MB\n"),
            "extensionManager.maxMessageSize: \"4MB\" is not a positive size",
        ),
        (
            base("{unix: {path: /x}}", "  timeout: 0s\n"),
            "extensionManager.timeout: must be greater than zero",
        ),
        (
            base("{unix: {path: /x}, tls: {certificateRef: {name: ca}}}", ""),
            "extensionManager.service.tls.certificateRef: not supported: Kubernetes Secret references cannot be read in file mode",
        ),
        (
            base("{unix: {path: /x}, tls: {}}", ""),
            "extensionManager.service.tls.caFile: required",
        ),
        (
            base(
                "{unix: {path: /x}, tls: {caFile: /nonexistent/ca.pem}}",
                "",
            ),
            "extensionManager.service.tls.caFile: cannot read /nonexistent/ca.pem",
        ),
        (
            "extensionManager:\n  hooks: {xdsTranslator: {post: [Routes]}}\n  service: {unix: {path: /x}}\n".into(),
            "extensionManager.hooks.xdsTranslator.post[0]: unknown hook \"Routes\"",
        ),
        (
            "extensionManager:\n  hooks: {xdsTranslator: {pre: [Route]}}\n  service: {unix: {path: /x}}\n".into(),
            "extensionManager.hooks.xdsTranslator.pre: not supported",
        ),
        (
            "extensionManager:\n  service: {unix: {path: /x}}\n".into(),
            "extensionManager.hooks.xdsTranslator: required",
        ),
        (
            "extensionManager:\n  hooks: {xdsTranslator: {post: [Route]}}\n".into(),
            "extensionManager.service: required",
        ),
        (
            "extensionManager:\n  resources: [{group: a, kind: A}]\n  hooks: {xdsTranslator: {post: [Route]}}\n  service: {unix: {path: /x}}\n".into(),
            "extensionManager.resources[0].version: required",
        ),
        (
            "extensionManagers:\n- hooks: {xdsTranslator: {post: [Route]}}\n  service: {unix: {path: /x}}\n".into(),
            "extensionManagers[0].name: required",
        ),
        (
            "extensionManagers:\n- {name: a, hooks: {xdsTranslator: {post: [Route]}}, service: {unix: {path: /x}}}\n- {name: a, hooks: {xdsTranslator: {post: [Route]}}, service: {unix: {path: /y}}}\n".into(),
            "extensionManagers[1].name: duplicate name \"a\"",
        ),
        (
            "extensionManagers: []\n".into(),
            "extensionManagers: must contain at least one entry when specified",
        ),
        (
            "extensionManager:\n  hooks: {xdsTranslator: {post: [Route]}}\n  service: {unix: {path: /x}}\nextensionManagers:\n- {name: a, hooks: {xdsTranslator: {post: [Route]}}, service: {unix: {path: /x}}}\n".into(),
            "extensionManagers: cannot be set together with extensionManager",
        ),
    ];
    for (yaml, want) in cases {
        let got = err(yaml);
        assert!(got.starts_with(want), "\n{yaml}\n got: {got}\nwant: {want}…");
    }
}

#[test]
fn unknown_fields_are_refused() {
    for yaml in [
        "extensionManager:\n  hook: {}\n",
        "extensionManager:\n  service: {fqdn: {hostname: a, port: 1, weight: 2}}\n",
        "extensionManager:\n  service: {retry: {maxAttempt: 2}}\n",
        "extensionManager:\n  hooks: {xdsTranslator: {translation: {listener: {include: true}}}}\n",
    ] {
        let r: Result<File, _> = serde_saphyr::from_str(yaml);
        let e = r.expect_err("unknown field refused").to_string();
        assert!(e.contains("unknown field"), "{yaml}: {e}");
    }
}

#[test]
fn quantities() {
    use extension::config::{QuantitySpec, parse_quantity};
    assert_eq!(parse_quantity(&QuantitySpec::Text("4M".into())), Ok(4_000_000));
    assert_eq!(parse_quantity(&QuantitySpec::Text("4Mi".into())), Ok(4 << 20));
    assert_eq!(parse_quantity(&QuantitySpec::Text("16k".into())), Ok(16_000));
    assert_eq!(parse_quantity(&QuantitySpec::Integer(1024)), Ok(1024));
    assert!(parse_quantity(&QuantitySpec::Text("0".into())).is_err());
    assert!(
        parse_quantity(&QuantitySpec::Text("4K".into())).is_err(),
        "K alone is not a suffix"
    );
    assert!(
        parse_quantity(&QuantitySpec::Text("5Gi".into())).is_err(),
        "over 4 GiB"
    );
}

/// The variant and its text (the text reaches `ConfigError::Invalid`).
#[test]
fn quantity_errors_say_what_is_wrong() {
    use extension::config::{QuantityError, QuantitySpec, parse_quantity};
    let not_a_size = parse_quantity(&QuantitySpec::Text("4K".into())).err();
    assert_eq!(
        not_a_size,
        Some(QuantityError::NotASize {
            quantity: "4K".into()
        })
    );
    assert_eq!(
        not_a_size.map(|e| e.to_string()).as_deref(),
        Some(r#""4K" is not a positive size like 4M, 8Mi or 1048576"#)
    );
    let too_large = parse_quantity(&QuantitySpec::Text("5Gi".into())).err();
    assert_eq!(
        too_large,
        Some(QuantityError::TooLarge {
            quantity: "5Gi".into()
        })
    );
    assert_eq!(
        too_large.map(|e| e.to_string()).as_deref(),
        Some(r#""5Gi" is larger than gRPC's 4 GiB message limit"#)
    );
}

/// The version each kind is registered at reaches the loader options the
/// providers get (Kubernetes mode watches exactly that version); one kind
/// at two versions is refused, naming the field, within a manager and
/// across a chain.
#[test]
fn registered_versions_reach_the_providers_and_one_kind_has_one_version() {
    let c = load(
        r#"
extensionManager:
  resources: [{group: a.io, version: v1beta1, kind: A}]
  policyResources: [{group: a.io, version: v2, kind: P}, {group: a.io, version: v2, kind: P}]
  hooks: {xdsTranslator: {post: [Route]}}
  service: {unix: {path: /run/ext.sock}}
"#,
    )
    .expect("valid: the same kind twice at one version");
    let options = translate::extension::resources::loader_options(&c.registration());
    let version = |kind: &str| {
        options
            .extension_versions
            .get(&("a.io".to_string(), kind.to_string()))
            .cloned()
    };
    assert_eq!(version("A").as_deref(), Some("v1beta1"));
    assert_eq!(version("P").as_deref(), Some("v2"));

    let within = err(r#"
extensionManager:
  resources: [{group: a.io, version: v1, kind: A}]
  policyResources: [{group: a.io, version: v2, kind: A}]
  hooks: {xdsTranslator: {post: [Route]}}
  service: {unix: {path: /run/ext.sock}}
"#);
    assert!(
        within.starts_with("extensionManager.policyResources[0].version: a.io/A is registered at version v1"),
        "{within}"
    );
    let across = err(r#"
extensionManagers:
- name: first
  resources: [{group: a.io, version: v1, kind: A}]
  hooks: {xdsTranslator: {post: [Route]}}
  service: {unix: {path: /run/first.sock}}
- name: second
  resources: [{group: a.io, version: v2, kind: A}]
  hooks: {xdsTranslator: {post: [Route]}}
  service: {unix: {path: /run/second.sock}}
"#);
    assert!(
        across.starts_with("extensionManagers[1]: a.io/A is registered at version v1"),
        "{across}"
    );
}
