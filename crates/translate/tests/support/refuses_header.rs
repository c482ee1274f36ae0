//! A fake Envoy for STRICT tests: it refuses one response header name
//! (`x-envoy-refuses`) wherever it is configured — route configuration,
//! virtual host or route — and records every candidate's label. It stands
//! for what only the real Envoy rejects (STANDARD sees a valid header
//! name); the tests give their final output to the real Envoy too.

use std::sync::Mutex;

use translate::strict::{Candidate, Validator, Verdict};

pub const REFUSED: &str = "x-envoy-refuses";
pub const MESSAGE: &str = "fake Envoy: header x-envoy-refuses is refused";

#[derive(Default)]
pub struct RefusesOneHeader {
    pub labels: Mutex<Vec<String>>,
}

fn refused(headers: &[envoy_types::pb::envoy::config::core::v3::HeaderValueOption]) -> bool {
    headers
        .iter()
        .any(|h| h.header.as_ref().is_some_and(|h| h.key == REFUSED))
}

impl Validator for RefusesOneHeader {
    fn validate(&self, batch: &[Candidate]) -> Vec<Verdict> {
        batch
            .iter()
            .map(|c| {
                self.labels
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(c.label.clone());
                let Some(xds) = &c.xds else {
                    return Verdict::Unavailable("no xDS".into());
                };
                let bad = xds.route_configurations().iter().any(|rc| {
                    refused(&rc.response_headers_to_add)
                        || rc.virtual_hosts.iter().any(|vh| {
                            refused(&vh.response_headers_to_add)
                                || vh.routes.iter().any(|r| refused(&r.response_headers_to_add))
                        })
                });
                if bad {
                    Verdict::Rejected(MESSAGE.into())
                } else {
                    Verdict::Accepted
                }
            })
            .collect()
    }
}
