//! Deterministic encoding of route configurations.
//!
//! prost keeps protobuf maps (`typed_per_filter_config`) in a `HashMap`,
//! whose iteration order differs between map instances: the same route
//! would encode to different bytes each translation, defeating content
//! hashes (xDS versions, the STRICT cache). Here each map entry is encoded
//! separately in key order and appended: protobuf parsers merge fields that
//! appear later, so the bytes decode to the same message.

use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};
use prost::Message;

use super::encoded::{self, HostParts};

fn needs_care(r: &Route) -> bool {
    r.typed_per_filter_config.len() > 1
}

/// One route, with its per-filter configs in key order.
pub fn route(r: &Route) -> Vec<u8> {
    if !needs_care(r) {
        return r.encode_to_vec();
    }
    let mut bare = r.clone();
    let map = std::mem::take(&mut bare.typed_per_filter_config);
    let mut out = bare.encode_to_vec();
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        let one = Route {
            typed_per_filter_config: [(k.clone(), map[k].clone())].into_iter().collect(),
            ..Default::default()
        };
        one.encode(&mut out).expect("a Vec grows as needed");
    }
    out
}

/// A virtual host's fields after its routes, per-filter configs in key
/// order (a Gateway or listener policy puts them there).
pub fn host_tail(vh: &VirtualHost, out: &mut Vec<u8>) {
    if vh.typed_per_filter_config.len() <= 1 {
        vh.encode_raw(out);
        return;
    }
    let mut bare = vh.clone();
    let map = std::mem::take(&mut bare.typed_per_filter_config);
    bare.encode_raw(out);
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        let one = VirtualHost {
            typed_per_filter_config: [(k.clone(), map[k].clone())].into_iter().collect(),
            ..Default::default()
        };
        one.encode_raw(out);
    }
}

/// A route configuration's fields after its virtual hosts, per-filter
/// configs in key order.
pub fn config_tail(rc: &RouteConfiguration, out: &mut Vec<u8>) {
    if rc.typed_per_filter_config.len() <= 1 {
        rc.encode_raw(out);
        return;
    }
    let mut bare = rc.clone();
    let map = std::mem::take(&mut bare.typed_per_filter_config);
    bare.encode_raw(out);
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        let one = RouteConfiguration {
            typed_per_filter_config: [(k.clone(), map[k].clone())].into_iter().collect(),
            ..Default::default()
        };
        one.encode_raw(out);
    }
}

/// A whole route configuration, fields in field-number order.
pub fn route_configuration(rc: &RouteConfiguration) -> Vec<u8> {
    let head = RouteConfiguration {
        name: rc.name.clone(),
        ..Default::default()
    };
    let tail = RouteConfiguration {
        name: String::new(),
        virtual_hosts: Vec::new(),
        ..rc.clone()
    };
    let hosts = rc
        .virtual_hosts
        .iter()
        .map(|vh| HostParts {
            head: VirtualHost {
                name: vh.name.clone(),
                domains: vh.domains.clone(),
                ..Default::default()
            },
            routes: vh.routes.iter().map(route).collect(),
            tail: VirtualHost {
                name: String::new(),
                domains: Vec::new(),
                routes: Vec::new(),
                ..vh.clone()
            },
        })
        .collect();
    encoded::assemble(&head, hosts, &tail).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Any;

    fn sample() -> RouteConfiguration {
        let mut r = Route {
            name: "r".into(),
            ..Default::default()
        };
        for k in ["c", "a", "b", "d"] {
            r.typed_per_filter_config.insert(
                k.into(),
                Any {
                    type_url: format!("type/{k}"),
                    value: vec![1, 2, 3],
                },
            );
        }
        RouteConfiguration {
            name: "rc".into(),
            virtual_hosts: vec![VirtualHost {
                name: "vh".into(),
                domains: vec!["*".into()],
                routes: vec![r.clone(), r],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn same_message_same_bytes_and_round_trips() {
        let a = sample();
        let bytes = route_configuration(&a);
        for _ in 0..20 {
            // Fresh HashMaps iterate in different orders; the bytes must not.
            assert_eq!(route_configuration(&sample()), bytes);
        }
        let decoded = RouteConfiguration::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(decoded, a);
    }
}
