//! TrafficPolicy and GatewayExtension: from the user's objects to per-route
//! Envoy configuration.
//!
//! Data model, in the order data flows:
//! 1. [`compile`]: every TrafficPolicy is checked and compiled once, on its
//!    own, into [`Features`] (Envoy protos ready to attach) plus the
//!    policy's errors and warnings (each naming the field, with its class).
//!    GatewayExtensions are compiled into ext_authz filter configs
//!    ([`ext_auth::Provider`]).
//! 2. [`attach`]: targets are resolved to (route, rule) pairs; where several
//!    policies reach one rule their features merge in a fixed order (rule
//!    target before route target before label selector, then oldest, then
//!    namespace/name); the first policy that sets a feature wins it and the
//!    others are told (a warning naming the winner). The result per rule is
//!    an [`Effective`].
//! 3. `route::rule` applies an `Effective` to each Envoy route of its rule:
//!    per-filter config, header mutations, timeouts and retries. A rule
//!    reached by an invalid policy is replaced by the 500 (fail closed),
//!    never served without it.
//! 4. [`scope`]: Gateway and listener targets, merged once per scope and
//!    placed on route configurations and virtual hosts (never copied into
//!    routes); an invalid one fences its scope (`replacement::scope`).
//! 5. [`report`] with [`status`]: each policy's `status.ancestors` (the Gateways its targets
//!    are attached to) with `Accepted` and the reasons.

pub mod apply;
pub mod attach;
pub mod cors;
pub mod ext_auth;
pub mod header_modifiers;
pub mod local_rate_limit;
pub mod rbac;
pub mod report;
pub mod scope;
pub mod status;
pub mod timeouts;

use std::collections::BTreeMap;
use std::sync::Arc;

use api::Sourced;
use api::policy::TrafficPolicy;
use envoy_types::pb::envoy::config::route::v3::RetryPolicy;
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit;
use envoy_types::pb::envoy::extensions::filters::http::rbac::v3::RbacPerRoute;

use crate::route::filters::HeaderMods;

pub const KIND: &str = "TrafficPolicy";
pub const API_VERSION: &str = "gateway.portcullis.dev/v1alpha1";

/// HTTP filter names, in the order they run in every HCM that needs them
/// (CORS answers preflights before authentication; rate limiting last, as
/// Envoy Gateway orders them). ext_authz filters are named per extension:
/// `envoy.filters.http.ext_authz/<namespace>/<name>`.
pub const CORS_FILTER: &str = "envoy.filters.http.cors";
pub const EXT_AUTHZ_FILTER_PREFIX: &str = "envoy.filters.http.ext_authz/";
pub const RBAC_FILTER: &str = "envoy.filters.http.rbac";
pub const LOCAL_RATE_LIMIT_FILTER: &str = "envoy.filters.http.local_ratelimit";

/// One problem with a policy: the field (from the policy's root), why,
/// and its class. The same shape as a rule's error.
pub type PolicyError = crate::error::RuleError;

/// A loader error (`field: reason`, as the loader words it) as a policy
/// error on that field.
pub fn load_error(e: &str) -> PolicyError {
    match e.split_once(": ") {
        Some((field, message)) if field.starts_with("spec") => PolicyError::structural(field, message),
        _ => PolicyError::structural("spec", e),
    }
}

/// What one policy asks for, compiled. Each field is one mergeable feature.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Features {
    /// Literal header edits: (request, response).
    pub header_modifiers: Option<(HeaderMods, HeaderMods)>,
    pub cors: Option<CorsPolicy>,
    pub local_rate_limit: Option<LocalRateLimit>,
    pub rbac: Option<RbacPerRoute>,
    /// Format-string header edits: (request, response).
    pub transformation: Option<(HeaderMods, HeaderMods)>,
    pub ext_auth: Option<ext_auth::Use>,
    pub timeouts: Option<timeouts::Timeouts>,
    pub retry: Option<RetryPolicy>,
}

/// The feature names, as spelled in the spec (for conflict messages).
pub const FEATURES: [&str; 8] = [
    "headerModifiers",
    "cors",
    "localRateLimit",
    "rbac",
    "transformation",
    "extAuth",
    "timeouts",
    "retry",
];

/// Index of `extAuth` in [`FEATURES`] (and in [`Effective::sources`]).
pub const EXT_AUTH: usize = 5;
/// Index of `retry` in [`FEATURES`].
pub const RETRY: usize = 7;

impl Features {
    /// Which features are set, by index into [`FEATURES`].
    pub fn set(&self) -> [bool; 8] {
        [
            self.header_modifiers.is_some(),
            self.cors.is_some(),
            self.local_rate_limit.is_some(),
            self.rbac.is_some(),
            self.transformation.is_some(),
            self.ext_auth.is_some(),
            self.timeouts.is_some(),
            self.retry.is_some(),
        ]
    }

    /// Takes feature `i` from `other`.
    pub fn take_from(&mut self, other: &Features, i: usize) {
        match i {
            0 => self.header_modifiers.clone_from(&other.header_modifiers),
            1 => self.cors.clone_from(&other.cors),
            2 => self.local_rate_limit.clone_from(&other.local_rate_limit),
            3 => self.rbac.clone_from(&other.rbac),
            4 => self.transformation.clone_from(&other.transformation),
            5 => self.ext_auth.clone_from(&other.ext_auth),
            6 => self.timeouts.clone_from(&other.timeouts),
            _ => self.retry.clone_from(&other.retry),
        }
    }
}

/// One TrafficPolicy, compiled.
#[derive(Clone, Debug)]
pub struct Compiled<'a> {
    pub policy: &'a Sourced<TrafficPolicy>,
    pub namespace: String,
    pub name: String,
    /// Errors make the policy invalid (`Accepted=False`) and fail its
    /// targets closed.
    pub errors: Vec<PolicyError>,
    /// Warnings keep it accepted (`PartiallyValid`).
    pub warnings: Vec<PolicyError>,
    /// Shared with the incremental translator's memo ([`Compilation`]).
    pub features: Arc<Features>,
}

/// What compiling one policy made, apart from the policy it was made from
/// (whose errors and warnings attaching adds to). Kept by the incremental
/// translator and offered back to [`compile`] when no TrafficPolicy and no
/// GatewayExtension changed (`incremental/standing_policies.rs`).
#[derive(Clone, Debug)]
pub struct Compilation {
    namespace: String,
    name: String,
    errors: Vec<PolicyError>,
    warnings: Vec<PolicyError>,
    features: Arc<Features>,
}

impl Compilation {
    fn of(c: &Compiled<'_>) -> Self {
        Compilation {
            namespace: c.namespace.clone(),
            name: c.name.clone(),
            errors: c.errors.clone(),
            warnings: c.warnings.clone(),
            features: c.features.clone(),
        }
    }
}

impl Compiled<'_> {
    pub fn display(&self) -> String {
        format!("{KIND} {}/{}", self.namespace, self.name)
    }
}

/// Compiles every policy (sorted by namespace/name).
pub fn compile<'a>(
    policies: &'a [Sourced<TrafficPolicy>],
    extensions: &BTreeMap<(String, String), ext_auth::Provider>,
) -> Vec<Compiled<'a>> {
    compile_reusing(policies, extensions, Vec::new(), false).0
}

/// [`compile`], taking `prior`: last call's compilations, which the
/// caller offers only when the policies and the GatewayExtensions are
/// last call's, else none (`incremental/standing_policies.rs`): taken as
/// they are, in the same order, for the policies of the same
/// namespace/name — the policies themselves are not compared, hence not
/// public. With `keep`, also returns every policy's compilation for the
/// next call.
pub(crate) fn compile_reusing<'a>(
    policies: &'a [Sourced<TrafficPolicy>],
    extensions: &BTreeMap<(String, String), ext_auth::Provider>,
    prior: Vec<Compilation>,
    keep: bool,
) -> (Vec<Compiled<'a>>, Vec<Compilation>) {
    // Sorted before compiling: a `Compiled` holds every feature (a few
    // KiB), and sorting them moved each one log n times.
    let key = |p: &&'a Sourced<TrafficPolicy>| crate::route::model::namespace_name(&p.object.metadata);
    let mut sorted: Vec<&'a Sourced<TrafficPolicy>> = policies.iter().collect();
    sorted.sort_by_key(key);
    let reuse = prior.len() == sorted.len()
        && prior
            .iter()
            .zip(&sorted)
            .all(|(c, p)| (c.namespace.as_str(), c.name.as_str()) == key(p));
    if reuse {
        let compiled = sorted
            .into_iter()
            .zip(&prior)
            .map(|(policy, c)| Compiled {
                policy,
                namespace: c.namespace.clone(),
                name: c.name.clone(),
                errors: c.errors.clone(),
                warnings: c.warnings.clone(),
                features: c.features.clone(),
            })
            .collect();
        return (compiled, prior);
    }
    let compiled: Vec<Compiled<'a>> = sorted.into_iter().map(|p| compile_one(p, extensions)).collect();
    let kept = if keep {
        compiled.iter().map(Compilation::of).collect()
    } else {
        Vec::new()
    };
    (compiled, kept)
}

fn compile_one<'a>(
    p: &'a Sourced<TrafficPolicy>,
    extensions: &BTreeMap<(String, String), ext_auth::Provider>,
) -> Compiled<'a> {
    let meta = &p.object.metadata;
    let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
    let name = meta.name.clone().unwrap_or_default();
    let mut errors: Vec<PolicyError> = p.object.load_errors.iter().map(|e| load_error(e)).collect();
    let mut warnings = Vec::new();
    let spec = &p.object.spec;
    let mut features = Features::default();
    let mut record = |r: Result<(), PolicyError>| {
        if let Err(e) = r {
            errors.push(e);
        }
    };
    if let Some(h) = &spec.header_modifiers {
        record(
            header_modifiers::literal(h, "spec.headerModifiers").map(|m| features.header_modifiers = Some(m)),
        );
    }
    if let Some(c) = &spec.cors {
        record(cors::compile(c, "spec.cors").map(|c| features.cors = Some(c)));
    }
    if let Some(l) = &spec.local_rate_limit {
        record(
            local_rate_limit::compile(l, "spec.localRateLimit", &namespace, &name)
                .map(|l| features.local_rate_limit = Some(l)),
        );
    }
    if let Some(r) = &spec.rbac {
        record(rbac::compile(r, "spec.rbac").map(|r| features.rbac = Some(r)));
    }
    if let Some(t) = &spec.transformation {
        record(
            header_modifiers::formatted(t, "spec.transformation").map(|m| features.transformation = Some(m)),
        );
    }
    if let Some(e) = &spec.ext_auth {
        match ext_auth::resolve(e, "spec.extAuth", &namespace, extensions) {
            Ok((u, warning)) => {
                features.ext_auth = Some(u);
                warnings.extend(warning);
            }
            Err(e) => record(Err(e)),
        }
    }
    if let Some(t) = &spec.timeouts {
        record(timeouts::compile(t, "spec.timeouts").map(|t| features.timeouts = Some(t)));
    }
    if let Some(r) = &spec.retry {
        record(timeouts::retry(r, "spec.retry").map(|r| features.retry = Some(r)));
    }
    if errors.is_empty() && warnings.is_empty() && !features.set().iter().any(|s| *s) {
        warnings.push(PolicyError::semantic("spec", "sets no feature; it has no effect"));
    }
    errors.sort();
    errors.dedup();
    Compiled {
        policy: p,
        namespace,
        name,
        errors,
        warnings,
        features: Arc::new(features),
    }
}

/// What reaches one rule: the merged features, which policy each came
/// from, and the errors (from invalid policies) that replace the rule.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effective {
    pub features: Features,
    /// `TrafficPolicy ns/name` per feature that is set.
    pub sources: [Option<String>; 8],
    /// Per feature set: the target's precedence (0 rule, 1 route, 2
    /// selector; for scopes 0 targetRef, 1 selector).
    pub levels: [u8; 8],
    /// Why the rule must answer 500 instead (first one wins in status).
    pub errors: Vec<crate::error::RuleError>,
}
