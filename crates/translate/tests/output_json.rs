//! proto ⇄ canonical proto-JSON of the xDS, and the design §5 document.

mod output_support;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::Any;
use output_support::*;
use prost::{Message, Name};
use serde_json::{Value, json};
use translate::output::{self, OutputError};
use translate::{GatewayXds, ObjectStatus, Output};

fn sample_output() -> Output {
    Output {
        gateways: [("default/gw".to_string(), std::sync::Arc::new(sample()))]
            .into_iter()
            .collect(),
        status: vec![std::sync::Arc::new(ObjectStatus::new(
            "gateway.networking.k8s.io/v1",
            "Gateway",
            Some("default"),
            "gw",
            json!({ "conditions": [{ "type": "Accepted", "status": "True", "reason": "Accepted" }] }),
        ))],
        diagnostics: vec![api::Diagnostic::warning(
            Some("HTTPRoute default/r".into()),
            None,
            "something to look at",
        )],
        ..Default::default()
    }
}

#[test]
fn http_listener_uses_canonical_field_names_and_typed_any() {
    let v = output::message_to_json(&sample().listeners[0]).expect("render listener");
    assert_eq!(v["name"], "default/gw/80");
    assert_eq!(v["address"]["socket_address"]["address"], "127.0.0.1");
    assert_eq!(v["address"]["socket_address"]["port_value"], 10080);
    let f = &v["filter_chains"][0]["filters"][0];
    assert_eq!(f["name"], "envoy.filters.network.http_connection_manager");
    let tc = &f["typed_config"];
    assert_eq!(
        tc["@type"],
        "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
    );
    assert_eq!(tc["stat_prefix"], "test");
    assert_eq!(tc["rds"]["route_config_name"], "default/gw/80");
    assert_eq!(
        tc["rds"]["config_source"],
        json!({ "ads": {}, "resource_api_version": "V3" })
    );
    assert_eq!(
        tc["http_filters"][0],
        json!({
            "name": "envoy.filters.http.router",
            "typed_config": { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" }
        })
    );
    // No lowerCamelCase anywhere.
    let text = v.to_string();
    for camel in [
        "routeConfigName",
        "filterChains",
        "typedConfig",
        "portValue",
        "statPrefix",
    ] {
        assert!(!text.contains(camel), "{camel} in {text}");
    }
}

#[test]
fn https_listener_renders_sni_chains_and_sds_refs() {
    let v = output::message_to_json(&sample().listeners[1]).expect("render listener");
    assert_eq!(
        v["listener_filters"][0]["typed_config"]["@type"],
        "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"
    );
    let chains = v["filter_chains"].as_array().expect("filter_chains");
    assert_eq!(chains.len(), 2);
    assert_eq!(
        chains[0]["filter_chain_match"]["server_names"],
        json!(["www.example.com"])
    );
    assert_eq!(
        chains[1]["filter_chain_match"]["server_names"],
        json!(["api.example.com"])
    );
    let ts = &chains[0]["transport_socket"];
    assert_eq!(ts["name"], "envoy.transport_sockets.tls");
    assert_eq!(
        ts["typed_config"]["@type"],
        "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"
    );
    assert_eq!(
        ts["typed_config"]["common_tls_context"]["tls_certificate_sds_secret_configs"],
        json!([{ "name": "default/www-cert", "sds_config": { "ads": {}, "resource_api_version": "V3" } }])
    );
    assert_eq!(
        ts["typed_config"]["common_tls_context"]["alpn_protocols"],
        json!(["h2", "http/1.1"])
    );
    assert_eq!(
        v["default_filter_chain"]["filters"][0]["typed_config"]["rds"]["route_config_name"],
        "default/gw/443/fallback"
    );
}

#[test]
fn route_cluster_endpoints_secret_render() {
    let gw = sample();
    let r = output::message_to_json(&gw.routes[0].decode()).expect("route");
    let vh = &r["virtual_hosts"][0];
    assert_eq!(vh["domains"], json!(["*"]));
    assert_eq!(
        vh["routes"][0],
        json!({
            "name": "replaced",
            "match": { "prefix": "/replaced" },
            "direct_response": { "status": 500, "body": { "inline_string": REPLACED_BODY } }
        })
    );
    assert_eq!(
        vh["routes"][1],
        json!({ "name": "api", "match": { "prefix": "/api" }, "route": { "cluster": BACKEND } })
    );

    let c = output::message_to_json(&*gw.clusters[0]).expect("cluster");
    assert_eq!(c["type"], "EDS");
    assert_eq!(c["connect_timeout"], "10s");
    assert_eq!(
        c["eds_cluster_config"],
        json!({ "eds_config": { "ads": {}, "resource_api_version": "V3" }, "service_name": BACKEND })
    );

    let e = output::message_to_json(&*gw.endpoints[0]).expect("cla");
    assert_eq!(e["cluster_name"], BACKEND);
    assert_eq!(
        e["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"],
        json!({ "address": "127.0.0.1", "port_value": 18080 })
    );

    let s = output::message_to_json(&gw.secrets[0]).expect("secret");
    assert_eq!(s["name"], "default/www-cert");
    assert_eq!(
        s["tls_certificate"]["certificate_chain"]["inline_string"],
        CERT_PEM
    );
    assert_eq!(s["tls_certificate"]["private_key"]["inline_string"], KEY_PEM);
}

#[test]
fn any_renders_with_type_and_fields() {
    let hcm = HttpConnectionManager {
        stat_prefix: "x".into(),
        ..Default::default()
    };
    let any = envoy_types::util::pack_any(hcm);
    let v = output::any_to_json(&any).expect("any");
    assert_eq!(
        v,
        json!({
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "x"
        })
    );
}

fn round_trip<M: Message + Name + Default + PartialEq + std::fmt::Debug>(m: &M) {
    let v = output::message_to_json(m).expect("render");
    let back: M = output::message_from_json(&v).expect("parse");
    assert_eq!(&back, m, "{} does not round-trip", M::full_name());
    let back_by_name: M = output::json_to_message(&M::full_name(), &v).expect("parse by name");
    assert_eq!(&back_by_name, m);
    assert_eq!(output::message_to_json(&back).expect("render again"), v);
}

#[test]
fn json_round_trips_to_the_same_messages() {
    let gw = sample();
    gw.listeners.iter().for_each(round_trip::<Listener>);
    gw.route_configurations()
        .iter()
        .for_each(round_trip::<RouteConfiguration>);
    gw.clusters.iter().for_each(|c| round_trip::<Cluster>(c));
    gw.endpoints
        .iter()
        .for_each(|e| round_trip::<ClusterLoadAssignment>(e));
    gw.secrets.iter().for_each(round_trip::<Secret>);
}

#[test]
fn json_to_message_accepts_type_urls_and_camel_case_and_rejects_unknown_fields() {
    let v = json!({ "name": "c", "connectTimeout": "1.5s", "type": "STATIC" });
    let c: Cluster =
        output::json_to_message("type.googleapis.com/envoy.config.cluster.v3.Cluster", &v).expect("parse");
    assert_eq!(c.name, "c");
    assert_eq!(
        c.connect_timeout.map(|d| (d.seconds, d.nanos)),
        Some((1, 500_000_000))
    );

    let err = output::json_to_message::<Cluster>("envoy.config.cluster.v3.Cluster", &json!({ "nme": "c" }))
        .expect_err("unknown field");
    assert!(matches!(err, OutputError::Json { .. }), "{err}");
    let err = output::json_to_message::<Cluster>("no.such.Type", &json!({})).expect_err("unknown type");
    assert!(matches!(err, OutputError::UnknownType(_)), "{err}");
}

#[test]
fn gateway_xds_document_has_the_five_lists_in_order() {
    let v = output::gateway_xds_to_json(&sample());
    let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["listeners", "routes", "clusters", "endpoints", "secrets"]);
    assert_eq!(v["listeners"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["routes"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["clusters"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["endpoints"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["secrets"].as_array().map(Vec::len), Some(2));
    assert_eq!(output::try_gateway_xds_to_json(&sample()).expect("renders"), v);

    let empty = output::gateway_xds_to_json(&GatewayXds::default());
    assert_eq!(
        empty,
        json!({ "listeners": [], "routes": [], "clusters": [], "endpoints": [], "secrets": [] })
    );
}

#[test]
fn output_document_is_design_section_5() {
    let v = output::output_to_json(&sample_output());
    let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["gateways", "status", "diagnostics"]);
    assert_eq!(
        v["gateways"]["default/gw"],
        output::gateway_xds_to_json(&sample())
    );
    assert_eq!(
        v["status"],
        json!([{
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": { "namespace": "default", "name": "gw" },
            "status": { "conditions": [{ "type": "Accepted", "status": "True", "reason": "Accepted" }] }
        }])
    );
    assert_eq!(
        v["diagnostics"],
        json!([{ "severity": "warning", "object": "HTTPRoute default/r", "message": "something to look at" }])
    );
    assert_eq!(
        output::output_to_json(&Output::default()),
        json!({ "gateways": {}, "status": [], "diagnostics": [] })
    );
}

#[test]
fn yaml_is_the_same_document_in_the_same_order() {
    let out = sample_output();
    let yaml = output::output_to_yaml(&out);
    assert!(yaml.starts_with("gateways:"), "{}", &yaml[..yaml.len().min(200)]);
    let parsed: Value = serde_saphyr::from_str(&yaml).expect("YAML parses");
    assert_eq!(parsed, output::output_to_json(&out));
    // Keys keep the proto field order, not alphabetical order.
    let name = yaml.find("name: default/gw/80").expect("listener name");
    let address = yaml[name..].find("address:").expect("address after name");
    let chains = yaml[name..]
        .find("filter_chains:")
        .expect("filter_chains after name");
    assert!(address < chains);
    // Type URLs are not folded; PEM is a literal block.
    assert!(
        yaml.contains(
            "\"@type\": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager\n"
        ),
        "{yaml}"
    );
    assert!(yaml.contains("inline_string: |\n"), "{yaml}");
    // Strings that look like other scalars stay strings.
    let mut out = Output::default();
    out.push_status(ObjectStatus::new(
        "v1",
        "Thing",
        None,
        "true",
        json!({
            "a": "10", "b": "null", "c": "yes", "d": "", "e": "- x", "f": "a: b", "g": "x".repeat(300),
            "h": format!("{} {}", "word ".repeat(40), "end"), "i": "two\nlines\n", "j": " lead", "k": "#c"
        }),
    ));
    let yaml = output::output_to_yaml(&out);
    let parsed: Value = serde_saphyr::from_str(&yaml).expect("YAML parses");
    assert_eq!(parsed, output::output_to_json(&out), "{yaml}");
}

fn unknown_any_listener() -> Listener {
    Listener {
        name: "default/gw/9000".into(),
        address: Some(socket("127.0.0.1", 9000)),
        filter_chains: vec![envoy_types::pb::envoy::config::listener::v3::FilterChain {
            filters: vec![Filter {
                name: "example.custom".into(),
                config_type: Some(filter::ConfigType::TypedConfig(Any {
                    type_url: "type.googleapis.com/example.v1.NotInThePool".into(),
                    value: vec![8, 1],
                })),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn unrenderable_resources_are_reported_not_hidden() {
    let mut gw = sample();
    gw.listeners.push(unknown_any_listener());
    let err = output::try_gateway_xds_to_json(&gw).expect_err("unknown Any type");
    assert!(err.to_string().contains("default/gw/9000"), "{err}");

    let v = output::gateway_xds_to_json(&gw);
    assert_eq!(v["listeners"][2]["name"], "default/gw/9000");
    assert!(v["listeners"][2]["@error"].is_string());
    assert_eq!(
        v["listeners"][0]["name"], "default/gw/80",
        "the rest is still rendered"
    );

    let out = Output {
        gateways: [("default/gw".to_string(), std::sync::Arc::new(gw))]
            .into_iter()
            .collect(),
        ..Default::default()
    };
    let v = output::output_to_json(&out);
    let diags = v["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diags.len(), 1);
    assert_eq!(diags[0]["severity"], "error");
    assert_eq!(diags[0]["object"], "Gateway default/gw");
    assert!(
        diags[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("default/gw/9000")),
        "{diags:?}"
    );
}

#[test]
fn descriptor_pool_has_the_envoy_types() {
    let pool = output::descriptor_pool();
    for name in [
        Listener::full_name(),
        RouteConfiguration::full_name(),
        Cluster::full_name(),
        ClusterLoadAssignment::full_name(),
        Secret::full_name(),
        HttpConnectionManager::full_name(),
        "envoy.config.bootstrap.v3.Bootstrap".to_string(),
        "google.protobuf.Any".to_string(),
    ] {
        assert!(pool.get_message_by_name(&name).is_some(), "{name} missing");
    }
}

/// Map fields (per-filter configs) print in key order, whatever order the
/// hash map holds them in.
#[test]
fn map_fields_print_in_key_order() {
    use envoy_types::pb::envoy::config::route::v3::Route;
    use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
    let route = || {
        let mut r = Route {
            name: "r".into(),
            ..Default::default()
        };
        for k in ["d", "b", "a", "c", "e"] {
            r.typed_per_filter_config.insert(
                format!("filter.{k}"),
                envoy_types::util::pack_any(CorsPolicy {
                    allow_methods: k.into(),
                    ..Default::default()
                }),
            );
        }
        r
    };
    let first = serde_json::to_string(&output::message_to_json(&route()).expect("json")).expect("string");
    for _ in 0..10 {
        let again = serde_json::to_string(&output::message_to_json(&route()).expect("json")).expect("string");
        assert_eq!(again, first);
    }
    let keys: Vec<usize> = ["filter.a", "filter.b", "filter.c", "filter.d", "filter.e"]
        .iter()
        .map(|k| first.find(k).expect("key printed"))
        .collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{first}");
}
