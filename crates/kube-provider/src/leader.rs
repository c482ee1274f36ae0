//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go's
//! leaderelection does it: every replica translates and serves xDS (so
//! Envoys keep their configuration when the leader dies); only the leader
//! writes status ([`crate::status::StatusWriter`] waits while this says
//! `false`).
//!
//! A replica takes the Lease when it is absent, or when its holder has not
//! renewed it for `lease_duration` as observed **by this replica's own
//! clock** (the `renewTime` written by another host is compared for
//! change only, never against local time, so clock skew between replicas
//! does not matter). Every write carries the `resourceVersion` it read, so
//! two replicas cannot both take it. The leader renews every
//! `retry_period`; a leader that could not renew for two thirds of
//! `lease_duration` stops writing, before another replica can take over.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use tokio::sync::watch;

use crate::Client;

/// Which Lease, who we are, and the timings.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub namespace: String,
    pub name: String,
    /// Unique per replica (host name and process id).
    pub identity: String,
    pub lease_duration: Duration,
    /// How often the Lease is read and renewed (or taken).
    pub retry_period: Duration,
}

/// Runs the election; the receiver says whether we lead. The task stops
/// when the returned handle is aborted (the Lease then expires).
pub fn start(client: Client, config: LeaderConfig) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let mut last_renew: Option<Instant> = None;
        // The holder and renewTime last seen, and when we saw them change.
        let mut observed: Option<(Option<String>, Option<MicroTime>)> = None;
        let mut observed_at = Instant::now();
        loop {
            let leading = match try_acquire_or_renew(&api, &config, &mut observed, &mut observed_at).await {
                Ok(true) => {
                    last_renew = Some(Instant::now());
                    true
                }
                Ok(false) => false,
                Err(error) => {
                    tracing::warn!(lease = %config.name, %error, "leader election: cannot read or write the Lease");
                    // Still the leader for two thirds of the Lease (client-go's
                    // renew deadline), well before another replica may take it.
                    last_renew.is_some_and(|t| t.elapsed() < config.lease_duration * 2 / 3)
                }
            };
            if !leading {
                last_renew = None;
            }
            if *tx.borrow() != leading {
                tracing::info!(identity = %config.identity, leading, "leader election");
                let _ = tx.send(leading);
            }
            tokio::time::sleep(config.retry_period).await;
        }
    });
    (rx, task)
}

async fn try_acquire_or_renew(
    api: &Api<Lease>,
    config: &LeaderConfig,
    observed: &mut Option<(Option<String>, Option<MicroTime>)>,
    observed_at: &mut Instant,
) -> Result<bool, kube::Error> {
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let Some(mut lease) = api.get_opt(&config.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(config.name.clone()),
                namespace: Some(config.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(config.identity.clone()),
                lease_duration_seconds: Some(config.lease_duration.as_secs().max(1) as i32),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            // Another replica created it first.
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.get_or_insert_with(Default::default);
    let holder = spec.holder_identity.clone();
    let seen = (holder.clone(), spec.renew_time.clone());
    if observed.as_ref() != Some(&seen) {
        *observed = Some(seen);
        *observed_at = Instant::now();
    }
    let ours = holder.as_deref() == Some(config.identity.as_str());
    let vacant = holder.as_deref().is_none_or(str::is_empty);
    if !ours && !vacant && observed_at.elapsed() < config.lease_duration {
        return Ok(false);
    }
    if !ours {
        spec.holder_identity = Some(config.identity.clone());
        spec.acquire_time = Some(now.clone());
        spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
    }
    spec.lease_duration_seconds = Some(config.lease_duration.as_secs().max(1) as i32);
    spec.renew_time = Some(now);
    // `replace` carries the resourceVersion read above: a concurrent
    // taker gets 409 and stays a follower.
    match api.replace(&config.name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
