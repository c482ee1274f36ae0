//! From an untyped document to a typed object: dispatch on `apiVersion` and
//! `kind`, typed parse with field paths, defaulting, and the duplicate check.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use gateway_api::experimental::{
    gatewayclasses::GatewayClass,
    gateways::{Gateway, GatewayListeners},
    grpcroutes::{GrpcRoute, GrpcRouteParentRefs, GrpcRouteRules},
    httproutes::{HttpRoute, HttpRouteParentRefs, HttpRouteRules},
    listenersets::{ListenerSet, ListenerSetListeners},
    referencegrants::ReferenceGrant,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::tree::{Node, NodeValue, Segment, render_path, segments};
use crate::gateway_parameters::GatewayParameters;
use crate::httpproxy::{HttpProxy, TlsCertificateDelegation};
use crate::policy::{GatewayExtension, TrafficPolicy, TrafficPolicySpec};
use crate::{Diagnostic, ExtensionObject, FieldStep, Inputs, Source, Sourced, Unreadable};

/// The Gateway API group; every served version shares one schema here.
const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
const GATEWAY_VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha2"];
/// How deeply `List`s may nest inside `List`s.
const MAX_LIST_DEPTH: usize = 4;

/// A kind the loader turns into a typed object.
pub(crate) trait Object: Serialize + DeserializeOwned + Sized + Send + Sync + 'static {
    const KIND: &'static str;
    const NAMESPACED: bool;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    fn bucket(inputs: &mut Inputs) -> &mut Vec<Sourced<Self>>;
    /// Kind-specific normalisation after a successful parse.
    fn normalize(&mut self) {}
    /// For kinds that must fail closed: what is still known of an object
    /// whose typed parse failed with `error` (`field: reason`).
    fn fallback(_value: &Value, _error: &str) -> Option<Self> {
        None
    }
}

/// Most kinds have nothing to keep when their parse fails.
fn no_fallback<T>(_value: &Value, _error: &str) -> Option<T> {
    None
}

macro_rules! object {
    ($ty:ty, $kind:literal, $namespaced:literal, $field:ident, $fallback:ident) => {
        impl Object for $ty {
            const KIND: &'static str = $kind;
            const NAMESPACED: bool = $namespaced;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn bucket(inputs: &mut Inputs) -> &mut Vec<Sourced<Self>> {
                &mut inputs.$field
            }
            fn fallback(value: &Value, error: &str) -> Option<Self> {
                $fallback(value, error)
            }
        }
    };
    ($ty:ty, $kind:literal, $namespaced:literal, $field:ident) => {
        object!($ty, $kind, $namespaced, $field, no_fallback);
    };
}

object!(GatewayClass, "GatewayClass", false, gateway_classes);
object!(Gateway, "Gateway", true, gateways);
object!(ListenerSet, "ListenerSet", true, listener_sets);
object!(HttpRoute, "HTTPRoute", true, http_routes);
object!(GrpcRoute, "GRPCRoute", true, grpc_routes);
object!(ReferenceGrant, "ReferenceGrant", true, reference_grants);
object!(Namespace, "Namespace", false, namespaces);
object!(Service, "Service", true, services);
object!(EndpointSlice, "EndpointSlice", true, endpoint_slices);

object!(
    TrafficPolicy,
    "TrafficPolicy",
    true,
    traffic_policies,
    traffic_policy_fallback
);
object!(
    GatewayExtension,
    "GatewayExtension",
    true,
    gateway_extensions,
    gateway_extension_fallback
);

object!(
    GatewayParameters,
    "GatewayParameters",
    true,
    gateway_parameters,
    gateway_parameters_fallback
);

object!(HttpProxy, "HTTPProxy", true, http_proxies, http_proxy_fallback);
object!(
    TlsCertificateDelegation,
    "TLSCertificateDelegation",
    true,
    tls_certificate_delegations
);

/// An HTTPProxy whose spec does not parse (an unknown field included: see
/// `crate::httpproxy`) keeps its identity, so that its status says why it
/// is invalid and what its parents route to it is fenced.
fn http_proxy_fallback(value: &Value, error: &str) -> Option<HttpProxy> {
    let metadata: ObjectMeta = serde_json::from_value(value.get("metadata")?.clone()).ok()?;
    // A root stays a root (its FQDN claimed, its children not orphaned by
    // a typo elsewhere in it going unnoticed).
    let fqdn = value.pointer("/spec/virtualhost/fqdn").and_then(Value::as_str);
    let spec = crate::httpproxy::HttpProxySpec {
        virtualhost: fqdn.map(|fqdn| crate::httpproxy::VirtualHost {
            fqdn: fqdn.to_string(),
            tls: None,
        }),
        ..Default::default()
    };
    Some(HttpProxy {
        metadata,
        spec,
        load_errors: vec![error.to_string()],
        ..Default::default()
    })
}

/// A TrafficPolicy whose spec does not parse keeps its identity and
/// targets, so that its targets fail closed.
fn traffic_policy_fallback(value: &Value, error: &str) -> Option<TrafficPolicy> {
    let metadata: ObjectMeta = serde_json::from_value(value.get("metadata")?.clone()).ok()?;
    let spec = value.get("spec");
    let list = |key: &str| spec.and_then(|s| s.get(key)).cloned().unwrap_or(Value::Null);
    let target_refs = serde_json::from_value(list("targetRefs")).unwrap_or_default();
    let target_selectors = serde_json::from_value(list("targetSelectors")).unwrap_or_default();
    Some(TrafficPolicy {
        metadata,
        spec: TrafficPolicySpec {
            target_refs,
            target_selectors,
            ..Default::default()
        },
        load_errors: vec![error.to_string()],
        ..Default::default()
    })
}

/// A GatewayExtension that does not parse is present but invalid: the
/// policies using it fail closed and say why.
fn gateway_extension_fallback(value: &Value, error: &str) -> Option<GatewayExtension> {
    let metadata: ObjectMeta = serde_json::from_value(value.get("metadata")?.clone()).ok()?;
    Some(GatewayExtension {
        metadata,
        load_errors: vec![error.to_string()],
        ..Default::default()
    })
}

/// GatewayParameters that do not parse are present but invalid: the
/// GatewayClass naming them says why (`InvalidParameters`).
fn gateway_parameters_fallback(value: &Value, error: &str) -> Option<GatewayParameters> {
    let metadata: ObjectMeta = serde_json::from_value(value.get("metadata")?.clone()).ok()?;
    Some(GatewayParameters {
        metadata,
        load_errors: vec![error.to_string()],
        ..Default::default()
    })
}

impl Object for Secret {
    const KIND: &'static str = "Secret";
    const NAMESPACED: bool = true;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn bucket(inputs: &mut Inputs) -> &mut Vec<Sourced<Self>> {
        &mut inputs.secrets
    }
    /// `stringData` is write-only: merged into `data` (winning on conflicts,
    /// as the API server does) and then cleared.
    fn normalize(&mut self) {
        if let Some(string_data) = self.string_data.take() {
            let data = self.data.get_or_insert_with(Default::default);
            for (key, value) in string_data {
                data.insert(key, ByteString(value.into_bytes()));
            }
        }
    }
}

/// Collects objects and diagnostics; keeps the first of duplicate objects.
#[derive(Default)]
pub(crate) struct Sink {
    pub(crate) inputs: Inputs,
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// The duplicate check of every other kind: each key names the first
    /// object's position in its bucket (`T::bucket`, which only grows
    /// while the sink loads).
    seen: HashMap<SeenKey, usize>,
    /// (group, kind) of the extension kinds to load (`super::Options`).
    pub(crate) extension_kinds: BTreeSet<(String, String)>,
    /// The duplicate check of extension objects: (group, kind, ns, name).
    seen_extensions: HashMap<(String, String, String, String), Source>,
    /// Decode known kinds straight from the tree (`decode.rs`) instead of
    /// through `serde_json::Value`: set on the fast path's scratch sink for
    /// trees without duplicate keys. A document the direct decode cannot
    /// take sets `bailed`, and the caller reads it again the reference way.
    pub(crate) direct: bool,
    pub(crate) bailed: bool,
    /// A scratch sink of one document (not a `List`): it holds at most one
    /// object, so the duplicate check is left to the sink it joins.
    single: bool,
}

/// What the duplicate check reads of an object: its namespace and name
/// (an absent namespace is the empty one).
trait Named: Send + Sync {
    fn namespace_name(&self) -> (&str, &str);
}

impl<T: Object> Named for T {
    fn namespace_name(&self) -> (&str, &str) {
        let meta = self.meta();
        (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }
}

/// A key of the duplicate check: the kind and the object itself (shared),
/// hashed and compared by namespace and name. Merging every file's objects
/// into a snapshot then copies no name, namespace or source per object
/// (`provider` merges on every edit).
struct SeenKey {
    kind: &'static str,
    object: Arc<dyn Named>,
}

impl std::hash::Hash for SeenKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.kind, self.object.namespace_name()).hash(state);
    }
}

impl PartialEq for SeenKey {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.object.namespace_name() == other.object.namespace_name()
    }
}

impl Eq for SeenKey {}

impl Sink {
    pub(crate) fn with_options(options: &super::Options) -> Self {
        Self {
            extension_kinds: options.extension_kinds.clone(),
            ..Self::default()
        }
    }

    /// An empty sink with the same options, for loading one document on
    /// its own (the loader's fast path, see `loader.rs`).
    pub(crate) fn scratch(&self, direct: bool) -> Self {
        Self {
            extension_kinds: self.extension_kinds.clone(),
            direct,
            single: true,
            ..Self::default()
        }
    }

    pub(crate) fn add<T: Object>(&mut self, source: Source, object: T, unreadable: Vec<Unreadable>) {
        self.add_shared(source, Arc::new(object), unreadable);
    }

    /// [`Sink::add`] of an object already shared (taken from another load
    /// or from a [`super::DocumentCache`]): the entry points at the same
    /// allocation, no copy is made.
    pub(crate) fn add_shared<T: Object>(
        &mut self,
        source: Source,
        object: Arc<T>,
        unreadable: Vec<Unreadable>,
    ) {
        if self.single {
            T::bucket(&mut self.inputs).push(Sourced {
                source,
                object,
                unreadable,
            });
            return;
        }
        let key = SeenKey {
            kind: T::KIND,
            object: object.clone(),
        };
        if let Some(&first) = self.seen.get(&key) {
            let (namespace, name) = key.object.namespace_name();
            let label = object_label(T::KIND, T::NAMESPACED, Some(namespace), name);
            let at = T::bucket(&mut self.inputs)
                .get(first)
                .map(|f| format!(" at {}", f.source))
                .unwrap_or_default();
            let message =
                format!("duplicate object: {label} is already defined{at}; this definition is ignored");
            self.diagnostics
                .push(Diagnostic::warning(Some(label), Some(&source), message));
            return;
        }
        let bucket = T::bucket(&mut self.inputs);
        self.seen.insert(key, bucket.len());
        bucket.push(Sourced {
            source,
            object,
            unreadable,
        });
    }

    /// Adds an extension object (first of the same group, kind, namespace
    /// and name wins, as for every kind).
    pub(crate) fn add_extension(&mut self, source: Source, object: Arc<ExtensionObject>) {
        let key = (
            object.group().to_string(),
            object.kind.clone(),
            object.namespace.clone(),
            object.name.clone(),
        );
        if let Some(first) = self.seen_extensions.get(&key) {
            let label = object_label(&object.kind, true, Some(&key.2), &key.3);
            let message = format!(
                "duplicate object: {label} is already defined at {first}; this definition is ignored"
            );
            self.diagnostics
                .push(Diagnostic::warning(Some(label), Some(&source), message));
            return;
        }
        self.seen_extensions.insert(key, source.clone());
        self.inputs.extension_resources.push(Sourced {
            source,
            object,
            unreadable: Vec::new(),
        });
    }

    /// Adds every object of `inputs` in order (with the duplicate check).
    pub(crate) fn add_all(&mut self, inputs: Inputs) {
        fn each<T: Object>(sink: &mut Sink, objects: Vec<Sourced<T>>) {
            T::bucket(&mut sink.inputs).reserve(objects.len());
            for Sourced {
                source,
                object,
                unreadable,
            } in objects
            {
                sink.add_shared(source, object, unreadable);
            }
        }
        // Sized once: growing would hash every key again.
        self.seen.reserve(inputs.len());
        let Inputs {
            gateway_classes,
            gateways,
            listener_sets,
            http_routes,
            grpc_routes,
            reference_grants,
            namespaces,
            services,
            endpoint_slices,
            secrets,
            traffic_policies,
            gateway_extensions,
            gateway_parameters,
            extension_resources,
            http_proxies,
            tls_certificate_delegations,
            provisioned_addresses,
        } = inputs;
        if provisioned_addresses.is_some() {
            self.inputs.provisioned_addresses = provisioned_addresses;
        }
        each(self, gateway_classes);
        each(self, gateways);
        each(self, listener_sets);
        each(self, http_routes);
        each(self, grpc_routes);
        each(self, reference_grants);
        each(self, namespaces);
        each(self, services);
        each(self, endpoint_slices);
        each(self, secrets);
        each(self, traffic_policies);
        each(self, gateway_extensions);
        each(self, gateway_parameters);
        for e in extension_resources {
            self.add_extension(e.source, e.object);
        }
        each(self, http_proxies);
        each(self, tls_certificate_delegations);
    }

    fn error(&mut self, object: Option<String>, source: &Source, message: impl Into<String>) {
        self.diagnostics
            .push(Diagnostic::error(object, Some(source), message));
    }

    fn warning(&mut self, object: Option<String>, source: &Source, message: impl Into<String>) {
        self.diagnostics
            .push(Diagnostic::warning(object, Some(source), message));
    }
}

/// `Kind namespace/name`, or `Kind name` for cluster-scoped kinds. A part
/// holding a `/` or a space is quoted (`Service a/"b/c"`), so that the
/// label names one object.
fn object_label(kind: &str, namespaced: bool, namespace: Option<&str>, name: &str) -> String {
    let part = |s: &str| {
        if s.contains(['/', ' ', '"']) {
            format!("{s:?}")
        } else {
            s.to_string()
        }
    };
    if namespaced {
        let namespace = namespace.filter(|ns| !ns.is_empty()).unwrap_or("default");
        format!("{kind} {}/{}", part(namespace), part(name))
    } else {
        format!("{kind} {}", part(name))
    }
}

/// Which typed object a document becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    GatewayClass,
    Gateway,
    ListenerSet,
    HttpRoute,
    GrpcRoute,
    ReferenceGrant,
    Namespace,
    Service,
    Secret,
    EndpointSlice,
    TrafficPolicy,
    GatewayExtension,
    GatewayParameters,
    HttpProxy,
    TlsCertificateDelegation,
}

impl Known {
    fn resolve(api_version: &str, kind: &str) -> Option<Known> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        match group {
            GATEWAY_GROUP if GATEWAY_VERSIONS.contains(&version) => match kind {
                "GatewayClass" => Some(Known::GatewayClass),
                "Gateway" => Some(Known::Gateway),
                "ListenerSet" => Some(Known::ListenerSet),
                "HTTPRoute" => Some(Known::HttpRoute),
                "GRPCRoute" => Some(Known::GrpcRoute),
                "ReferenceGrant" => Some(Known::ReferenceGrant),
                _ => None,
            },
            "" if version == "v1" => match kind {
                "Namespace" => Some(Known::Namespace),
                "Service" => Some(Known::Service),
                "Secret" => Some(Known::Secret),
                _ => None,
            },
            crate::policy::GROUP if version == crate::policy::VERSION => match kind {
                "TrafficPolicy" => Some(Known::TrafficPolicy),
                "GatewayExtension" => Some(Known::GatewayExtension),
                "GatewayParameters" => Some(Known::GatewayParameters),
                _ => None,
            },
            crate::httpproxy::GROUP if version == crate::httpproxy::VERSION => match kind {
                "HTTPProxy" => Some(Known::HttpProxy),
                "TLSCertificateDelegation" => Some(Known::TlsCertificateDelegation),
                _ => None,
            },
            "discovery.k8s.io" if version == "v1" && kind == "EndpointSlice" => Some(Known::EndpointSlice),
            _ => None,
        }
    }

    fn namespaced(self) -> bool {
        !matches!(self, Known::GatewayClass | Known::Namespace)
    }
}

/// A string field of a mapping node: `Ok(None)` when absent or null,
/// `Err(type)` when present with another type.
fn string_field(node: Option<&Node>) -> Result<Option<&str>, &'static str> {
    match node {
        None => Ok(None),
        Some(Node {
            value: NodeValue::Null,
            ..
        }) => Ok(None),
        Some(Node {
            value: NodeValue::Str(s),
            ..
        }) => Ok(Some(s.as_str())),
        Some(other) => Err(other.type_name()),
    }
}

/// Loads one document (or one `List` item) rooted at `root`, whose source
/// line is `line`.
pub(crate) fn load_document(sink: &mut Sink, file: &str, root: &Node, line: usize, depth: usize) {
    let source = Source::new(file, line);
    if matches!(root.value, NodeValue::Null) {
        return; // an empty document
    }
    if !matches!(root.value, NodeValue::Map(_)) {
        sink.error(
            None,
            &source,
            format!(
                "expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
                root.type_name()
            ),
        );
        return;
    }

    let metadata = root.get("metadata");
    let name = string_field(metadata.and_then(|m| m.get("name"))).ok().flatten();
    let namespace = string_field(metadata.and_then(|m| m.get("namespace")))
        .ok()
        .flatten();
    let name = name.filter(|n| !n.is_empty());

    let api_version = string_field(root.get("apiVersion"));
    let kind = string_field(root.get("kind"));
    // A label for messages before the kind is known.
    let loose_label = |kind: &str| {
        name.map(|name| match namespace {
            Some(ns) if !ns.is_empty() => format!("{kind} {ns}/{name}"),
            _ => format!("{kind} {name}"),
        })
    };

    let mut header_ok = true;
    for (field, value) in [("apiVersion", &api_version), ("kind", &kind)] {
        match value {
            Ok(Some(s)) if !s.is_empty() => {}
            Ok(_) => {
                let object = kind.ok().flatten().and_then(loose_label);
                let at = Source::new(file, root.line_at(&[Segment::Key(field.into())], line));
                sink.error(object, &at, format!("{field}: missing required field"));
                header_ok = false;
            }
            Err(found) => {
                let object = kind.ok().flatten().and_then(loose_label);
                let at = Source::new(file, root.line_at(&[Segment::Key(field.into())], line));
                sink.error(object, &at, format!("{field}: expected a string, found {found}"));
                header_ok = false;
            }
        }
    }
    let (Ok(Some(api_version)), Ok(Some(kind)), true) = (api_version, kind, header_ok) else {
        return;
    };

    if is_list(kind, root) {
        load_list(sink, file, root, line, depth, kind);
        return;
    }

    let Some(known) = Known::resolve(api_version, kind) else {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        if sink
            .extension_kinds
            .contains(&(group.to_string(), kind.to_string()))
        {
            load_extension(sink, file, root, line, api_version, kind, name, namespace);
            return;
        }
        sink.warning(
            loose_label(kind),
            &source,
            format!("unknown kind {api_version}/{kind}; ignored"),
        );
        return;
    };

    let name_node = metadata.and_then(|m| m.get("name"));
    let name_missing = matches!(
        name_node.map(|n| &n.value),
        None | Some(NodeValue::Null) | Some(NodeValue::Str(_))
    ) && name.is_none();
    if name_missing {
        let path = [Segment::Key("metadata".into()), Segment::Key("name".into())];
        let at = Source::new(file, root.line_at(&path, line));
        let message = if matches!(name_node.map(|n| &n.value), Some(NodeValue::Str(_))) {
            "metadata.name: must not be empty"
        } else {
            "metadata.name: missing required field"
        };
        sink.error(None, &at, message);
        return;
    }

    let label = name.map(|name| object_label(kind, known.namespaced(), namespace, name));
    if !names_are_valid(
        sink,
        file,
        root,
        line,
        known,
        kind,
        label.as_deref(),
        name,
        namespace,
    ) {
        return;
    }
    let doc = Document {
        file,
        root,
        line,
        label,
    };
    match known {
        Known::GatewayClass => doc.load::<GatewayClass>(sink),
        Known::Gateway => doc.load::<Gateway>(sink),
        Known::ListenerSet => doc.load::<ListenerSet>(sink),
        Known::HttpRoute => doc.load::<HttpRoute>(sink),
        Known::GrpcRoute => doc.load::<GrpcRoute>(sink),
        Known::ReferenceGrant => doc.load::<ReferenceGrant>(sink),
        Known::Namespace => doc.load::<Namespace>(sink),
        Known::Service => doc.load::<Service>(sink),
        Known::Secret => doc.load::<Secret>(sink),
        Known::EndpointSlice => doc.load::<EndpointSlice>(sink),
        Known::TrafficPolicy => doc.load::<TrafficPolicy>(sink),
        Known::GatewayExtension => doc.load::<GatewayExtension>(sink),
        Known::GatewayParameters => doc.load::<GatewayParameters>(sink),
        Known::HttpProxy => doc.load::<HttpProxy>(sink),
        Known::TlsCertificateDelegation => doc.load::<TlsCertificateDelegation>(sink),
    }
}

/// A document of a registered extension kind: kept as JSON (the extension
/// server reads it, portcullis does not know its schema), with the same
/// name rules as every namespaced kind: generated Envoy names and the
/// reference resolution (`extensionRef` in the route's namespace) rely on
/// them.
#[allow(clippy::too_many_arguments)]
fn load_extension(
    sink: &mut Sink,
    file: &str,
    root: &Node,
    line: usize,
    api_version: &str,
    kind: &str,
    name: Option<&str>,
    namespace: Option<&str>,
) {
    let source = Source::new(file, line);
    let Some(name) = name else {
        let path = [Segment::Key("metadata".into()), Segment::Key("name".into())];
        let at = Source::new(file, root.line_at(&path, line));
        sink.error(None, &at, "metadata.name: missing required field");
        return;
    };
    let namespace = namespace.filter(|ns| !ns.is_empty()).unwrap_or("default");
    let label = object_label(kind, true, Some(namespace), name);
    for (field, value, format) in [
        ("name", name, NameFormat::Dns1123Subdomain),
        ("namespace", namespace, NameFormat::Dns1123Label),
    ] {
        if !format.accepts(value) {
            let path = [Segment::Key("metadata".into()), Segment::Key(field.into())];
            let at = Source::new(file, root.line_at(&path, line));
            sink.error(
                Some(label.clone()),
                &at,
                format!(
                    "metadata.{field}: {value:?} is not a valid {kind} {field}: it must be {}; the {kind} is ignored",
                    format.describe()
                ),
            );
            return;
        }
    }
    let mut value = root.to_json();
    if let Value::Object(map) = &mut value {
        map.remove("status");
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            meta.insert("namespace".into(), Value::String(namespace.into()));
        }
    }
    let json = match serde_json::to_vec(&value) {
        Ok(json) => json,
        Err(error) => {
            sink.error(
                Some(label),
                &source,
                format!("cannot be encoded as JSON: {error}; ignored"),
            );
            return;
        }
    };
    sink.add_extension(
        source,
        Arc::new(ExtensionObject {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            json: json.into(),
        }),
    );
}

/// `kind: List` (kubectl) or a typed list such as `ServiceList` with `items`.
fn is_list(kind: &str, root: &Node) -> bool {
    kind == "List"
        || (kind.ends_with("List") && matches!(root.get("items").map(|n| &n.value), Some(NodeValue::Seq(_))))
}

fn load_list(sink: &mut Sink, file: &str, root: &Node, line: usize, depth: usize, kind: &str) {
    let source = Source::new(file, line);
    if depth >= MAX_LIST_DEPTH {
        sink.error(
            None,
            &source,
            format!("{kind} nested more than {MAX_LIST_DEPTH} levels deep; ignored"),
        );
        return;
    }
    match root.get("items") {
        None
        | Some(Node {
            value: NodeValue::Null,
            ..
        }) => {}
        Some(Node {
            value: NodeValue::Seq(items),
            ..
        }) => {
            for item in items {
                let item_line = if item.line > 0 { item.line } else { line };
                load_document(sink, file, item, item_line, depth + 1);
            }
        }
        Some(other) => {
            let at = Source::new(file, root.line_at(&[Segment::Key("items".into())], line));
            sink.error(
                None,
                &at,
                format!("items: expected a list, found {}", other.type_name()),
            );
        }
    }
}

/// A document of a known kind, ready for its typed parse.
struct Document<'a> {
    file: &'a str,
    root: &'a Node,
    line: usize,
    label: Option<String>,
}

impl Document<'_> {
    fn at(&self, path: &[Segment]) -> Source {
        Source::new(self.file, self.root.line_at(path, self.line))
    }

    fn load<T: Object>(self, sink: &mut Sink) {
        if sink.direct {
            self.load_direct::<T>(sink);
            return;
        }
        let mut value = self.root.to_json();
        if let Value::Object(map) = &mut value {
            // Status is computed by portcullis, never read from the input.
            map.remove("status");
        }
        if matches!(T::KIND, "HTTPRoute" | "GRPCRoute") {
            self.singular_use_default_gateway(sink, &mut value);
        }

        // A listener with a value that does not read is kept as an inert
        // listener the translator refuses (see `Document::neutralise_listeners`);
        // a route's unreadable hostname or parent reference is neutralised
        // (see `Document::neutralise_route_head`).
        // Unreadable values outside route rules (listeners, a route's
        // hostnames and parentRefs), reported as they are found.
        let mut listeners_found = Vec::new();
        match T::KIND {
            "Gateway" => {
                self.neutralise_listeners::<GatewayListeners>(sink, &mut value, &mut listeners_found)
            }
            "ListenerSet" => {
                self.neutralise_listeners::<ListenerSetListeners>(sink, &mut value, &mut listeners_found)
            }
            _ => {}
        }

        // Routes keep every rule that reads: a value inside a rule that does
        // not read is neutralised and recorded (see `Unreadable`), and the
        // parse is retried, so that every such value is found and the route
        // is still bound, its bad rule fenced, instead of dropped.
        let mut neutralised = Neutralised::default();
        // Each rule on its own first: one parse per rule and one more per
        // unreadable value of it, rather than a parse of the whole route
        // per value.
        let rules = value
            .pointer("/spec/rules")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        for rule in 0..rules {
            match T::KIND {
                "HTTPRoute" => self.neutralise_rule::<HttpRouteRules>(&mut value, rule, &mut neutralised),
                "GRPCRoute" => self.neutralise_rule::<GrpcRouteRules>(&mut value, rule, &mut neutralised),
                _ => {}
            }
        }
        match T::KIND {
            "HTTPRoute" => self.neutralise_route_head::<HttpRouteParentRefs>(
                sink,
                &mut value,
                &mut neutralised,
                &mut listeners_found,
            ),
            "GRPCRoute" => self.neutralise_route_head::<GrpcRouteParentRefs>(
                sink,
                &mut value,
                &mut neutralised,
                &mut listeners_found,
            ),
            _ => {}
        }
        let tolerant = matches!(T::KIND, "HTTPRoute" | "GRPCRoute");
        let mut attempts = 0usize;
        let parsed = loop {
            attempts += 1;
            match serde_path_to_error::deserialize::<_, T>(&value) {
                Ok(object) => break Ok(object),
                Err(error) => {
                    let (path, reason) = describe(&error);
                    if tolerant
                        && attempts <= MAX_UNREADABLE
                        && self.absorb(&mut value, &path, &reason, &mut neutralised)
                    {
                        continue;
                    }
                    break Err((neutralised.original(&path), reason));
                }
            }
        };
        // In the order of the input, each on the line of its value.
        neutralised
            .found
            .sort_by(|a, b| (a.1, &a.0.path).cmp(&(b.1, &b.0.path)));
        for (unreadable, line) in &neutralised.found {
            let rule = unreadable.rule;
            let message = match parsed {
                Ok(_) => format!(
                    "{unreadable}; rule {rule} is replaced with a 500 (Accepted=False, UnsupportedValue)"
                ),
                Err(_) => unreadable.to_string(),
            };
            sink.error(self.label.clone(), &Source::new(self.file, *line), message);
        }
        let (mut object, fell_back): (T, bool) = match parsed {
            Ok(object) => (object, false),
            Err((path, reason)) => {
                let at = self.at(&path);
                // serde quotes the offending value ("invalid type: string
                // \"…\""); a Secret's values are key material, and
                // diagnostics reach status, logs and the admin API.
                let reason = if T::KIND == "Secret" {
                    without_values(&reason)
                } else {
                    reason
                };
                let rendered = render_path(&path);
                let message = if rendered.is_empty() {
                    reason
                } else {
                    format!("{rendered}: {reason}")
                };
                match T::fallback(&value, &message) {
                    // Kept (invalid) so that what depends on it fails closed.
                    Some(object) => {
                        sink.error(
                            self.label.clone(),
                            &at,
                            format!("{message}; the {} is invalid", T::KIND),
                        );
                        (object, true)
                    }
                    None => {
                        sink.error(self.label.clone(), &at, message);
                        return;
                    }
                }
            }
        };

        if let (false, Ok(parsed)) = (fell_back, serde_json::to_value(&object)) {
            let mut unknown = Vec::new();
            unknown_fields(&value, &parsed, &mut Vec::new(), &mut unknown);
            for path in unknown {
                let path = neutralised.original(&path);
                let message = format!("{}: unknown field; ignored", render_path(&path));
                sink.warning(self.label.clone(), &self.at(&path), message);
            }
        }

        defaults(&mut object);
        let unreadable = neutralised
            .found
            .into_iter()
            .map(|(u, _)| u)
            .chain(listeners_found)
            .collect();
        sink.add(Source::new(self.file, self.line), object, unreadable);
    }

    /// [`Document::load`] for a document that loads cleanly, without the
    /// intermediate `serde_json::Value`s (see `decode.rs`): the typed
    /// object straight from the tree, and the unknown-field check beside
    /// its serialisation. Anything that would take a neutralisation, a
    /// fallback or a diagnostic on the reference path makes the decode
    /// fail or find an unknown field, and bails (`Sink::bailed`): when the
    /// typed parse of the whole object succeeds, every listener, rule,
    /// hostname and parentRef parses on its own too, so the reference
    /// path's neutralisations find nothing.
    fn load_direct<T: Object>(self, sink: &mut Sink) {
        let singular = matches!(T::KIND, "HTTPRoute" | "GRPCRoute")
            && self
                .root
                .get("spec")
                .and_then(|s| s.get("useDefaultGateway"))
                .is_some();
        if singular {
            sink.bailed = true; // a warning on the reference path
            return;
        }
        let Ok(mut object) = super::decode::from_node::<T>(self.root, "status") else {
            sink.bailed = true;
            return;
        };
        if !matches!(
            super::decode::unknown_fields(&object, self.root, "status"),
            Ok(false)
        ) {
            sink.bailed = true;
            return;
        }
        defaults(&mut object);
        sink.add(Source::new(self.file, self.line), object, Vec::new());
    }

    /// Finds every `spec.listeners[i]` (of a Gateway or ListenerSet) that
    /// does not read as `L` and puts an inert listener in its place: its
    /// `name`, `port` and `protocol` where they read (so that its status
    /// entry and conflicts are its own), nothing else. The value is
    /// recorded as an [`Unreadable`] whose `rule` is the listener's index;
    /// the translator refuses that listener (`Accepted=False`, `Invalid`)
    /// and programs the others. Without this one bad enum value (a
    /// `tls.mode` typo, `allowedRoutes.namespaces.from: Everyone`, a kinds
    /// entry without `kind`) dropped the whole Gateway.
    fn neutralise_listeners<L: DeserializeOwned>(
        &self,
        sink: &mut Sink,
        value: &mut Value,
        found: &mut Vec<Unreadable>,
    ) {
        let Some(listeners) = value.pointer_mut("/spec/listeners").and_then(Value::as_array_mut) else {
            return;
        };
        for (index, listener) in listeners.iter_mut().enumerate() {
            let error = match serde_path_to_error::deserialize::<_, L>(&*listener) {
                Ok(_) => continue,
                Err(error) => error,
            };
            let (inner, reason) = describe(&error);
            let mut path = vec![
                Segment::Key("spec".into()),
                Segment::Key("listeners".into()),
                Segment::Index(index),
            ];
            path.extend(inner);
            let name = listener.get("name").and_then(Value::as_str).map(str::to_string);
            let port = listener
                .get("port")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0);
            let protocol = listener.get("protocol").and_then(Value::as_str).unwrap_or("");
            let shown = name
                .as_deref()
                .map_or_else(|| format!("listener {index}"), |n| format!("listener {n:?}"));
            *listener = serde_json::json!({
                "name": name.clone().unwrap_or_else(|| format!("unreadable-{index}")),
                "port": port,
                "protocol": protocol,
            });
            let unreadable = Unreadable {
                rule: index,
                path: field_steps(&path),
                message: reason,
            };
            sink.error(
                self.label.clone(),
                &self.at(&path),
                format!(
                    "{unreadable}; {shown} is not accepted (Accepted=False, Invalid), the other listeners are"
                ),
            );
            found.push(unreadable);
        }
    }

    /// A route's `spec.hostnames` and `spec.parentRefs` entries that do not
    /// read. A hostname is replaced by a string no hostname check accepts
    /// (it names the problem), so the translator refuses it as it refuses
    /// any invalid hostname: the route's other hostnames stay, and the
    /// route never widens to every hostname (with no valid hostname left
    /// it is not accepted). A parent reference is removed: the route does
    /// not attach through it (no widening either: dropping only its bad
    /// `port` or `sectionName` would attach to every listener), and the
    /// route's other parents keep it. Each is an error diagnostic naming
    /// the field and index.
    fn neutralise_route_head<P: DeserializeOwned>(
        &self,
        sink: &mut Sink,
        value: &mut Value,
        neutralised: &mut Neutralised,
        found: &mut Vec<Unreadable>,
    ) {
        let spec = || [Segment::Key("spec".into())];
        if let Some(hostnames) = value.pointer_mut("/spec/hostnames").and_then(Value::as_array_mut) {
            for (index, hostname) in hostnames.iter_mut().enumerate() {
                if hostname.is_string() {
                    continue;
                }
                let mut path = spec().to_vec();
                path.extend([Segment::Key("hostnames".into()), Segment::Index(index)]);
                let kind = json_type(hostname);
                *hostname = Value::String(format!("(unreadable: {kind}, expected a string)"));
                let unreadable = Unreadable {
                    rule: index,
                    path: field_steps(&path),
                    message: format!("invalid type: {kind}, expected a string"),
                };
                sink.error(
                    self.label.clone(),
                    &self.at(&path),
                    format!(
                        "{unreadable}; this hostname is not programmed (the route's other hostnames are)"
                    ),
                );
                found.push(unreadable);
            }
        }
        let count = value
            .pointer("/spec/parentRefs")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        // From the last, so that removals do not shift what is left to read.
        for index in (0..count).rev() {
            let Some(entry) = value.pointer(&format!("/spec/parentRefs/{index}")) else {
                continue;
            };
            let error = match serde_path_to_error::deserialize::<_, P>(entry) {
                Ok(_) => continue,
                Err(error) => error,
            };
            let (inner, reason) = describe(&error);
            let mut path = spec().to_vec();
            path.extend([Segment::Key("parentRefs".into()), Segment::Index(index)]);
            let mut field = path.clone();
            field.extend(inner);
            if remove_at(value, &path, neutralised) {
                let unreadable = Unreadable {
                    rule: index,
                    path: field_steps(&field),
                    message: reason,
                };
                sink.error(
                    self.label.clone(),
                    &self.at(&field),
                    format!(
                        "{unreadable}; parentRefs[{index}] is ignored: the route does not attach through it (its other parentRefs keep it)"
                    ),
                );
                found.push(unreadable);
            }
        }
    }

    /// Neutralises (and records) the unreadable value at `path` (current
    /// indexes) when it lies in `spec.rules[i]`; whether it did.
    fn absorb(
        &self,
        value: &mut Value,
        path: &[Segment],
        reason: &str,
        neutralised: &mut Neutralised,
    ) -> bool {
        let original = neutralised.original(path);
        let Some(rule) = rule_index(&original) else {
            return false;
        };
        if !neutralise(value, path, reason, neutralised) {
            return false;
        }
        // Removing a required value re-reports it as missing: the first
        // reason stands.
        let steps = field_steps(&original);
        if !neutralised.found.iter().any(|u| u.0.path == steps) {
            let line = self.root.line_at(&original, self.line);
            let unreadable = Unreadable {
                rule,
                path: steps,
                message: reason.to_string(),
            };
            neutralised.found.push((unreadable, line));
        }
        true
    }

    /// Finds and neutralises every unreadable value of `spec.rules[rule]`,
    /// parsed on its own as `R`. A rule that cannot be made to read value
    /// by value (or holds more than [`MAX_UNREADABLE`] such values) reads as
    /// an empty rule, which matches everything and is fenced at the lowest
    /// precedence.
    fn neutralise_rule<R: DeserializeOwned>(
        &self,
        value: &mut Value,
        rule: usize,
        neutralised: &mut Neutralised,
    ) {
        let pointer = format!("/spec/rules/{rule}");
        let mut why = format!("more than {MAX_UNREADABLE} values cannot be read");
        for _ in 0..MAX_UNREADABLE {
            let Some(current) = value.pointer(&pointer) else {
                return;
            };
            let error = match serde_path_to_error::deserialize::<_, R>(current) {
                Ok(_) => return,
                Err(error) => error,
            };
            let (inner, reason) = describe(&error);
            let mut path = vec![
                Segment::Key("spec".into()),
                Segment::Key("rules".into()),
                Segment::Index(rule),
            ];
            path.extend(inner);
            if !self.absorb(value, &path, &reason, neutralised) {
                why = format!("{}: {reason}", render_path(&neutralised.original(&path)));
                break;
            }
        }
        if let Some(slot) = value.pointer_mut(&pointer) {
            if serde_path_to_error::deserialize::<_, R>(&*slot).is_ok() {
                return;
            }
            *slot = Value::Object(Default::default());
        }
        let path = [
            Segment::Key("spec".into()),
            Segment::Key("rules".into()),
            Segment::Index(rule),
        ];
        let line = self.root.line_at(&path, self.line);
        neutralised.found.push((
            Unreadable {
                rule,
                path: field_steps(&path),
                message: format!("{why}; the rule is read as an empty rule"),
            },
            line,
        ));
    }

    /// GEP-3793 spells the field `useDefaultGateways`; the singular spelling
    /// from early drafts is read with a warning.
    fn singular_use_default_gateway(&self, sink: &mut Sink, value: &mut Value) {
        let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        let Some(singular) = spec.remove("useDefaultGateway") else {
            return;
        };
        let path = [
            Segment::Key("spec".into()),
            Segment::Key("useDefaultGateway".into()),
        ];
        if spec.contains_key("useDefaultGateways") {
            sink.warning(
                self.label.clone(),
                &self.at(&path),
                "spec.useDefaultGateway: ignored because spec.useDefaultGateways is set",
            );
        } else {
            sink.warning(
                self.label.clone(),
                &self.at(&path),
                "spec.useDefaultGateway: deprecated spelling, read as spec.useDefaultGateways",
            );
            spec.insert("useDefaultGateways".to_string(), singular);
        }
    }
}

/// What a JSON value is, as serde words it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "map",
    }
}

/// Paths of keys present (with a non-empty value) in `input` but absent from
/// `parsed` — fields the typed object does not know, which would otherwise
/// be dropped silently.
fn unknown_fields(input: &Value, parsed: &Value, path: &mut Vec<Segment>, out: &mut Vec<Vec<Segment>>) {
    match (input, parsed) {
        (Value::Object(input), Value::Object(parsed)) => {
            for (key, value) in input {
                let empty = match value {
                    Value::Null => true,
                    Value::Object(m) => m.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                path.push(Segment::Key(key.clone()));
                match parsed.get(key) {
                    Some(inner) => unknown_fields(value, inner, path, out),
                    None if !empty => out.push(path.clone()),
                    None => {}
                }
                path.pop();
            }
        }
        (Value::Array(input), Value::Array(parsed)) if input.len() == parsed.len() => {
            for (index, (value, inner)) in input.iter().zip(parsed).enumerate() {
                path.push(Segment::Index(index));
                unknown_fields(value, inner, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// A serde error message without the value it quotes: only what was
/// expected, and that the value is not shown.
fn without_values(reason: &str) -> String {
    if reason.starts_with("missing field `") {
        return reason.to_string();
    }
    match reason.rsplit_once(", expected ") {
        Some((_, expected)) => {
            format!("invalid value (not shown: Secret data is never quoted); expected {expected}")
        }
        None => "invalid value (not shown: Secret data is never quoted)".to_string(),
    }
}
/// How many unreadable values one rule may have before it is read as an
/// empty rule (and how many retries the whole route gets after its rules
/// were neutralised one by one): bounds the retry loops.
const MAX_UNREADABLE: usize = 64;

/// The path and reason of a typed-parse error. serde says "missing field
/// `x`" about the enclosing object; the field itself is named instead, like
/// the loader's own checks do. An unknown enum value is worded as the
/// Gateway API's `UnsupportedValue` is.
fn describe(error: &serde_path_to_error::Error<serde_json::Error>) -> (Vec<Segment>, String) {
    let mut path = segments(error.path());
    let reason = error.inner().to_string();
    if let Some(field) = reason
        .strip_prefix("missing field `")
        .and_then(|rest| rest.strip_suffix('`'))
    {
        path.push(Segment::Key(field.to_string()));
        return (path, "missing required field".to_string());
    }
    if let Some((value, expected)) = reason
        .strip_prefix("unknown variant `")
        .and_then(|rest| rest.split_once("`, "))
    {
        return (
            path,
            format!("unknown value {value:?}, {}", expected.replace('`', "")),
        );
    }
    (path, reason)
}

/// `spec.rules[i]` (indexes as written) when `path` lies in it.
fn rule_index(path: &[Segment]) -> Option<usize> {
    match path {
        [Segment::Key(spec), Segment::Key(rules), Segment::Index(i), ..]
            if spec == "spec" && rules == "rules" =>
        {
            Some(*i)
        }
        _ => None,
    }
}

fn field_steps(path: &[Segment]) -> Vec<FieldStep> {
    path.iter()
        .filter_map(|s| match s {
            Segment::Key(k) => Some(FieldStep::Key(k.clone())),
            Segment::Index(i) => Some(FieldStep::Index(*i)),
            Segment::Opaque => None,
        })
        .collect()
}

/// What neutralising has done to a route's value so far.
#[derive(Default)]
struct Neutralised {
    /// Every unreadable value, with its line.
    found: Vec<(Unreadable, usize)>,
    /// Array elements removed, by the array's path as written: their
    /// indexes as written, so that later paths can be mapped back.
    removed: Vec<(Vec<Segment>, Vec<usize>)>,
}

impl Neutralised {
    /// Maps a path in the neutralised value to the path as written.
    fn original(&self, path: &[Segment]) -> Vec<Segment> {
        let mut out: Vec<Segment> = Vec::with_capacity(path.len());
        for segment in path {
            match segment {
                Segment::Index(current) => {
                    let mut index = *current;
                    if let Some((_, removed)) = self.removed.iter().find(|(p, _)| *p == out) {
                        // `removed` is sorted: each removed index at or
                        // before the running index shifts it by one.
                        for r in removed {
                            if *r <= index {
                                index += 1;
                            }
                        }
                    }
                    out.push(Segment::Index(index));
                }
                other => out.push(other.clone()),
            }
        }
        out
    }

    fn record_removal(&mut self, array: Vec<Segment>, index: usize) {
        match self.removed.iter_mut().find(|(p, _)| *p == array) {
            Some((_, removed)) => {
                removed.push(index);
                removed.sort_unstable();
            }
            None => self.removed.push((array, vec![index])),
        }
    }
}

/// The value at `path` (current indexes), mutably.
fn value_at<'v>(value: &'v mut Value, path: &[Segment]) -> Option<&'v mut Value> {
    let mut node = value;
    for segment in path {
        node = match (segment, node) {
            (Segment::Key(k), Value::Object(map)) => map.get_mut(k)?,
            (Segment::Index(i), Value::Array(items)) => items.get_mut(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Removes the value at `path` (a key or an array element, recorded so that
/// later paths map back to the input); whether anything was removed.
fn remove_at(value: &mut Value, path: &[Segment], neutralised: &mut Neutralised) -> bool {
    let Some((last, parent)) = path.split_last() else {
        return false;
    };
    match (last, value_at(value, parent)) {
        (Segment::Key(k), Some(Value::Object(map))) => map.remove(k).is_some(),
        (Segment::Index(i), Some(Value::Array(items))) if *i < items.len() => {
            items.remove(*i);
            let original = neutralised.original(path);
            if let (Some(Segment::Index(o)), Some(array)) = (original.last(), original.split_last()) {
                neutralised.record_removal(array.1.to_vec(), *o);
            }
            true
        }
        _ => false,
    }
}

/// Replaces the value at `path`; whether it changed.
fn replace_at(value: &mut Value, path: &[Segment], with: Value) -> bool {
    match value_at(value, path) {
        Some(slot) if *slot != with => {
            *slot = with;
            true
        }
        _ => false,
    }
}

/// Makes the value at `path` (inside `spec.rules[i]`, current indexes) read,
/// so that the parse can go on to the next problem; whether the value
/// changed (no change ends the loop).
///
/// The whole rule is replaced by the 500 anyway, so outside `matches`
/// anything unreadable is simply removed (the smallest removable piece: the
/// key, or for a missing required field the element that lacks it). Inside
/// `matches[j]` nothing that changes which requests the match catches is
/// removed without trace: the translator fences the match from the recorded
/// path (see `translate::replacement::unreadable`), and match and header/query
/// elements keep their place (placeholders) so indexes and precedence stay
/// as written.
fn neutralise(value: &mut Value, path: &[Segment], reason: &str, neutralised: &mut Neutralised) -> bool {
    let Some(rule) = path.get(..3) else {
        return false;
    };
    let rel = &path[3..];
    let missing = reason == "missing required field";
    let within = |steps: usize| {
        let mut p = rule.to_vec();
        p.extend_from_slice(&rel[..steps.min(rel.len())]);
        p
    };
    match rel {
        [Segment::Key(m), Segment::Index(_), rest @ ..] if m == "matches" => {
            let the_match = within(2);
            let placeholder = |list: &str, index: usize| {
                let name = if list == "headers" {
                    format!("x-portcullis-unreadable-{index}")
                } else {
                    format!("portcullis-unreadable-{index}")
                };
                serde_json::json!({ "name": name, "value": "" })
            };
            let changed = match rest {
                // An optional value of the match, or of its path (HTTPRoute)
                // or method (GRPCRoute): removed.
                [Segment::Key(_)] if !missing => remove_at(value, path, neutralised),
                [Segment::Key(k), Segment::Key(_)] if (k == "path" || k == "method") && !missing => {
                    remove_at(value, path, neutralised) || remove_at(value, &within(3), neutralised)
                }
                // One header or query parameter match: an unknown type is
                // removed (the translator drops the constraint); anything
                // else puts a placeholder in the element's place.
                [Segment::Key(list), Segment::Index(_), Segment::Key(t)]
                    if (list == "headers" || list == "queryParams") && t == "type" && !missing =>
                {
                    remove_at(value, path, neutralised)
                }
                [Segment::Key(list), Segment::Index(index), ..]
                    if list == "headers" || list == "queryParams" =>
                {
                    replace_at(value, &within(4), placeholder(list, *index))
                }
                _ => false,
            };
            // Anything else: the match cannot be read at all.
            changed || replace_at(value, &the_match, Value::Object(Default::default()))
        }
        // The rule is not a mapping: it reads as an empty rule, which
        // matches everything, fenced at the lowest precedence.
        [] => replace_at(value, rule, Value::Object(Default::default())),
        _ => {
            let target = if missing { &path[..path.len() - 1] } else { path };
            // Never remove the rule itself (its index is its identity).
            if target.len() <= 3 {
                return replace_at(value, rule, Value::Object(Default::default()));
            }
            remove_at(value, target, neutralised)
        }
    }
}

/// Which of Kubernetes' name formats a name must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NameFormat {
    /// RFC 1123 label: at most 63 of `a-z0-9-`, alphanumeric at both ends
    /// (namespaces).
    Dns1123Label,
    /// RFC 1035 label: a DNS-1123 label that starts with a letter (Service
    /// names, `ValidateServiceName`).
    Dns1035Label,
    /// RFC 1123 subdomain: at most 253 characters, dot-separated labels of
    /// `a-z0-9-` (every other kind here, custom resources included).
    Dns1123Subdomain,
}

impl NameFormat {
    fn describe(self) -> &'static str {
        match self {
            NameFormat::Dns1123Label => {
                "a DNS-1123 label (at most 63 lower case letters, digits or '-', starting and ending \
                 with a letter or digit)"
            }
            NameFormat::Dns1035Label => {
                "a DNS-1035 label (at most 63 lower case letters, digits or '-', starting with a \
                 letter and ending with a letter or digit)"
            }
            NameFormat::Dns1123Subdomain => {
                "a DNS-1123 subdomain (at most 253 lower case letters, digits, '-' or '.', each \
                 dot-separated part starting and ending with a letter or digit)"
            }
        }
    }

    fn accepts(self, name: &str) -> bool {
        fn label(l: &str, max: usize) -> bool {
            let b = l.as_bytes();
            !b.is_empty()
                && b.len() <= max
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        }
        match self {
            NameFormat::Dns1123Label => label(name, 63),
            NameFormat::Dns1035Label => label(name, 63) && name.as_bytes()[0].is_ascii_lowercase(),
            NameFormat::Dns1123Subdomain => name.len() <= 253 && name.split('.').all(|l| label(l, 253)),
        }
    }
}

/// The format Kubernetes requires of `metadata.name` for a kind.
fn name_format(known: Known) -> NameFormat {
    match known {
        Known::Namespace => NameFormat::Dns1123Label,
        Known::Service => NameFormat::Dns1035Label,
        _ => NameFormat::Dns1123Subdomain,
    }
}

/// Refuses (with an error naming the field and its line) an object whose
/// name or namespace Kubernetes would refuse: such names cannot exist in a
/// cluster, and generated names built from them (`a/b/c/80` for Service
/// `a`/`b/c` and for Service `a/b`/`c`) could otherwise stand for another
/// namespace's objects. Whether the object was kept.
#[allow(clippy::too_many_arguments)]
fn names_are_valid(
    sink: &mut Sink,
    file: &str,
    root: &Node,
    line: usize,
    known: Known,
    kind: &str,
    label: Option<&str>,
    name: Option<&str>,
    namespace: Option<&str>,
) -> bool {
    let mut checks = vec![("name", name, name_format(known))];
    if known.namespaced() {
        // An absent or empty namespace is defaulted to `default`.
        checks.push((
            "namespace",
            namespace.filter(|ns| !ns.is_empty()),
            NameFormat::Dns1123Label,
        ));
    }
    let mut valid = true;
    for (field, value, format) in checks {
        let Some(value) = value else {
            continue;
        };
        if format.accepts(value) {
            continue;
        }
        let path = [Segment::Key("metadata".into()), Segment::Key(field.into())];
        let at = Source::new(file, root.line_at(&path, line));
        sink.error(
            label.map(str::to_string),
            &at,
            format!(
                "metadata.{field}: {value:?} is not a valid {kind} {field}: it must be {}; the {kind} is ignored",
                format.describe()
            ),
        );
        valid = false;
    }
    valid
}

/// What the apiserver would fill in: the `default` namespace for a
/// namespaced kind written without one, none for a cluster-scoped kind;
/// then the kind's own normalisation.
fn defaults<T: Object>(object: &mut T) {
    let meta = object.meta_mut();
    if T::NAMESPACED {
        if meta.namespace.as_deref().is_none_or(str::is_empty) {
            meta.namespace = Some("default".to_string());
        }
    } else {
        meta.namespace = None;
    }
    object.normalize();
}
