//! `timeouts` and `retry` → the route action. The HTTPRoute rule's own
//! `timeouts`/`retry` win where both are set (the route author was
//! explicit; Envoy Gateway decides the same way).

use api::policy::{Retry, Timeouts as Spec};
use envoy_types::pb::envoy::config::route::v3::{RetryPolicy, retry_policy};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};

use super::PolicyError;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeouts {
    pub request: Option<PbDuration>,
    pub idle: Option<PbDuration>,
}

pub fn pb(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

pub fn parse_duration(v: &str, field: &str) -> Result<std::time::Duration, PolicyError> {
    crate::duration::parse(v).map_err(|e| PolicyError::structural(field, e.to_string()))
}

pub fn compile(t: &Spec, field: &str) -> Result<Timeouts, PolicyError> {
    let get = |v: &Option<String>, name: &str| {
        v.as_deref()
            .map(|v| parse_duration(v, &format!("{field}.{name}")).map(pb))
            .transpose()
    };
    Ok(Timeouts {
        request: get(&t.request, "request")?,
        idle: get(&t.idle, "idle")?,
    })
}

/// Envoy's `retry_on` conditions for HTTP.
const RETRY_ON: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
];

pub fn retry(r: &Retry, field: &str) -> Result<RetryPolicy, PolicyError> {
    let attempts = u32::try_from(r.attempts)
        .ok()
        .filter(|a| *a <= 1000)
        .ok_or_else(|| PolicyError::structural(format!("{field}.attempts"), "must be between 0 and 1000"))?;
    let mut on: Vec<String> = Vec::new();
    for (i, c) in r.retry_on.iter().enumerate() {
        if !RETRY_ON.contains(&c.as_str()) {
            return Err(PolicyError::structural(
                format!("{field}.retryOn[{i}]"),
                format!("{c:?} is not a retry condition (one of {})", RETRY_ON.join(", ")),
            ));
        }
        on.push(c.clone());
    }
    let mut codes = Vec::new();
    for (i, c) in r.status_codes.iter().enumerate() {
        match u32::try_from(*c) {
            Ok(c) if (100..=599).contains(&c) => codes.push(c),
            _ => {
                return Err(PolicyError::structural(
                    format!("{field}.statusCodes[{i}]"),
                    "must be an HTTP status code (100-599)",
                ));
            }
        }
    }
    if on.is_empty() {
        on = ["connect-failure", "refused-stream", "reset"]
            .map(String::from)
            .to_vec();
    }
    if !codes.is_empty() && !on.iter().any(|c| c == "retriable-status-codes") {
        on.push("retriable-status-codes".into());
    }
    let mut policy = RetryPolicy {
        retry_on: on.join(","),
        num_retries: Some(UInt32Value { value: attempts }),
        retriable_status_codes: codes,
        ..Default::default()
    };
    if let Some(t) = &r.per_try_timeout {
        policy.per_try_timeout = Some(pb(parse_duration(t, &format!("{field}.perTryTimeout"))?));
    }
    if let Some(b) = &r.backoff_base_interval {
        let f = format!("{field}.backoffBaseInterval");
        let d = parse_duration(b, &f)?;
        if d.as_millis() < 1 {
            return Err(PolicyError::structural(f, "must be at least 1ms"));
        }
        policy.retry_back_off = Some(retry_policy::RetryBackOff {
            base_interval: Some(pb(d)),
            ..Default::default()
        });
    }
    Ok(policy)
}
