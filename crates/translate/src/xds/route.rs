//! RouteConfigurations, assembled from routes already encoded (see
//! `encoded`), with the Gateway- and listener-scope policies placed once
//! per scope (`ir::Scope`, decided by `policy::scope`): on the route
//! configuration or on a virtual host, never copied into routes.
//!
//! With a [`ConfigMemo`] (the incremental translator's, ARCHITECTURE.md §7),
//! a virtual host assembled from the very same routes (the same shared
//! bytes, `ir::RouteBytes`, compared by pointer), the same listener policy
//! and the same configuration retry policy as last time is not encoded
//! again: its payload is copied out of the previous configuration's bytes.
//! The memo is updated in place, per host in hostname order (see
//! [`ConfigMemo`]): an edit costs the changed hosts, one comparison per
//! unchanged host and one copy of the configuration's bytes.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::{RetryPolicy, RouteConfiguration, VirtualHost};
use envoy_types::pb::google::protobuf::BoolValue;

use super::canonical;
use super::encoded::{self, EncodedRouteConfiguration, Host, HostParts};
use crate::hostname;
use crate::ir::{Chain, RouteBytes, RouteStore};
use crate::policy::{Features, apply};
use crate::replacement::scope as fence;

/// One route configuration as last assembled, for the next assembly to
/// splice from: the configuration (its bytes shared with the output) and,
/// per virtual host assembled from routes (fenced hosts are always built),
/// in the configuration's order, what it was assembled from and where its
/// payload lies in those bytes.
///
/// The next assembly takes the memo by value and updates it in place: it
/// walks this call's hosts and the memo's side by side (both in hostname
/// order: the IR keeps its hosts in a `BTreeMap` by hostname), and a host
/// spliced moves its entry (hostname, key) into the new memo, only its
/// range updated. So an edit costs, per unchanged host, one name
/// comparison, one pointer comparison per route and no allocation, no
/// hashing and no copy of a name; only the hosts encoded again make a new
/// entry.
#[derive(Default)]
pub struct ConfigMemo {
    config: Option<EncodedRouteConfiguration>,
    hosts: Vec<HostMemo>,
    /// In the assembly that made this memo: hosts spliced, hosts encoded.
    pub spliced: usize,
    pub encoded: usize,
    /// In the assembly that made this memo: entries moved from the
    /// previous memo (not built again).
    pub carried: usize,
    /// In the assembly that made this memo: hosts merged into the IR
    /// (the others spliced as clean, `incremental::dirty_hosts`).
    pub merged: usize,
    /// The HTTP filters its chain's routes configured (a partial assembly
    /// that merges no clean work starts from them: `incremental::dirty_hosts`).
    http_filters: BTreeSet<String>,
}

impl ConfigMemo {
    /// Whether it holds its configuration's bytes (every host spliceable).
    pub fn has_bytes(&self) -> bool {
        self.config.is_some()
    }

    /// The HTTP filters of the chain it was assembled from.
    pub(crate) fn http_filters(&self) -> &BTreeSet<String> {
        &self.http_filters
    }
}

/// One virtual host of a [`ConfigMemo`]: its hostname (which gives its
/// name and domains), what its bytes are made of, and where its payload
/// lies in the configuration's bytes.
struct HostMemo {
    hostname: String,
    key: HostKey,
    range: Range<usize>,
}

/// Everything a non-fenced virtual host's bytes are made of besides its
/// hostname (the memo entry's, which also gives its domains) and its
/// route configuration's name (the memo's): its routes in order (shared
/// bytes: equal when the same allocation — the memo holds them, so an
/// address cannot be reused by another route meanwhile), its listener's
/// policy and the configuration's retry policy (its tail; shared by the
/// configuration's entries, as a `RetryPolicy` inline would make each
/// entry ~10 times larger and moving them the bulk of an edit).
struct HostKey {
    routes: Vec<RouteBytes>,
    features: Option<Arc<Features>>,
    retry: Option<Arc<RetryPolicy>>,
}

impl HostKey {
    fn same(
        &self,
        routes: &[RouteBytes],
        features: Option<&Arc<Features>>,
        retry: Option<&Arc<RetryPolicy>>,
    ) -> bool {
        self.routes.len() == routes.len()
            && self.routes.iter().zip(routes).all(|(a, b)| Arc::ptr_eq(a, b))
            && match (self.features.as_ref(), features) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || **a == **b,
                _ => false,
            }
            && match (self.retry.as_ref(), retry) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || **a == **b,
                _ => false,
            }
    }
}

/// The previous memo's hosts, walked in order beside this assembly's.
struct Cursor {
    hosts: std::iter::Peekable<std::vec::IntoIter<HostMemo>>,
}

impl Cursor {
    /// The entry for `hostname`, if the memo has one: entries of
    /// hostnames before it (hosts gone since) are dropped on the way.
    /// Hostnames come in ascending order; were they not, an entry would
    /// only be missed (the host encoded), never taken for another host:
    /// an entry is taken on an equal hostname only.
    fn find(&mut self, hostname: &str) -> Option<HostMemo> {
        while let Some(h) = self.hosts.peek() {
            match h.hostname.as_str().cmp(hostname) {
                std::cmp::Ordering::Less => {
                    self.hosts.next();
                }
                std::cmp::Ordering::Equal => return self.hosts.next(),
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }
}

pub fn build(chain: Chain, store: &mut RouteStore) -> EncodedRouteConfiguration {
    build_memo(chain, store, None, false, None).0
}

/// [`build`], splicing the virtual hosts `prior` holds unchanged (the memo
/// is consumed: its entries move into this assembly's); with `keep`, also
/// returns the memo of this assembly.
///
/// With `dirty` (a partial assembly, `incremental::dirty_hosts`), `chain`
/// holds only the hosts named there; every other host of `prior` is clean
/// and spliced as it is, in hostname order among the built ones, and the
/// prior entries of dirty hosts no longer served are dropped.
pub fn build_memo(
    chain: Chain,
    store: &mut RouteStore,
    prior: Option<ConfigMemo>,
    keep: bool,
    dirty: Option<&BTreeSet<String>>,
) -> (EncodedRouteConfiguration, Option<ConfigMemo>) {
    // The previous configuration's bytes stay alive (shared) until this
    // one is assembled from them.
    let (prior_config, prior_hosts) = match prior {
        Some(ConfigMemo {
            config: Some(config),
            hosts,
            ..
        }) => (Some(config), hosts),
        _ => (None, Vec::new()),
    };
    let http_filters = if keep {
        chain.http_filters.clone()
    } else {
        BTreeSet::new()
    };
    let prior_bytes: Option<&[u8]> = prior_config.as_ref().map(|c| c.bytes());
    // A partial assembly's chain holds only its dirty hosts: the others
    // come from the previous memo, so the lists are sized for both.
    let n = chain.virtual_hosts.len();
    let cap = n + if dirty.is_some() { prior_hosts.len() } else { 0 };
    let mut cursor = Cursor {
        hosts: prior_hosts.into_iter().peekable(),
    };
    // The memo's entries in host order (their ranges filled in once
    // assembled), and per host whether it has one.
    let mut entries: Vec<HostMemo> = Vec::with_capacity(if keep { cap } else { 0 });
    let mut has_entry: Vec<bool> = Vec::with_capacity(cap);
    let mut spliced = 0;
    let mut carried = 0;
    // One host's routes, taken from the store: reused across hosts, so a
    // spliced host allocates nothing.
    let mut scratch: Vec<RouteBytes> = Vec::new();
    let config_scope = chain.scope;
    let mut config_retry: Option<Arc<RetryPolicy>> = config_scope
        .features
        .as_ref()
        .and_then(|f| f.retry.clone())
        .map(Arc::new);
    // The previous memo's retry policy when equal: hosts then compare it
    // by address.
    if let (Some(new), Some(old)) = (
        config_retry.as_ref(),
        cursor.hosts.peek().and_then(|h| h.key.retry.as_ref()),
    ) && **new == **old
    {
        config_retry = Some(Arc::clone(old));
    }
    let mut header_edits = config_scope.features.as_deref().is_some_and(apply::edits_headers);
    // A listener's policy is the same on each of its hosts: its fields are
    // built once per listener and cloned (`Arc` identity).
    let mut host_tails: Vec<(*const crate::policy::Features, VirtualHost)> = Vec::new();
    // A fenced host switches off what the configuration's policy enables
    // (it must answer the 500, not that policy's 403 or 429).
    let config_filters: Vec<String> = config_scope
        .features
        .as_deref()
        .map(|f| apply::per_filter(f).into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default();
    let route_config = &chain.route_config;
    let mut hosts: Vec<Host<'_, RouteBytes>> = Vec::with_capacity(cap);
    let partial = dirty.zip(prior_bytes);
    // A partial assembly's clean hosts before hostname `$before`.
    macro_rules! splice_clean {
        ($before:expr) => {
            if let Some((dirty, prior)) = partial {
                Clean {
                    cursor: &mut cursor,
                    hosts: &mut hosts,
                    entries: &mut entries,
                    has_entry: &mut has_entry,
                    spliced: &mut spliced,
                    carried: &mut carried,
                }
                .splice_until($before, dirty, prior, keep);
            }
        };
    }
    for mut vh in chain.virtual_hosts.into_values() {
        splice_clean!(Some(&vh.hostname));
        if config_scope.fenced || vh.scope.fenced {
            has_entry.push(false);
            // Taken to free the store; a fenced scope serves none.
            for (_, r) in &vh.routes {
                store.take(*r);
            }
            let name = format!("{route_config}/{}", vh.hostname);
            let fenced = fence::fenced_host(&name, hostname::envoy_domains(&vh.hostname));
            let mut tail = VirtualHost::default();
            if !config_scope.fenced {
                crate::replacement::disable_filters(
                    &mut tail.typed_per_filter_config,
                    config_filters.iter().cloned(),
                );
            }
            hosts.push(Host::Parts(Box::new(HostParts {
                head: VirtualHost {
                    name: fenced.name,
                    domains: fenced.domains,
                    ..Default::default()
                },
                routes: fenced
                    .routes
                    .iter()
                    .map(|r| RouteBytes::from(canonical::route(r)))
                    .collect(),
                tail,
            })));
            continue;
        }
        if let Some(f) = &vh.scope.features {
            header_edits |= apply::edits_headers(f);
        }
        vh.routes.sort_by_key(|(order, _)| *order);
        scratch.clear();
        scratch.extend(vh.routes.iter().filter_map(|(_, r)| store.take(*r)));
        let prior_entry = prior_bytes.and_then(|_| cursor.find(&vh.hostname));
        let hit = prior_entry.and_then(|e| {
            let same = e
                .key
                .same(&scratch, vh.scope.features.as_ref(), config_retry.as_ref());
            let bytes = prior_bytes.and_then(|b| b.get(e.range.clone()));
            match bytes {
                Some(b) if same => Some((e, b)),
                _ => None,
            }
        });
        if let Some((e, bytes)) = hit {
            spliced += 1;
            has_entry.push(keep);
            if keep {
                carried += 1;
                entries.push(e);
            }
            hosts.push(Host::Encoded(bytes));
            continue;
        }
        let routes = std::mem::take(&mut scratch);
        let key = keep.then(|| HostKey {
            routes: routes.clone(),
            features: vh.scope.features.clone(),
            retry: config_retry.clone(),
        });
        let host = Host::Parts(Box::new(host_parts(
            route_config,
            &vh.hostname,
            routes,
            vh.scope.features.as_ref(),
            config_retry.as_deref(),
            &mut host_tails,
        )));
        has_entry.push(key.is_some());
        if let Some(key) = key {
            entries.push(HostMemo {
                hostname: vh.hostname,
                key,
                range: 0..0,
            });
        }
        hosts.push(host);
    }
    splice_clean!(None);
    let head = RouteConfiguration {
        name: chain.route_config.clone(),
        ..Default::default()
    };
    let mut tail = RouteConfiguration {
        // Routes may name clusters that do not exist (invalid backends
        // answer 500 through cluster_not_found_response_code).
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    };
    if config_scope.fenced {
        let host = fence::fenced_config_host(&chain.route_config);
        let hosts = vec![HostParts {
            head: VirtualHost {
                name: host.name,
                domains: host.domains,
                ..Default::default()
            },
            routes: host.routes.iter().map(canonical::route).collect(),
            tail: VirtualHost::default(),
        }];
        let config = encoded::assemble(&head, hosts, &tail);
        let memo = keep.then(|| ConfigMemo {
            config: Some(config.clone()),
            http_filters,
            ..Default::default()
        });
        return (config, memo);
    }
    if let Some(f) = &config_scope.features {
        apply::apply_config(f, &mut tail);
    }
    // Envoy applies header edits route, then host, then configuration, so
    // by default the least specific level wins a header; policies follow
    // rule > route > listener > Gateway.
    tail.most_specific_header_mutations_wins = header_edits;
    let (config, ranges) = encoded::assemble_hosts(&head, hosts, &tail);
    let encoded = entries.len() - carried;
    let memo = keep.then(|| {
        let mut next = entries.iter_mut();
        for (range, _) in ranges.into_iter().zip(&has_entry).filter(|(_, has)| **has) {
            if let Some(e) = next.next() {
                e.range = range;
            }
        }
        ConfigMemo {
            spliced,
            encoded,
            carried,
            merged: n,
            hosts: entries,
            config: Some(config.clone()),
            http_filters,
        }
    });
    (config, memo)
}

/// A partial assembly's state (see [`build_memo`]'s `dirty`) where it
/// splices clean hosts.
struct Clean<'a, 'p> {
    cursor: &'a mut Cursor,
    hosts: &'a mut Vec<Host<'p, RouteBytes>>,
    entries: &'a mut Vec<HostMemo>,
    has_entry: &'a mut Vec<bool>,
    spliced: &'a mut usize,
    carried: &'a mut usize,
}

impl<'p> Clean<'_, 'p> {
    /// Splices the prior entries before hostname `before` (all that are
    /// left: None) that are clean, as they are, and drops the dirty ones:
    /// the chain holds a dirty host's new version (found by hostname), or
    /// it is served no more.
    fn splice_until(&mut self, before: Option<&str>, dirty: &BTreeSet<String>, prior: &'p [u8], keep: bool) {
        while let Some(e) = self
            .cursor
            .hosts
            .next_if(|e| before.is_none_or(|b| e.hostname.as_str() < b))
        {
            if dirty.contains(e.hostname.as_str()) {
                continue;
            }
            let Some(bytes) = prior.get(e.range.clone()) else {
                continue;
            };
            *self.spliced += 1;
            self.has_entry.push(keep);
            if keep {
                *self.carried += 1;
                self.entries.push(e);
            }
            self.hosts.push(Host::Encoded(bytes));
        }
    }
}

/// A non-fenced virtual host's parts: its routes (in order), its
/// listener's policy and the configuration's retry policy (the tail, built
/// once per policy: `host_tails`).
fn host_parts(
    route_config: &str,
    hostname: &str,
    routes: Vec<RouteBytes>,
    features: Option<&Arc<Features>>,
    config_retry: Option<&RetryPolicy>,
    host_tails: &mut Vec<(*const Features, VirtualHost)>,
) -> HostParts<RouteBytes> {
    let mut tail = VirtualHost::default();
    if let Some(f) = features {
        let key = Arc::as_ptr(f);
        tail = match host_tails.iter().find(|(k, _)| *k == key) {
            Some((_, t)) => t.clone(),
            None => {
                apply::apply_host(f, &mut tail);
                host_tails.push((key, tail.clone()));
                tail
            }
        };
    }
    if tail.retry_policy.is_none() {
        tail.retry_policy = config_retry.cloned();
    }
    HostParts {
        head: VirtualHost {
            name: format!("{route_config}/{hostname}"),
            domains: hostname::envoy_domains(hostname),
            ..Default::default()
        },
        routes,
        tail,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use envoy_types::pb::envoy::config::route::v3::Route;

    use super::*;
    use crate::ir::{RouteOrder, Scope, VirtualHost as IrHost};
    use crate::route::matches::Rank;

    /// A chain of one HTTP port whose hosts each serve the given routes
    /// (shared bytes, so the same `RouteBytes` is "the same route").
    fn chain(hosts: &[(&str, &[&RouteBytes])], store: &mut RouteStore) -> Chain {
        let mut virtual_hosts = BTreeMap::new();
        for (i, (hostname, routes)) in hosts.iter().enumerate() {
            let refs = store.add_shared(routes.iter().map(|r| Some(RouteBytes::clone(r))).collect(), 1);
            let routes = refs
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(rule, r)| {
                    let order = RouteOrder {
                        rank: Rank::of(2, 1, 0, 0),
                        route: i,
                        rule,
                        match_index: 0,
                    };
                    (order, r)
                })
                .collect();
            virtual_hosts.insert(
                hostname.to_string(),
                IrHost {
                    hostname: hostname.to_string(),
                    owner_specificity: 0,
                    owner: "l".into(),
                    routes,
                    scope: Scope::default(),
                },
            );
        }
        Chain {
            route_config: "ns/gw/80".into(),
            server_names: Vec::new(),
            certificates: Vec::new(),
            virtual_hosts,
            http_filters: BTreeSet::new(),
            scope: Scope::default(),
            tls13_only: false,
        }
    }

    fn route(name: &str) -> RouteBytes {
        RouteBytes::from(canonical::route(&Route {
            name: name.into(),
            ..Default::default()
        }))
    }

    /// An edit that adds a host (sorting before the others, as the
    /// propagation bench's new routes do), changes one and removes one:
    /// the unchanged hosts are spliced and their memo entries moved into
    /// the new memo (the same hostname allocation, not a copy), only the
    /// changed and added hosts encoded, and the bytes equal an assembly
    /// without memo.
    #[test]
    fn an_edit_moves_the_unchanged_hosts_entries_and_encodes_only_the_changed_ones() {
        let (a, b, c, d, c2, new) = (
            route("a"),
            route("b"),
            route("c"),
            route("d"),
            route("c2"),
            route("new"),
        );
        let mut store = RouteStore::default();
        let first = chain(
            &[
                ("a.example", &[&a]),
                ("b.example", &[&b, &d]),
                ("c.example", &[&c]),
                ("d.example", &[&d]),
            ],
            &mut store,
        );
        let (_, memo) = build_memo(first, &mut store, Some(ConfigMemo::default()), true, None);
        let memo = memo.expect("kept");
        assert_eq!((memo.spliced, memo.encoded, memo.carried), (0, 4, 0));
        let names: Vec<*const u8> = memo.hosts.iter().map(|h| h.hostname.as_ptr()).collect();

        let hosts: &[(&str, &[&RouteBytes])] = &[
            ("0.example", &[&new]),
            ("a.example", &[&a]),
            ("b.example", &[&b, &d]),
            ("c.example", &[&c2]),
        ];
        let mut store = RouteStore::default();
        let next = chain(hosts, &mut store);
        let (config, memo) = build_memo(next, &mut store, Some(memo), true, None);
        let memo = memo.expect("kept");
        assert_eq!((memo.spliced, memo.encoded, memo.carried), (2, 2, 2));
        let hostnames: Vec<&str> = memo.hosts.iter().map(|h| h.hostname.as_str()).collect();
        assert_eq!(hostnames, ["0.example", "a.example", "b.example", "c.example"]);
        // a.example and b.example: the very entries of the first memo.
        assert_eq!(memo.hosts[1].hostname.as_ptr(), names[0]);
        assert_eq!(memo.hosts[2].hostname.as_ptr(), names[1]);
        // Each entry's range is its host's payload in the new bytes.
        for h in &memo.hosts {
            let vh =
                <VirtualHost as prost::Message>::decode(&config.bytes()[h.range.clone()]).expect("a host");
            assert_eq!(vh.name, format!("ns/gw/80/{}", h.hostname));
        }

        let mut store = RouteStore::default();
        let full = build(chain(hosts, &mut store), &mut store);
        assert_eq!(config, full);

        // Once more with nothing changed: every host spliced, none encoded.
        let mut store = RouteStore::default();
        let again = chain(hosts, &mut store);
        let (config, memo) = build_memo(again, &mut store, Some(memo), true, None);
        let memo = memo.expect("kept");
        assert_eq!((memo.spliced, memo.encoded, memo.carried), (4, 0, 4));
        assert_eq!(config, full);
    }
}
