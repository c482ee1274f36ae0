//! The streamed renderings (`output::stream`, what `portcullis translate
//! -o json|bootstrap` writes) give exactly the bytes of pretty-printing the
//! whole document, on every golden fixture's output; and a resource that
//! cannot be rendered is reported, as in the whole-document path.

#[path = "support/fixture_files.rs"]
mod fixture_files;

use translate::output::{self, bootstrap, stream};

fn fixture_outputs() -> Vec<(String, translate::Output)> {
    fixture_files::all()
        .into_iter()
        .map(|fixture| {
            let name = fixture.file_name();
            let loaded = api::loader::load_str(&name, fixture.input());
            let mut out = translate::translate(&loaded.inputs, &translate::Settings::default());
            let mut d = loaded.diagnostics;
            d.append(&mut out.diagnostics);
            out.diagnostics = d;
            (name, out)
        })
        .collect()
}

#[test]
fn streamed_json_is_the_pretty_printed_document_for_every_fixture() {
    let outputs = fixture_outputs();
    assert!(outputs.len() > 20, "fixtures not found");
    for (name, out) in &outputs {
        let mut whole = serde_json::to_string_pretty(&output::output_to_json(out)).unwrap_or_default();
        whole.push('\n');
        let mut streamed = Vec::new();
        stream::write_output_json(out, &mut streamed).unwrap_or_else(|e| panic!("{name}: {e}"));
        let streamed = String::from_utf8(streamed).unwrap_or_default();
        if streamed != whole {
            let at = whole
                .bytes()
                .zip(streamed.bytes())
                .take_while(|(a, b)| a == b)
                .count();
            panic!(
                "{name}: streamed JSON differs at byte {at}:\nwhole:    {:?}\nstreamed: {:?}",
                &whole[at.saturating_sub(80)..(at + 80).min(whole.len())],
                &streamed[at.saturating_sub(80)..(at + 80).min(streamed.len())]
            );
        }
    }
}

#[test]
fn streamed_bootstrap_is_the_pretty_printed_bootstrap_for_every_gateway() {
    let mut gateways = 0;
    for (name, out) in fixture_outputs() {
        for (key, gw) in &out.gateways {
            gateways += 1;
            let options = bootstrap::BootstrapOptions::default();
            let mut whole = serde_json::to_string_pretty(&bootstrap::static_bootstrap(gw, key, &options))
                .unwrap_or_default();
            whole.push('\n');
            let mut streamed = Vec::new();
            stream::write_static_bootstrap(gw, key, &options, &mut streamed)
                .unwrap_or_else(|e| panic!("{name} {key}: {e}"));
            assert!(
                String::from_utf8_lossy(&streamed) == whole,
                "{name} {key}: streamed bootstrap differs from the whole one"
            );
        }
    }
    assert!(gateways > 20, "too few Gateways in the fixtures: {gateways}");
}

#[test]
fn a_resource_that_cannot_be_rendered_is_reported_in_the_streamed_document() {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::google::protobuf::Any;
    let mut out = translate::Output::default();
    let cluster = Cluster {
        name: "odd".into(),
        typed_extension_protocol_options: [(
            "x".to_string(),
            Any {
                type_url: "type.googleapis.com/not.a.Known".into(),
                value: vec![],
            },
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    out.gateways.insert(
        "infra/gw".into(),
        std::sync::Arc::new(translate::GatewayXds {
            clusters: vec![cluster.into()],
            ..Default::default()
        }),
    );
    let mut streamed = Vec::new();
    stream::write_output_json(&out, &mut streamed).expect("written");
    let v: serde_json::Value = serde_json::from_slice(&streamed).expect("valid JSON");
    assert_eq!(v["gateways"]["infra/gw"]["clusters"][0]["name"], "odd");
    assert!(
        v["gateways"]["infra/gw"]["clusters"][0]["@error"].is_string(),
        "{v}"
    );
    let diag = &v["diagnostics"][0];
    assert_eq!(diag["object"], "Gateway infra/gw");
    assert!(
        diag["message"]
            .as_str()
            .unwrap_or_default()
            .contains("\"odd\" cannot be rendered"),
        "{diag}"
    );
    assert_eq!(v, output::output_to_json(&out));
    let err = stream::write_static_bootstrap(
        &out.gateways["infra/gw"],
        "infra/gw",
        &Default::default(),
        &mut Vec::new(),
    )
    .expect_err("a resource that cannot be rendered is an error");
    assert!(err.to_string().contains("cannot be rendered"), "{err}");
}

#[test]
fn a_route_that_cannot_be_rendered_is_written_as_an_error_in_its_place() {
    use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};
    use envoy_types::pb::google::protobuf::Any;
    let good = Route {
        name: "good".into(),
        ..Default::default()
    };
    let odd = Route {
        name: "odd".into(),
        typed_per_filter_config: [(
            "x".to_string(),
            Any {
                type_url: "type.googleapis.com/not.a.Known".into(),
                value: vec![],
            },
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let rc = RouteConfiguration {
        name: "rc".into(),
        virtual_hosts: vec![VirtualHost {
            name: "vh".into(),
            domains: vec!["*".into()],
            routes: vec![good, odd],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut out = translate::Output::default();
    out.gateways.insert(
        "infra/gw".into(),
        std::sync::Arc::new(translate::GatewayXds {
            routes: vec![(&rc).into()],
            ..Default::default()
        }),
    );
    let mut streamed = Vec::new();
    stream::write_output_json(&out, &mut streamed).expect("written");
    let v: serde_json::Value = serde_json::from_slice(&streamed).expect("valid JSON");
    let routes = &v["gateways"]["infra/gw"]["routes"][0]["virtual_hosts"][0]["routes"];
    assert_eq!(routes[0]["name"], "good");
    assert!(routes[1]["@error"].is_string(), "{routes}");
    let diag = &v["diagnostics"][0];
    assert_eq!(diag["object"], "Gateway infra/gw");
    assert!(
        diag["message"]
            .as_str()
            .unwrap_or_default()
            .contains("\"rc\" cannot be rendered"),
        "{diag}"
    );
}
