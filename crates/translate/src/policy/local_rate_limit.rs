//! `localRateLimit` → Envoy's local rate limit filter, per route: one token
//! bucket per Envoy route (so per rule match, per Envoy instance).

use api::policy::LocalRateLimit as Spec;
use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit;
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, TokenBucket, fractional_percent};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::PolicyError;
use super::timeouts::{parse_duration, pb};

/// Envoy refuses a fill interval below 50 ms.
const MIN_FILL_MS: u128 = 50;

fn always() -> Option<RuntimeFractionalPercent> {
    Some(RuntimeFractionalPercent {
        default_value: Some(FractionalPercent {
            numerator: 100,
            denominator: fractional_percent::DenominatorType::Hundred as i32,
        }),
        runtime_key: String::new(),
    })
}

pub fn compile(l: &Spec, field: &str, namespace: &str, name: &str) -> Result<LocalRateLimit, PolicyError> {
    let b = &l.token_bucket;
    let f = format!("{field}.tokenBucket");
    let max = u32::try_from(b.max_tokens)
        .ok()
        .filter(|m| *m > 0)
        .ok_or_else(|| {
            PolicyError::structural(format!("{f}.maxTokens"), "must be between 1 and 4294967295")
        })?;
    let per_fill = match b.tokens_per_fill {
        None => None,
        Some(n) => Some(u32::try_from(n).ok().filter(|n| *n > 0).ok_or_else(|| {
            PolicyError::structural(format!("{f}.tokensPerFill"), "must be between 1 and 4294967295")
        })?),
    };
    let interval = parse_duration(&b.fill_interval, &format!("{f}.fillInterval"))?;
    if interval.as_millis() < MIN_FILL_MS {
        return Err(PolicyError::structural(
            format!("{f}.fillInterval"),
            format!("must be at least {MIN_FILL_MS}ms (Envoy's minimum)"),
        ));
    }
    Ok(LocalRateLimit {
        stat_prefix: format!("trafficpolicy_{namespace}_{name}"),
        token_bucket: Some(TokenBucket {
            max_tokens: max,
            tokens_per_fill: per_fill.map(|value| UInt32Value { value }),
            fill_interval: Some(pb(interval)),
        }),
        filter_enabled: always(),
        filter_enforced: always(),
        ..Default::default()
    })
}
