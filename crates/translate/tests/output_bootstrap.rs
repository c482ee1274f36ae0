//! Static and ADS bootstraps, checked by the real Envoy (`--mode validate`),
//! and the static one run as is.

mod output_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, SdsSecretConfig, Secret, UpstreamTlsContext,
    common_tls_context, secret,
};
use envoy_types::util::pack_any;
use output_support::*;
use serde_json::{Value, json};
use translate::GatewayXds;
use translate::output::bootstrap::{
    AdminAddress, BootstrapOptions, XDS_CLUSTER, ads_bootstrap, static_bootstrap, try_static_bootstrap,
};

fn validate(b: &Value) {
    if let Err(e) = testkit::envoy::validate(b) {
        panic!(
            "Envoy rejected the bootstrap: {e}\n{}",
            serde_json::to_string_pretty(b).unwrap_or_default()
        );
    }
}

fn hcm_configs(listener: &Value) -> Vec<&Value> {
    listener["filter_chains"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(listener.get("default_filter_chain"))
        .flat_map(|fc| fc["filters"].as_array().into_iter().flatten())
        .map(|f| &f["typed_config"])
        .collect()
}

fn cluster<'a>(b: &'a Value, name: &str) -> &'a Value {
    b["static_resources"]["clusters"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no cluster {name}"))
}

#[test]
fn static_bootstrap_inlines_rds_eds_and_sds_and_envoy_accepts_it() {
    let b = static_bootstrap(&sample(), "default/gw", &BootstrapOptions::default());
    assert_eq!(b["node"], json!({ "id": "default/gw", "cluster": "portcullis" }));
    assert!(b.get("admin").is_none());
    assert!(b.get("dynamic_resources").is_none());

    let listeners = b["static_resources"]["listeners"].as_array().expect("listeners");
    assert_eq!(listeners.len(), 2);
    let hcms: Vec<&Value> = listeners.iter().flat_map(hcm_configs).collect();
    assert_eq!(hcms.len(), 4, "1 HTTP chain + 2 SNI chains + default chain");
    for h in &hcms {
        assert!(h.get("rds").is_none(), "rds left in {h}");
        assert_eq!(h["http_filters"][0]["name"], "envoy.filters.http.router");
    }
    assert_eq!(hcms[0]["route_config"]["name"], "default/gw/80");
    assert_eq!(
        hcms[0]["route_config"]["virtual_hosts"][0]["routes"][1]["route"]["cluster"],
        BACKEND
    );
    assert_eq!(
        hcms[1]["route_config"]["virtual_hosts"][0]["domains"],
        json!(["www.example.com"])
    );
    assert_eq!(
        hcms[2]["route_config"]["virtual_hosts"][0]["domains"],
        json!(["api.example.com"])
    );
    assert_eq!(
        hcms[3]["route_config"],
        json!({ "name": "default/gw/443/fallback" }),
        "a missing route configuration becomes an empty one"
    );

    let text = b.to_string();
    assert!(!text.contains("sds_config"), "SDS references left: {text}");
    assert!(!text.contains("\"ads\""), "ADS references left: {text}");
    let tls = &listeners[1]["filter_chains"][1]["transport_socket"]["typed_config"];
    assert_eq!(
        tls["common_tls_context"]["tls_certificate_sds_secret_configs"],
        json!([{ "name": "default/api-cert" }])
    );

    let backend = cluster(&b, BACKEND);
    assert_eq!(backend["type"], "STATIC");
    assert!(backend.get("eds_cluster_config").is_none());
    assert_eq!(backend["load_assignment"]["cluster_name"], BACKEND);
    assert_eq!(
        backend["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"],
        json!({ "address": "127.0.0.1", "port_value": 18080 })
    );
    assert_eq!(cluster(&b, NO_ENDPOINTS)["type"], "STATIC");
    assert_eq!(
        cluster(&b, NO_ENDPOINTS)["load_assignment"],
        json!({ "cluster_name": NO_ENDPOINTS })
    );
    assert_eq!(cluster(&b, BY_NAME)["type"], "STRICT_DNS");

    assert_eq!(b["static_resources"]["secrets"].as_array().map(Vec::len), Some(2));
    validate(&b);
}

#[test]
fn static_bootstrap_with_admin_and_node_cluster() {
    let options = BootstrapOptions {
        admin: Some(AdminAddress::new("127.0.0.1", 19000)),
        node_cluster: Some("edge".into()),
    };
    let b = static_bootstrap(&sample(), "default/gw", &options);
    assert_eq!(b["node"]["cluster"], "edge");
    assert_eq!(
        b["admin"],
        json!({ "address": { "socket_address": { "address": "127.0.0.1", "port_value": 19000 } } })
    );
    validate(&b);
}

#[test]
fn empty_gateway_is_a_valid_bootstrap() {
    let b = static_bootstrap(
        &GatewayXds::default(),
        "default/empty",
        &BootstrapOptions::default(),
    );
    validate(&b);
}

#[test]
fn eds_service_name_selects_the_assignment() {
    let mut gw = sample();
    // The cluster's EDS service name differs from its own name.
    if let Some(eds) = std::sync::Arc::make_mut(&mut gw.clusters[0])
        .eds_cluster_config
        .as_mut()
    {
        eds.service_name = "svc-a".into();
    }
    gw.endpoints
        .push(assignment("svc-a", &[("127.0.0.2", 9999)]).into());
    let b = static_bootstrap(&gw, "default/gw", &BootstrapOptions::default());
    let la = &cluster(&b, BACKEND)["load_assignment"];
    assert_eq!(la["cluster_name"], BACKEND);
    assert_eq!(
        la["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]["address"],
        "127.0.0.2"
    );
    validate(&b);
}

#[test]
fn upstream_tls_sds_references_become_static() {
    let mut gw = sample();
    let tls = UpstreamTlsContext {
        sni: "backend.example.com".into(),
        common_tls_context: Some(CommonTlsContext {
            validation_context_type: Some(
                common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(
                    SdsSecretConfig {
                        name: "default/backend-ca".into(),
                        sds_config: Some(ads()),
                    },
                ),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    std::sync::Arc::make_mut(&mut gw.clusters[0]).transport_socket = Some(TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(pack_any(tls))),
    });
    gw.secrets.push(Secret {
        name: "default/backend-ca".into(),
        r#type: Some(secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(CERT_PEM.into())),
                ..Default::default()
            }),
            ..Default::default()
        })),
    });
    let b = static_bootstrap(&gw, "default/gw", &BootstrapOptions::default());
    let ctx = &cluster(&b, BACKEND)["transport_socket"]["typed_config"];
    assert_eq!(
        ctx["@type"],
        "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"
    );
    assert_eq!(
        ctx["common_tls_context"]["validation_context_sds_secret_config"],
        json!({ "name": "default/backend-ca" })
    );
    validate(&b);
}

// ---- the oracle can say no ----

#[test]
fn oracle_rejects_a_regex_over_the_re2_program_size_limit() {
    let mut gw = sample();
    gw.routes[0].edit(|rc| {
        rc.virtual_hosts[0]
            .routes
            .insert(0, regex_route("too-big", "a{1000}", BACKEND))
    });
    let b = static_bootstrap(&gw, "default/gw", &BootstrapOptions::default());
    let err = testkit::envoy::validate(&b).expect_err("Envoy must reject a{1000}");
    assert!(err.contains("program size"), "{err}");
    // The same route with a small regex is fine.
    gw.routes[0].edit(|rc| rc.virtual_hosts[0].routes[0] = regex_route("small", "a{10}", BACKEND));
    validate(&static_bootstrap(&gw, "default/gw", &BootstrapOptions::default()));
}

#[test]
fn oracle_rejects_a_reference_to_a_missing_static_secret() {
    let mut gw = sample();
    gw.secrets.retain(|s| s.name != "default/api-cert");
    let err = testkit::envoy::validate(&static_bootstrap(&gw, "default/gw", &BootstrapOptions::default()))
        .expect_err("missing secret");
    assert!(err.contains("default/api-cert"), "{err}");
}

#[test]
fn oracle_rejects_an_inline_route_to_an_unknown_cluster() {
    // Inline route configurations default to validate_clusters: true, so
    // the static bootstrap is stricter than RDS: every cluster a route
    // names must be among the Gateway's clusters.
    let mut gw = sample();
    gw.routes[0].edit(|rc| {
        rc.virtual_hosts[0]
            .routes
            .push(prefix_route("ghost", "/ghost", "default/ghost/80"))
    });
    let err = testkit::envoy::validate(&static_bootstrap(&gw, "default/gw", &BootstrapOptions::default()))
        .expect_err("unknown cluster");
    assert!(err.contains("default/ghost/80"), "{err}");
}

#[test]
fn unrenderable_bootstrap_is_an_error_envoy_rejects() {
    let mut gw = sample();
    gw.routes[0].edit(|rc| {
        rc.typed_per_filter_config.insert(
            "example.custom".into(),
            envoy_types::pb::google::protobuf::Any {
                type_url: "type.googleapis.com/example.v1.NotInThePool".into(),
                value: vec![],
            },
        )
    });
    assert!(try_static_bootstrap(&gw, "default/gw", &BootstrapOptions::default()).is_err());
    let b = static_bootstrap(&gw, "default/gw", &BootstrapOptions::default());
    assert!(b["@error"].is_string());
    assert!(testkit::envoy::validate(&b).is_err());
}

// ---- ADS bootstrap ----

#[test]
fn ads_bootstrap_is_accepted() {
    let b = ads_bootstrap("default/gw", "portcullis", "127.0.0.1", 18000, None);
    assert_eq!(b["node"], json!({ "id": "default/gw", "cluster": "portcullis" }));
    assert_eq!(
        b["dynamic_resources"],
        json!({
            "lds_config": { "ads": {}, "resource_api_version": "V3" },
            "cds_config": { "ads": {}, "resource_api_version": "V3" },
            "ads_config": {
                "api_type": "GRPC",
                "grpc_services": [{ "envoy_grpc": { "cluster_name": XDS_CLUSTER } }],
                "set_node_on_first_message_only": true,
                "transport_api_version": "V3"
            }
        })
    );
    let xds = &b["static_resources"]["clusters"][0];
    assert_eq!(xds["name"], XDS_CLUSTER);
    assert_eq!(xds["type"], "STATIC");
    assert_eq!(
        xds["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"],
        json!({
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicit_http_config": { "http2_protocol_options": {} }
        })
    );
    assert!(b.get("admin").is_none());
    validate(&b);
}

#[test]
fn ads_bootstrap_with_host_name_and_admin_is_accepted() {
    let admin = AdminAddress::new("0.0.0.0", 19001);
    let b = ads_bootstrap(
        "default/gw",
        "edge",
        "portcullis.portcullis-system.svc",
        18000,
        Some(&admin),
    );
    assert_eq!(b["static_resources"]["clusters"][0]["type"], "STRICT_DNS");
    assert_eq!(b["admin"]["address"]["socket_address"]["port_value"], 19001);
    validate(&b);
}

#[test]
fn ads_bootstrap_with_client_tls_is_accepted() {
    // Real files: Envoy's validate mode loads the certificates.
    let dir = std::env::temp_dir().join(format!("portcullis-xds-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["xds.portcullis.test".to_string()]).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).expect("certificate");
    for (name, pem) in [
        ("tls.crt", cert.pem()),
        ("tls.key", key.serialize_pem()),
        ("ca.crt", cert.pem()),
    ] {
        std::fs::write(dir.join(name), pem).expect("write");
    }
    let path = |f: &str| dir.join(f).display().to_string();
    let tls = translate::output::XdsClientTls {
        cert_chain_file: path("tls.crt"),
        private_key_file: path("tls.key"),
        ca_file: path("ca.crt"),
        server_name: "xds.portcullis.test".into(),
    };
    let b = translate::output::try_ads_bootstrap_tls(
        "default/gw",
        "portcullis",
        "127.0.0.1",
        18000,
        None,
        Some(&tls),
    )
    .expect("bootstrap");
    let socket = &b["static_resources"]["clusters"][0]["transport_socket"];
    assert_eq!(socket["name"], "envoy.transport_sockets.tls");
    let ctx = &socket["typed_config"];
    assert_eq!(ctx["sni"], "xds.portcullis.test");
    assert_eq!(
        ctx["common_tls_context"]["tls_certificates"][0]["certificate_chain"]["filename"],
        json!(path("tls.crt"))
    );
    assert_eq!(
        ctx["common_tls_context"]["validation_context"]["match_typed_subject_alt_names"][0],
        json!({ "san_type": "DNS", "matcher": { "exact": "xds.portcullis.test" } })
    );
    validate(&b);
    // Without TLS it is the plaintext bootstrap.
    let plain =
        translate::output::try_ads_bootstrap_tls("default/gw", "portcullis", "127.0.0.1", 18000, None, None)
            .expect("bootstrap");
    assert_eq!(
        plain,
        ads_bootstrap("default/gw", "portcullis", "127.0.0.1", 18000, None)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- run as is ----

fn free_port() -> u16 {
    testkit::port::free()
}

/// A minimal HTTP/1.1 backend answering `200 backend` to everything.
fn backend() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind backend");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut req = Vec::new();
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let _ =
                    s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nbackend");
            });
        }
    });
    port
}

fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: anything\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let status = resp.split(' ').nth(1)?.parse().ok()?;
    let body = resp
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn envoy_runs_the_static_bootstrap_as_is() {
    let (http, https, backend) = (free_port(), free_port(), backend());
    let gw = sample_with_ports(http.into(), https.into(), backend.into());
    let b = static_bootstrap(&gw, "default/gw", &BootstrapOptions::default());
    validate(&b);
    let path = std::env::temp_dir().join(format!("portcullis-output-run-{}.json", std::process::id()));
    std::fs::write(&path, b.to_string()).expect("write bootstrap");
    let bin = testkit::envoy::binary().unwrap_or_else(|e| panic!("{e}"));
    let _envoy = Envoy(
        Command::new(bin)
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "1",
                "--log-level",
                "error",
                "-c",
            ])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start envoy"),
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    let replaced = loop {
        if let Some(r) = get(http, "/replaced") {
            break r;
        }
        assert!(Instant::now() < deadline, "Envoy did not come up on port {http}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = std::fs::remove_file(&path);
    assert_eq!(replaced, (500, REPLACED_BODY.to_string()));
    assert_eq!(get(http, "/api/x"), Some((200, "backend".into())));
    assert_eq!(get(http, "/empty").map(|r| r.0), Some(503), "no endpoints");
    assert_eq!(get(http, "/nowhere").map(|r| r.0), Some(404));

    // HTTPS with SNI, verified against the self-signed certificate.
    let ca = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/output-tls.crt");
    let curl = |host: &str, path: &str| -> Option<String> {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "5", "--cacert", ca, "--resolve"])
            .arg(format!("{host}:{https}:127.0.0.1"))
            .args(["-w", " %{http_code}"])
            .arg(format!("https://{host}:{https}{path}"))
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    match curl("www.example.com", "/") {
        None => eprintln!("curl not available: HTTPS not exercised"),
        Some(www) => {
            assert_eq!(www, "backend 200");
            assert_eq!(curl("api.example.com", "/"), Some(format!("{REPLACED_BODY} 500")));
        }
    }
}

#[test]
fn missing_route_configuration_is_inlined_empty() {
    let mut gw = sample();
    gw.routes.retain(|r| r.name != "default/gw/80");
    let b = static_bootstrap(&gw, "default/gw", &BootstrapOptions::default());
    let h = hcm_configs(&b["static_resources"]["listeners"][0])[0];
    assert_eq!(h["route_config"], json!({ "name": "default/gw/80" }));
    validate(&b);
    // And a RouteConfiguration that is present is inlined unchanged.
    let rc = RouteConfiguration {
        name: "default/gw/80".into(),
        virtual_hosts: vec![VirtualHost {
            name: "v".into(),
            domains: vec!["*".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    gw.routes.push((&rc).into());
    let b = static_bootstrap(&gw, "default/gw", &BootstrapOptions::default());
    let h = hcm_configs(&b["static_resources"]["listeners"][0])[0];
    assert_eq!(
        h["route_config"],
        translate::output::message_to_json(&rc).expect("render")
    );
}
