//! HTTPProxy status in Contour's shape (`internal/status/proxystatus.go`,
//! `apis/projectcontour/v1/helpers.go`): one `Valid` condition carrying
//! `errors` and `warnings` sub-conditions, and the older `currentStatus` /
//! `description` fields derived from it.
//!
//! - No error: `Valid=True`, reason `Valid`, message `Valid HTTPProxy`,
//!   `currentStatus: valid` (warnings do not change that).
//! - Any error: `Valid=False`, reason `ErrorPresent`, message `At least one
//!   error present, see Errors for details`; `currentStatus: orphaned` with
//!   the orphan message as description when an `Orphaned` error is
//!   present, `invalid` otherwise.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{ProxyError, ProxyId, type_};

/// Contour truncates sub-condition messages to this length.
const LONG_MESSAGE_LENGTH: usize = 32760;

/// What has been found on one proxy.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub errors: Vec<ProxyError>,
    pub warnings: Vec<ProxyError>,
    /// The FQDN, for roots (what `get httpproxies` shows).
    pub fqdn: Option<String>,
}

/// Findings in the order one tree's walk, duplicate detection or build
/// found them, on any proxy of the tree. Kept per tree (owned, so the
/// incremental memo can hold it past the inputs it came from) and replayed
/// into [`Statuses`] in the order a full translation finds them, so that a
/// reused tree yields the same status as a recomputed one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Events(Vec<(ProxyId, Severity, ProxyError)>);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
}

impl Events {
    pub fn error(&mut self, proxy: &ProxyId, error: ProxyError) {
        self.0.push((proxy.clone(), Severity::Error, error));
    }

    pub fn warning(&mut self, proxy: &ProxyId, warning: ProxyError) {
        self.0.push((proxy.clone(), Severity::Warning, warning));
    }
}

/// Findings per proxy. A finding recorded twice (a child included by two
/// roots, or twice by one) is kept once.
#[derive(Clone, Debug, Default)]
pub struct Statuses {
    pub proxies: BTreeMap<ProxyId, Found>,
}

impl Statuses {
    pub fn error(&mut self, proxy: &ProxyId, error: ProxyError) {
        let found = self.proxies.entry(proxy.clone()).or_default();
        if !found.errors.contains(&error) {
            found.errors.push(error);
        }
    }

    pub fn warning(&mut self, proxy: &ProxyId, warning: ProxyError) {
        let found = self.proxies.entry(proxy.clone()).or_default();
        if !found.warnings.contains(&warning) {
            found.warnings.push(warning);
        }
    }

    /// Records `events` in the order they were found.
    pub fn replay(&mut self, events: &Events) {
        for (proxy, severity, e) in &events.0 {
            match severity {
                Severity::Error => self.error(proxy, e.clone()),
                Severity::Warning => self.warning(proxy, e.clone()),
            }
        }
    }

    pub fn is_valid(&self, proxy: &ProxyId) -> bool {
        self.proxies.get(proxy).is_none_or(|f| f.errors.is_empty())
    }

    /// `valid`, `invalid` or `orphaned`, as Contour derives it.
    pub fn current_status(&self, proxy: &ProxyId) -> &'static str {
        match self.proxies.get(proxy) {
            Some(f) if f.errors.iter().any(|e| e.type_ == type_::ORPHANED) => "orphaned",
            Some(f) if !f.errors.is_empty() => "invalid",
            _ => "valid",
        }
    }

    /// `status.description`: the orphan message for an orphan, else the
    /// `Valid` condition's message.
    pub fn description(&self, proxy: &ProxyId) -> String {
        let found = self.proxies.get(proxy);
        let errors = found.map_or(&[][..], |f| f.errors.as_slice());
        if let Some(e) = errors.iter().find(|e| e.type_ == type_::ORPHANED) {
            return truncate(&e.message);
        }
        if errors.is_empty() {
            "Valid HTTPProxy".to_string()
        } else {
            "At least one error present, see Errors for details".to_string()
        }
    }

    /// The `status` stanza of `proxy`.
    pub fn render(
        &self,
        proxy: &ProxyId,
        generation: i64,
        time: &str,
        load_balancer: Option<&str>,
    ) -> ProxyStatus {
        let empty = Found::default();
        let found = self.proxies.get(proxy).unwrap_or(&empty);
        let sub = |e: &ProxyError| SubCondition {
            type_: e.type_.to_string(),
            status: "True",
            reason: e.reason.to_string(),
            message: truncate(&e.message),
        };
        let errors: Vec<SubCondition> = found.errors.iter().map(sub).collect();
        let warnings: Vec<SubCondition> = found.warnings.iter().map(sub).collect();
        let (status, reason, message) = if errors.is_empty() {
            ("True", "Valid", "Valid HTTPProxy")
        } else {
            (
                "False",
                "ErrorPresent",
                "At least one error present, see Errors for details",
            )
        };
        let current = self.current_status(proxy);
        let description = self.description(proxy);
        ProxyStatus {
            current_status: current,
            description,
            load_balancer: load_balancer.map(|ip| LoadBalancerStatus {
                ingress: vec![LoadBalancerIngress { ip: ip.to_string() }],
            }),
            conditions: vec![DetailedCondition {
                type_: "Valid",
                status,
                reason,
                message,
                observed_generation: generation,
                last_transition_time: time.to_string(),
                errors,
                warnings,
            }],
        }
    }
}

fn truncate(message: &str) -> String {
    if message.len() <= LONG_MESSAGE_LENGTH {
        return message.to_string();
    }
    let mut end = LONG_MESSAGE_LENGTH;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

/// Contour's `HTTPProxyStatus`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyStatus {
    pub current_status: &'static str,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerStatus>,
    pub conditions: Vec<DetailedCondition>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadBalancerStatus {
    pub ingress: Vec<LoadBalancerIngress>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadBalancerIngress {
    pub ip: String,
}

/// Contour's `DetailedCondition`: a `metav1.Condition` with sub-conditions.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailedCondition {
    #[serde(rename = "type")]
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: &'static str,
    pub observed_generation: i64,
    pub last_transition_time: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SubCondition>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<SubCondition>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}
