//! Route configurations kept encoded.
//!
//! An Envoy `Route` is ~2.3 KiB inline (its action is a large `oneof`) plus
//! its strings, ~3.5 KiB in all; encoded it is a few hundred bytes. At
//! 40,000 routes the decoded output held ~140 MiB, more than the inputs it
//! came from. So each route is encoded (canonically, see `canonical`) as
//! soon as its rule is built, the route configuration is assembled from
//! those bytes, and the xDS server sends them as they are. Views, output
//! rendering, STRICT's bisection and tests decode on demand.
//!
//! The bytes are exactly [`canonical::route_configuration`] of the decoded
//! message: fields in field-number order, map entries in key order (which
//! is prost's own encoding but for those maps).

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use super::canonical;

/// `RouteConfiguration.virtual_hosts` and `VirtualHost.routes`.
const RC_VIRTUAL_HOSTS: u32 = 2;
const VH_ROUTES: u32 = 3;

/// One `envoy.config.route.v3.RouteConfiguration`, canonically encoded.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct EncodedRouteConfiguration {
    /// The configuration's `name` (what RDS asks for).
    pub name: String,
    /// Shared: the incremental translator's memo and the output hold the
    /// same bytes, and splice unchanged virtual hosts out of them.
    bytes: std::sync::Arc<Vec<u8>>,
}

impl EncodedRouteConfiguration {
    pub fn new(rc: &RouteConfiguration) -> Self {
        Self {
            name: rc.name.clone(),
            bytes: std::sync::Arc::new(canonical::route_configuration(rc)),
        }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn into_bytes(self) -> Vec<u8> {
        std::sync::Arc::unwrap_or_clone(self.bytes)
    }

    /// The message. The bytes were encoded here, so they always decode;
    /// should that ever break, the result is an empty configuration of the
    /// same name, which serves nothing (fails closed).
    pub fn decode(&self) -> RouteConfiguration {
        RouteConfiguration::decode(self.bytes.as_slice()).unwrap_or_else(|_| RouteConfiguration {
            name: self.name.clone(),
            ..Default::default()
        })
    }

    /// Decodes, lets `f` change the message, encodes again (for hand-made
    /// edits: tests, STRICT's replacements).
    pub fn edit<T>(&mut self, f: impl FnOnce(&mut RouteConfiguration) -> T) -> T {
        let mut rc = self.decode();
        let out = f(&mut rc);
        *self = Self::new(&rc);
        out
    }
}

impl From<&RouteConfiguration> for EncodedRouteConfiguration {
    fn from(rc: &RouteConfiguration) -> Self {
        Self::new(rc)
    }
}

impl std::fmt::Debug for EncodedRouteConfiguration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodedRouteConfiguration")
            .field("name", &self.name)
            .field("len", &self.bytes.len())
            .finish()
    }
}

/// One virtual host to assemble: `head` holds its fields before `routes`
/// (name, domains), `tail` those after; `routes` each already encoded
/// (`canonical::route`), in order.
pub struct HostParts<R = Vec<u8>> {
    pub head: VirtualHost,
    pub routes: Vec<R>,
    pub tail: VirtualHost,
}

/// A virtual host of a route configuration being assembled: built from
/// its parts, or its payload (the `VirtualHost` message without the
/// field's key and length) already encoded, spliced from a previous
/// assembly by the incremental translator (`xds::route`).
pub enum Host<'a, R = Vec<u8>> {
    /// Boxed: a `VirtualHost` head and tail are ~2.5 KiB inline.
    Parts(Box<HostParts<R>>),
    Encoded(&'a [u8]),
}

fn nested_len(field: u32, len: usize) -> usize {
    key_len(field) + encoded_len_varint(len as u64) + len
}

fn nested_head(field: u32, len: usize, out: &mut Vec<u8>) {
    encode_key(field, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

/// Assembles a route configuration from its parts, copying each route's
/// bytes once. `head` holds the fields before `virtual_hosts` (the name),
/// `tail` those after it (both without virtual hosts), so that the result
/// is in field-number order, as prost writes it (map entries aside).
pub fn assemble<R: AsRef<[u8]>>(
    head: &RouteConfiguration,
    hosts: Vec<HostParts<R>>,
    tail: &RouteConfiguration,
) -> EncodedRouteConfiguration {
    assemble_hosts(
        head,
        hosts.into_iter().map(|h| Host::Parts(Box::new(h))).collect(),
        tail,
    )
    .0
}

/// [`assemble`] of hosts some of which are already encoded; also returns
/// where each host's payload lies in the result's bytes (in order), so a
/// later assembly can splice it.
pub fn assemble_hosts<R: AsRef<[u8]>>(
    head: &RouteConfiguration,
    hosts: Vec<Host<'_, R>>,
    tail: &RouteConfiguration,
) -> (EncodedRouteConfiguration, Vec<std::ops::Range<usize>>) {
    let host_heads: Vec<Vec<u8>> = hosts
        .iter()
        .map(|h| match h {
            Host::Parts(h) => h.head.encode_to_vec(),
            Host::Encoded(_) => Vec::new(),
        })
        .collect();
    let host_lens: Vec<usize> = hosts
        .iter()
        .zip(&host_heads)
        .map(|(h, hh)| match h {
            Host::Parts(h) => {
                hh.len()
                    + h.routes
                        .iter()
                        .map(|r| nested_len(VH_ROUTES, r.as_ref().len()))
                        .sum::<usize>()
                    + h.tail.encoded_len()
            }
            Host::Encoded(b) => b.len(),
        })
        .collect();
    let total = head.encoded_len()
        + host_lens
            .iter()
            .map(|&l| nested_len(RC_VIRTUAL_HOSTS, l))
            .sum::<usize>()
        + tail.encoded_len();
    let mut out = Vec::with_capacity(total);
    let mut ranges = Vec::with_capacity(hosts.len());
    head.encode_raw(&mut out);
    for ((h, hh), len) in hosts.into_iter().zip(host_heads).zip(host_lens) {
        nested_head(RC_VIRTUAL_HOSTS, len, &mut out);
        let start = out.len();
        match h {
            Host::Parts(h) => {
                out.extend_from_slice(&hh);
                for r in h.routes {
                    let r = r.as_ref();
                    nested_head(VH_ROUTES, r.len(), &mut out);
                    out.extend_from_slice(r);
                }
                canonical::host_tail(&h.tail, &mut out);
            }
            Host::Encoded(b) => out.extend_from_slice(b),
        }
        ranges.push(start..out.len());
    }
    canonical::config_tail(tail, &mut out);
    (
        EncodedRouteConfiguration {
            name: head.name.clone(),
            bytes: std::sync::Arc::new(out),
        },
        ranges,
    )
}

/// One field of an encoded message: its number, the whole field with its
/// key, and the payload of a length-delimited field.
type Field<'a> = (u32, &'a [u8], Option<&'a [u8]>);

/// The fields of one encoded message, walked without decoding. `None` on
/// bytes that are not a well-formed message.
fn fields(bytes: &[u8]) -> Option<Vec<Field<'_>>> {
    super::wire::fields(bytes)
        .map(|f| f.ok().map(|f| (f.number, f.whole, f.payload)))
        .collect()
}

/// A field of the route configuration: a virtual host, or any other
/// field as encoded.
enum Item<'a> {
    Field(&'a [u8]),
    Host(Vec<HostItem<'a>>),
}

/// A field of a virtual host: a route's payload, or any other field as
/// encoded.
enum HostItem<'a> {
    Field(&'a [u8]),
    Route(&'a [u8]),
}

/// Where the parts of an encoded route configuration lie: its routes'
/// bytes can be hashed and picked without decoding a message (STRICT's
/// warm path looks at every route of every configuration, and keeps few).
pub struct Layout<'a> {
    name: &'a str,
    items: Vec<Item<'a>>,
}

impl EncodedRouteConfiguration {
    /// `None` only for bytes that are not a well-formed message.
    pub fn layout(&self) -> Option<Layout<'_>> {
        let mut items = Vec::new();
        for (tag, whole, payload) in fields(&self.bytes)? {
            if tag != RC_VIRTUAL_HOSTS {
                items.push(Item::Field(whole));
                continue;
            }
            let mut host = Vec::new();
            for (t, w, p) in fields(payload?)? {
                host.push(if t == VH_ROUTES {
                    HostItem::Route(p?)
                } else {
                    HostItem::Field(w)
                });
            }
            items.push(Item::Host(host));
        }
        Some(Layout {
            name: &self.name,
            items,
        })
    }
}

/// One virtual host's own fields (encoded, without its routes) and its
/// routes' bytes.
pub type HostBytes<'a> = (Vec<u8>, Vec<&'a [u8]>);

impl Layout<'_> {
    /// Each route's bytes, in flat order (hosts in order, routes in order).
    pub fn routes(&self) -> Vec<&[u8]> {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Host(host) => Some(host),
                Item::Field(_) => None,
            })
            .flatten()
            .filter_map(|i| match i {
                HostItem::Route(r) => Some(*r),
                HostItem::Field(_) => None,
            })
            .collect()
    }

    /// The configuration's own fields without its virtual hosts (encoded),
    /// and per virtual host its own fields without its routes (encoded)
    /// and its routes' bytes: what a streamed rendering walks.
    pub fn parts(&self) -> (Vec<u8>, Vec<HostBytes<'_>>) {
        let mut envelope = Vec::new();
        let mut hosts = Vec::new();
        for item in &self.items {
            match item {
                Item::Field(f) => envelope.extend_from_slice(f),
                Item::Host(host) => {
                    let mut fields = Vec::new();
                    let mut routes = Vec::new();
                    for i in host {
                        match i {
                            HostItem::Route(r) => routes.push(*r),
                            HostItem::Field(f) => fields.extend_from_slice(f),
                        }
                    }
                    hosts.push((fields, routes));
                }
            }
        }
        (envelope, hosts)
    }

    /// The configuration with only the routes at flat positions `keep`
    /// (sorted); every other field and every host stays. With `keep`
    /// empty, the envelope: what the configuration is without its routes.
    pub fn subset(&self, keep: &[usize]) -> EncodedRouteConfiguration {
        let mut out = Vec::new();
        let mut pos = 0;
        let mut keep = keep.iter().peekable();
        for item in &self.items {
            match item {
                Item::Field(f) => out.extend_from_slice(f),
                Item::Host(host) => {
                    let mut body = Vec::new();
                    for i in host {
                        match i {
                            HostItem::Route(r) => {
                                if keep.peek() == Some(&&pos) {
                                    nested_head(VH_ROUTES, r.len(), &mut body);
                                    body.extend_from_slice(r);
                                    keep.next();
                                }
                                pos += 1;
                            }
                            HostItem::Field(f) => body.extend_from_slice(f),
                        }
                    }
                    nested_head(RC_VIRTUAL_HOSTS, body.len(), &mut out);
                    out.extend_from_slice(&body);
                }
            }
        }
        EncodedRouteConfiguration {
            name: self.name.to_string(),
            bytes: std::sync::Arc::new(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::route::v3::Route;
    use envoy_types::pb::google::protobuf::{Any, BoolValue};

    fn route(name: &str, filters: &[&str]) -> Route {
        let mut r = Route {
            name: name.into(),
            ..Default::default()
        };
        for k in filters {
            r.typed_per_filter_config.insert(
                (*k).into(),
                Any {
                    type_url: format!("type/{k}"),
                    value: vec![1, 2],
                },
            );
        }
        r
    }

    #[test]
    fn assembled_bytes_equal_the_canonical_encoding_of_what_they_decode_to() {
        let hosts = [
            (
                "a",
                vec!["*".to_string()],
                vec![route("r1", &["z", "b", "m"]), route("r2", &[])],
            ),
            ("b", vec!["b.example".into(), "b.example:*".into()], vec![]),
            ("c", vec!["c".into()], vec![route("r3", &["x"])]),
        ];
        let head = RouteConfiguration {
            name: "ns/gw/80".into(),
            ..Default::default()
        };
        let tail = RouteConfiguration {
            validate_clusters: Some(BoolValue { value: false }),
            ignore_port_in_host_matching: true,
            ..Default::default()
        };
        let parts = hosts
            .iter()
            .map(|(n, d, rs)| HostParts {
                head: VirtualHost {
                    name: (*n).into(),
                    domains: d.clone(),
                    ..Default::default()
                },
                routes: rs.iter().map(canonical::route).collect(),
                tail: VirtualHost::default(),
            })
            .collect();
        let encoded = assemble(&head, parts, &tail);
        let decoded = encoded.decode();
        let expected = RouteConfiguration {
            name: "ns/gw/80".into(),
            virtual_hosts: hosts
                .iter()
                .map(|(n, d, rs)| VirtualHost {
                    name: (*n).into(),
                    domains: d.clone(),
                    routes: rs.clone(),
                    ..Default::default()
                })
                .collect(),
            validate_clusters: Some(BoolValue { value: false }),
            ignore_port_in_host_matching: true,
            ..Default::default()
        };
        assert_eq!(decoded, expected);
        assert_eq!(encoded.name, "ns/gw/80");
        assert_eq!(
            encoded.bytes(),
            canonical::route_configuration(&expected).as_slice()
        );
        assert_eq!(EncodedRouteConfiguration::new(&expected), encoded);
    }

    #[test]
    fn a_layout_picks_routes_without_decoding() {
        let rc = RouteConfiguration {
            name: "rc".into(),
            virtual_hosts: vec![
                VirtualHost {
                    name: "a".into(),
                    domains: vec!["a".into()],
                    routes: vec![route("r0", &["f", "e"]), route("r1", &[])],
                    require_tls: 1,
                    ..Default::default()
                },
                VirtualHost {
                    name: "b".into(),
                    domains: vec!["b".into()],
                    routes: vec![route("r2", &[]), route("r3", &["x"])],
                    ..Default::default()
                },
            ],
            validate_clusters: Some(BoolValue { value: false }),
            ..Default::default()
        };
        let e = EncodedRouteConfiguration::new(&rc);
        let layout = e.layout().expect("our own bytes");
        let routes = layout.routes();
        assert_eq!(routes.len(), 4);
        for (bytes, r) in routes.iter().zip(rc.virtual_hosts.iter().flat_map(|v| &v.routes)) {
            assert_eq!(*bytes, canonical::route(r).as_slice());
        }
        // Keeping routes 1 and 2 (one in each host) equals the message
        // with only those, every other field kept.
        let mut expected = rc.clone();
        expected.virtual_hosts[0].routes.remove(0);
        expected.virtual_hosts[1].routes.pop();
        let picked = layout.subset(&[1, 2]);
        assert_eq!(picked.decode(), expected);
        assert_eq!(picked, EncodedRouteConfiguration::new(&expected));
        // The envelope: every host, no route.
        let mut envelope = rc.clone();
        envelope.virtual_hosts.iter_mut().for_each(|v| v.routes.clear());
        assert_eq!(layout.subset(&[]), EncodedRouteConfiguration::new(&envelope));
        assert_eq!(layout.subset(&[0, 1, 2, 3]), e);
    }

    #[test]
    fn malformed_bytes_have_no_layout() {
        for bytes in [
            vec![0x12, 0x05, 0x0a],
            vec![0x0b],
            vec![0xff; 11],
            vec![0x12, 0x02, 0x1a, 0x09],
        ] {
            let e = EncodedRouteConfiguration {
                name: "x".into(),
                bytes: std::sync::Arc::new(bytes),
            };
            assert!(e.layout().is_none(), "{e:?}");
        }
    }

    #[test]
    fn an_empty_configuration_round_trips() {
        let rc = RouteConfiguration {
            name: "x".into(),
            ..Default::default()
        };
        let e = EncodedRouteConfiguration::new(&rc);
        assert_eq!(e.decode(), rc);
        assert_eq!(
            assemble::<Vec<u8>>(&rc, Vec::new(), &RouteConfiguration::default()),
            e
        );
    }
}
