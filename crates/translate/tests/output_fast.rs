//! `translate -o json` renders messages straight from their wire bytes
//! (`output::stream::fast_message_json`, the path behind
//! `write_output_json`) where that gives exactly what the general path
//! gives (dynamic message → `Value` → sorted maps → pretty-printed): checked
//! here message by message on every fixture's resources and routes, on a
//! generated workload, and on messages with the odd corners of proto-JSON;
//! and the fast path must actually be taken for what the translator emits.

#[path = "support/fixture_files.rs"]
mod fixture_files;
#[path = "support/fixture_settings.rs"]
mod fixture_settings;

use prost::{Message, Name};
use translate::output::{self, stream};

const ROUTE: &str = "envoy.config.route.v3.Route";

/// The general path's text of a message at `depth`.
fn general(type_name: &str, bytes: &[u8], depth: usize) -> String {
    let v = output::bytes_to_json(type_name, bytes).expect("renders");
    let text = serde_json::to_string_pretty(&v).expect("prints");
    // Re-indent to `depth`, as the streamed writer places it.
    let pad = "  ".repeat(depth);
    text.replace('\n', &format!("\n{pad}"))
}

/// Compares the fast path with the general one; whether it was taken.
fn check(what: &str, type_name: &str, bytes: &[u8], depth: usize) -> bool {
    match stream::fast_message_json(type_name, bytes, depth) {
        None => false,
        Some(fast) => {
            let slow = general(type_name, bytes, depth);
            assert!(
                fast == slow,
                "{what}: fast path differs\nfast:\n{fast}\ngeneral:\n{slow}"
            );
            true
        }
    }
}

fn check_output(name: &str, out: &translate::Output) -> (usize, usize) {
    let (mut fast, mut all) = (0, 0);
    let mut tally = |taken: bool| {
        all += 1;
        fast += usize::from(taken);
    };
    for (key, gw) in &out.gateways {
        let what = format!("{name} {key}");
        for l in &gw.listeners {
            tally(check(&what, &Listener::full_name(), &l.encode_to_vec(), 3));
        }
        for c in &gw.clusters {
            tally(check(&what, &Cluster::full_name(), &c.encode_to_vec(), 3));
        }
        for e in &gw.endpoints {
            tally(check(&what, &Cla::full_name(), &e.encode_to_vec(), 3));
        }
        for rc in &gw.routes {
            for host in rc.decode().virtual_hosts {
                for r in host.routes {
                    tally(check(&what, ROUTE, &r.encode_to_vec(), 6));
                }
            }
        }
    }
    (fast, all)
}

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment as Cla;
use envoy_types::pb::envoy::config::listener::v3::Listener;

#[test]
fn the_fast_path_renders_every_fixture_message_as_the_general_path() {
    let files = fixture_files::all();
    assert!(files.len() > 20, "fixtures not found");
    let (mut fast, mut all) = (0, 0);
    for fixture in files {
        let input = fixture.input();
        let name = fixture.path.display().to_string();
        let loaded = api::loader::load_str(&name, input);
        let out = translate::translate(&loaded.inputs, &fixture_settings::settings_for(input));
        let (f, a) = check_output(&name, &out);
        fast += f;
        all += a;
    }
    // Everything the translator emits is in the fast path's subset.
    assert!(all > 200, "too few messages: {all}");
    assert_eq!(fast, all, "messages left to the general path");
}

#[test]
fn the_fast_path_renders_a_generated_workload_as_the_general_path() {
    let text = testkit::generate::manifests(testkit::generate::Shape::with_routes(400));
    let loaded = api::loader::load_str("generated.yaml", &text);
    let out = translate::translate(&loaded.inputs, &translate::Settings::default());
    let (fast, all) = check_output("generated", &out);
    assert!(all > 1_000, "too few messages: {all}");
    assert_eq!(fast, all, "messages left to the general path");
    // And the whole streamed document is the pretty-printed one.
    let mut whole = serde_json::to_string_pretty(&output::output_to_json(&out)).expect("prints");
    whole.push('\n');
    let mut streamed = Vec::new();
    stream::write_output_json(&out, &mut streamed).expect("written");
    assert!(
        streamed == whole.as_bytes(),
        "streamed JSON differs from the whole document"
    );
}

#[test]
fn odd_corners_of_proto_json_render_as_the_general_path_or_defer_to_it() {
    use envoy_types::pb::envoy::config::core::v3::{Metadata, RuntimeDouble};
    use envoy_types::pb::envoy::config::route::v3::{Route, RouteAction, route, route_action};
    use envoy_types::pb::envoy::r#type::v3::FractionalPercent;
    use envoy_types::pb::google::protobuf::{Any, Duration, Struct, UInt32Value, Value, value};
    // Maps (unsorted on the wire, a duplicate key: the last wins), negative
    // and 64-bit integers, floats, bytes, an unknown enum number, Any
    // nesting, durations with fractions.
    let any_route = Any {
        type_url: "type.googleapis.com/envoy.config.route.v3.Route".into(),
        value: Route {
            name: "inner".into(),
            ..Default::default()
        }
        .encode_to_vec(),
    };
    let cluster = Cluster {
        name: "c\"quoted\\\n\u{1}é".into(),
        connect_timeout: Some(Duration {
            seconds: 1,
            nanos: 500_000_000,
        }),
        per_connection_buffer_limit_bytes: Some(UInt32Value { value: 0 }),
        typed_extension_protocol_options: [
            ("z".to_string(), any_route.clone()),
            ("a".to_string(), any_route),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let mut bytes = cluster.encode_to_vec();
    assert!(
        check("cluster", &Cluster::full_name(), &bytes, 2),
        "cluster took the general path"
    );
    // A duplicate map key, appended on the wire: the last wins.
    let dup = Cluster {
        typed_extension_protocol_options: [(
            "a".to_string(),
            Any {
                type_url: "type.googleapis.com/envoy.config.route.v3.Route".into(),
                value: Route {
                    name: "later".into(),
                    ..Default::default()
                }
                .encode_to_vec(),
            },
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    bytes.extend(dup.encode_to_vec());
    assert!(check("duplicate key", &Cluster::full_name(), &bytes, 0));
    let durations = [
        (0, 1),
        (2, 1_000),
        (3, 120_000_000),
        (0, 0),
        (315_576_000_000, 999_999_999),
    ];
    for (seconds, nanos) in durations {
        let c = Cluster {
            connect_timeout: Some(Duration { seconds, nanos }),
            ..Default::default()
        };
        assert!(
            check("duration", &Cluster::full_name(), &c.encode_to_vec(), 1),
            "{seconds}s {nanos}ns"
        );
    }
    // Floats: a double that is not round in binary, and the f32 widening.
    let rd = RuntimeDouble {
        default_value: 0.1,
        runtime_key: "k".into(),
    };
    assert!(check(
        "double",
        &RuntimeDouble::full_name(),
        &rd.encode_to_vec(),
        0
    ));
    // Unknown enum number, and a route with an unknown field appended.
    let fp = FractionalPercent {
        numerator: 7,
        denominator: 99,
    };
    assert!(check(
        "enum",
        &FractionalPercent::full_name(),
        &fp.encode_to_vec(),
        0
    ));
    let mut r = Route {
        name: "r".into(),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster("x".into())),
            ..Default::default()
        })),
        ..Default::default()
    }
    .encode_to_vec();
    r.extend([0xf8, 0xff, 0x03, 0x01]); // field 8191, varint 1: unknown
    assert!(check("unknown field", ROUTE, &r, 4));
    // What the fast path leaves to the general one: Struct (in metadata),
    // a negative duration, a singular field twice on the wire.
    let meta = Route {
        metadata: Some(Metadata {
            filter_metadata: [(
                "f".to_string(),
                Struct {
                    fields: [(
                        "k".to_string(),
                        Value {
                            kind: Some(value::Kind::NumberValue(1.5)),
                        },
                    )]
                    .into_iter()
                    .collect(),
                },
            )]
            .into_iter()
            .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(stream::fast_message_json(ROUTE, &meta.encode_to_vec(), 0).is_none());
    let negative = Cluster {
        connect_timeout: Some(Duration {
            seconds: -1,
            nanos: 0,
        }),
        ..Default::default()
    };
    assert!(stream::fast_message_json(&Cluster::full_name(), &negative.encode_to_vec(), 0).is_none());
    let mut twice = Cluster {
        connect_timeout: Some(Duration { seconds: 1, nanos: 0 }),
        ..Default::default()
    }
    .encode_to_vec();
    twice.extend(twice.clone());
    assert!(stream::fast_message_json(&Cluster::full_name(), &twice, 0).is_none());
}
