//! The wire contract with Envoy Gateway, pinned: the service, its methods
//! and every message's field numbers and types as Envoy Gateway v1.9.0's
//! `proto/extension/{service,context}.proto` declare them (written out here
//! by hand from those files). A drift of the vendored `.proto` files fails
//! the first test; a drift of the generated Rust (e.g. a wrong
//! `extern_path`) fails the second, which decodes what the generated
//! structs encode with the descriptor.

use extension::proto;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, Value};

fn pool() -> DescriptorPool {
    DescriptorPool::decode(proto::FILE_DESCRIPTOR_SET).expect("the build script's descriptor set decodes")
}

/// `(message, [(field, number, type, repeated)])` — type is the message's
/// full name, or `bytes` / `string`.
/// `(field, number, type, repeated)`.
type Field = (&'static str, u32, &'static str, bool);

const MESSAGES: &[(&str, &[Field])] = &[
    (
        "PostRouteModifyRequest",
        &[
            ("route", 1, "envoy.config.route.v3.Route", false),
            (
                "post_route_context",
                2,
                "envoygateway.extension.PostRouteExtensionContext",
                false,
            ),
        ],
    ),
    (
        "PostRouteModifyResponse",
        &[("route", 1, "envoy.config.route.v3.Route", false)],
    ),
    (
        "PostClusterModifyRequest",
        &[
            ("cluster", 1, "envoy.config.cluster.v3.Cluster", false),
            (
                "post_cluster_context",
                2,
                "envoygateway.extension.PostClusterExtensionContext",
                false,
            ),
        ],
    ),
    (
        "PostClusterModifyResponse",
        &[("cluster", 1, "envoy.config.cluster.v3.Cluster", false)],
    ),
    (
        "PostEndpointsModifyRequest",
        &[
            (
                "load_assignment",
                1,
                "envoy.config.endpoint.v3.ClusterLoadAssignment",
                false,
            ),
            (
                "post_endpoints_context",
                2,
                "envoygateway.extension.PostEndpointsExtensionContext",
                false,
            ),
        ],
    ),
    (
        "PostEndpointsModifyResponse",
        &[(
            "load_assignment",
            1,
            "envoy.config.endpoint.v3.ClusterLoadAssignment",
            false,
        )],
    ),
    (
        "PostVirtualHostModifyRequest",
        &[
            ("virtual_host", 1, "envoy.config.route.v3.VirtualHost", false),
            (
                "post_virtual_host_context",
                2,
                "envoygateway.extension.PostVirtualHostExtensionContext",
                false,
            ),
        ],
    ),
    (
        "PostVirtualHostModifyResponse",
        &[("virtual_host", 1, "envoy.config.route.v3.VirtualHost", false)],
    ),
    (
        "PostHTTPListenerModifyRequest",
        &[
            ("listener", 1, "envoy.config.listener.v3.Listener", false),
            (
                "post_listener_context",
                2,
                "envoygateway.extension.PostHTTPListenerExtensionContext",
                false,
            ),
        ],
    ),
    (
        "PostHTTPListenerModifyResponse",
        &[("listener", 1, "envoy.config.listener.v3.Listener", false)],
    ),
    (
        "PostTranslateModifyRequest",
        &[
            (
                "post_translate_context",
                1,
                "envoygateway.extension.PostTranslateExtensionContext",
                false,
            ),
            ("clusters", 2, "envoy.config.cluster.v3.Cluster", true),
            (
                "secrets",
                3,
                "envoy.extensions.transport_sockets.tls.v3.Secret",
                true,
            ),
            ("listeners", 4, "envoy.config.listener.v3.Listener", true),
            ("routes", 5, "envoy.config.route.v3.RouteConfiguration", true),
        ],
    ),
    (
        "PostTranslateModifyResponse",
        &[
            ("clusters", 1, "envoy.config.cluster.v3.Cluster", true),
            (
                "secrets",
                2,
                "envoy.extensions.transport_sockets.tls.v3.Secret",
                true,
            ),
            ("listeners", 3, "envoy.config.listener.v3.Listener", true),
            ("routes", 4, "envoy.config.route.v3.RouteConfiguration", true),
        ],
    ),
    (
        "PostRouteExtensionContext",
        &[
            (
                "extension_resources",
                1,
                "envoygateway.extension.ExtensionResource",
                true,
            ),
            ("hostnames", 2, "string", true),
            (
                "extension_policies",
                3,
                "envoygateway.extension.ExtensionResource",
                true,
            ),
        ],
    ),
    ("PostVirtualHostExtensionContext", &[]),
    (
        "PostClusterExtensionContext",
        &[(
            "backend_extension_resources",
            1,
            "envoygateway.extension.ExtensionResource",
            true,
        )],
    ),
    ("PostEndpointsExtensionContext", &[]),
    (
        "PostHTTPListenerExtensionContext",
        &[(
            "extension_resources",
            1,
            "envoygateway.extension.ExtensionResource",
            true,
        )],
    ),
    (
        "PostTranslateExtensionContext",
        &[(
            "extension_resources",
            1,
            "envoygateway.extension.ExtensionResource",
            true,
        )],
    ),
    ("ExtensionResource", &[("unstructured_bytes", 1, "bytes", false)]),
];

const METHODS: &[(&str, &str, &str)] = &[
    (
        "PostRouteModify",
        "PostRouteModifyRequest",
        "PostRouteModifyResponse",
    ),
    (
        "PostVirtualHostModify",
        "PostVirtualHostModifyRequest",
        "PostVirtualHostModifyResponse",
    ),
    (
        "PostHTTPListenerModify",
        "PostHTTPListenerModifyRequest",
        "PostHTTPListenerModifyResponse",
    ),
    (
        "PostClusterModify",
        "PostClusterModifyRequest",
        "PostClusterModifyResponse",
    ),
    (
        "PostEndpointsModify",
        "PostEndpointsModifyRequest",
        "PostEndpointsModifyResponse",
    ),
    (
        "PostTranslateModify",
        "PostTranslateModifyRequest",
        "PostTranslateModifyResponse",
    ),
];

fn type_name(kind: &Kind) -> String {
    match kind {
        Kind::Message(m) => m.full_name().to_string(),
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
        other => format!("{other:?}"),
    }
}

#[test]
fn vendored_protos_declare_envoy_gateways_service_and_messages() {
    let pool = pool();
    let service = pool
        .get_service_by_name("envoygateway.extension.EnvoyGatewayExtension")
        .expect("service envoygateway.extension.EnvoyGatewayExtension");
    let methods: Vec<_> = service.methods().collect();
    assert_eq!(methods.len(), METHODS.len(), "number of rpcs");
    for (name, input, output) in METHODS {
        let m = methods
            .iter()
            .find(|m| m.name() == *name)
            .unwrap_or_else(|| panic!("rpc {name}"));
        assert_eq!(
            m.input().full_name(),
            format!("envoygateway.extension.{input}"),
            "{name} input"
        );
        assert_eq!(
            m.output().full_name(),
            format!("envoygateway.extension.{output}"),
            "{name} output"
        );
        assert!(
            !m.is_client_streaming() && !m.is_server_streaming(),
            "{name} is unary"
        );
        assert_eq!(
            m.full_name(),
            format!("envoygateway.extension.EnvoyGatewayExtension.{name}")
        );
    }
    for (msg, fields) in MESSAGES {
        let d = pool
            .get_message_by_name(&format!("envoygateway.extension.{msg}"))
            .unwrap_or_else(|| panic!("message {msg}"));
        assert_eq!(d.fields().len(), fields.len(), "{msg}: number of fields");
        for (name, number, ty, repeated) in *fields {
            let f = d
                .get_field_by_name(name)
                .unwrap_or_else(|| panic!("{msg}.{name}"));
            assert_eq!(f.number(), *number, "{msg}.{name} number");
            assert_eq!(type_name(&f.kind()), *ty, "{msg}.{name} type");
            assert_eq!(f.is_list(), *repeated, "{msg}.{name} repeated");
        }
    }
}

/// The generated structs encode each field under the descriptor's number.
#[test]
fn generated_structs_encode_with_the_descriptors_numbers() {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration};
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;

    let pool = pool();
    let res = |s: &str| proto::ExtensionResource {
        unstructured_bytes: s.as_bytes().to_vec(),
    };
    let route_req = proto::PostRouteModifyRequest {
        route: Some(Route {
            name: "r1".into(),
            ..Default::default()
        }),
        post_route_context: Some(proto::PostRouteExtensionContext {
            extension_resources: vec![res("{\"kind\":\"A\"}")],
            hostnames: vec!["a.example".into()],
            extension_policies: vec![res("{\"kind\":\"P\"}")],
        }),
    };
    let d = pool
        .get_message_by_name("envoygateway.extension.PostRouteModifyRequest")
        .expect("descriptor");
    let dm = DynamicMessage::decode(d, route_req.encode_to_vec().as_slice()).expect("decodes");
    let route = dm.get_field_by_number(1).expect("field 1");
    let Value::Message(route) = &*route else {
        panic!("route is a message")
    };
    assert_eq!(
        route.get_field_by_name("name").as_deref(),
        Some(&Value::String("r1".into()))
    );
    let ctx = dm.get_field_by_number(2).expect("field 2");
    let Value::Message(ctx) = &*ctx else {
        panic!("context is a message")
    };
    let hostnames = ctx.get_field_by_number(2).expect("hostnames");
    assert_eq!(
        hostnames.as_list().map(|l| l.to_vec()),
        Some(vec![Value::String("a.example".into())])
    );
    let policies = ctx.get_field_by_number(3).expect("policies");
    let Some([Value::Message(p)]) = policies.as_list() else {
        panic!("one policy")
    };
    assert_eq!(
        p.get_field_by_number(1).as_deref(),
        Some(&Value::Bytes(b"{\"kind\":\"P\"}".to_vec().into()))
    );

    let tr = proto::PostTranslateModifyResponse {
        clusters: vec![Cluster {
            name: "c".into(),
            ..Default::default()
        }],
        secrets: vec![Secret {
            name: "s".into(),
            ..Default::default()
        }],
        listeners: vec![Listener {
            name: "l".into(),
            ..Default::default()
        }],
        routes: vec![RouteConfiguration {
            name: "rc".into(),
            ..Default::default()
        }],
    };
    let d = pool
        .get_message_by_name("envoygateway.extension.PostTranslateModifyResponse")
        .expect("descriptor");
    let dm = DynamicMessage::decode(d, tr.encode_to_vec().as_slice()).expect("decodes");
    for (number, name) in [(1, "c"), (2, "s"), (3, "l"), (4, "rc")] {
        let v = dm.get_field_by_number(number).expect("field");
        let Some([Value::Message(m)]) = v.as_list() else {
            panic!("field {number} is one message")
        };
        assert_eq!(
            m.get_field_by_name("name").as_deref(),
            Some(&Value::String(name.into())),
            "field {number}"
        );
    }
}
