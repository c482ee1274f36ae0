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
use prost::encoding::{WireType, encode_key, encode_varint};

/// `RouteConfiguration.virtual_hosts` and `VirtualHost.routes` field numbers.
const RC_VIRTUAL_HOSTS: u32 = 2;
const VH_ROUTES: u32 = 3;

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

fn nested(field: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(field, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

fn virtual_host(vh: &VirtualHost) -> Vec<u8> {
    if !vh.routes.iter().any(needs_care) {
        return vh.encode_to_vec();
    }
    let bare = VirtualHost {
        routes: Vec::new(),
        ..vh.clone()
    };
    let mut out = bare.encode_to_vec();
    for r in &vh.routes {
        nested(VH_ROUTES, &route(r), &mut out);
    }
    out
}

/// A whole route configuration.
pub fn route_configuration(rc: &RouteConfiguration) -> Vec<u8> {
    if !rc.virtual_hosts.iter().flat_map(|vh| &vh.routes).any(needs_care) {
        return rc.encode_to_vec();
    }
    let bare = RouteConfiguration {
        virtual_hosts: Vec::new(),
        ..rc.clone()
    };
    let mut out = bare.encode_to_vec();
    for vh in &rc.virtual_hosts {
        nested(RC_VIRTUAL_HOSTS, &virtual_host(vh), &mut out);
    }
    out
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
