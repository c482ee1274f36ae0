//! The conformance cases as data: `index.json` gives the order, each test
//! folder a `cases.json` (schema in the cases' README) and its manifests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

#[derive(Debug, Deserialize)]
pub struct IndexEntry {
    pub test: String,
}

#[derive(Debug, Deserialize)]
pub struct Test {
    pub test: String,
    #[serde(default)]
    pub manifests: Vec<String>,
    #[serde(default)]
    pub status_assertions: Vec<StatusAssertion>,
    #[serde(default)]
    pub request_groups: Vec<RequestGroup>,
    #[serde(default)]
    pub weighted_distribution: Option<WeightedDistribution>,
    /// The folder the test was read from (manifests are relative to it).
    #[serde(skip)]
    pub dir: PathBuf,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(tag = "assert")]
pub enum StatusAssertion {
    GatewayAndHTTPRoutesMustBeAccepted {
        gateway: String,
        #[serde(default)]
        routes: Vec<String>,
    },
    HTTPRouteMustHaveCondition {
        route: String,
        gateway: String,
        condition: ExpectedCondition,
    },
    HTTPRouteMustHaveNoAcceptedParents {
        route: String,
    },
    GatewayMustHaveZeroRoutes {
        gateway: String,
    },
    HTTPRouteMustHaveParents {
        route: String,
        parents: Vec<ExpectedParent>,
        #[serde(default)]
        namespace_required: bool,
    },
    GatewayStatusMustHaveListeners {
        gateway: String,
        listeners: Vec<ExpectedListener>,
    },
    // ListenerSet tests (README "ListenerSet status assertions").
    GatewayMustHaveAddress {
        gateway: String,
    },
    GatewayMustHaveCondition {
        gateway: String,
        condition: ExpectedCondition,
    },
    GatewayMustHaveAttachedListeners {
        gateway: String,
        #[serde(rename = "attachedListenerSets")]
        attached_listener_sets: i64,
    },
    GatewayListenersMustHaveConditions {
        gateway: String,
        #[serde(default)]
        listener_names: Vec<String>,
        conditions: Vec<ExpectedCondition>,
    },
    ListenerSetMustHaveCondition {
        listenerset: String,
        condition: ExpectedCondition,
    },
    ListenerSetListenersMustHaveConditions {
        listenerset: String,
        #[serde(default)]
        listener_names: Vec<String>,
        conditions: Vec<ExpectedCondition>,
    },
    ListenerSetStatusMustHaveListeners {
        listenerset: String,
        listeners: Vec<ExpectedListener>,
    },
    RoutesAndParentMustBeAccepted {
        parent_kind: String,
        parent: String,
        route_kind: String,
        routes: Vec<String>,
    },
}

#[derive(Debug, Deserialize, Clone)]
pub struct ExpectedCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Deserialize, Clone)]
pub struct ExpectedParent {
    #[serde(rename = "parentRef")]
    pub parent_ref: ExpectedParentRef,
    #[serde(default)]
    pub conditions: Vec<ExpectedCondition>,
}

#[derive(Debug, Deserialize, Clone)]
pub struct ExpectedParentRef {
    pub name: String,
    /// `Gateway` when absent.
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Debug, Deserialize, Clone)]
pub struct ExpectedListener {
    pub name: String,
    #[serde(default, rename = "supportedKinds")]
    pub supported_kinds: Vec<ExpectedKind>,
    #[serde(default, rename = "attachedRoutes")]
    pub attached_routes: i64,
    #[serde(default)]
    pub conditions: Vec<ExpectedCondition>,
}

#[derive(Debug, Deserialize, Clone, PartialEq, Eq)]
pub struct ExpectedKind {
    #[serde(default)]
    pub group: Option<String>,
    pub kind: String,
}

#[derive(Debug, Deserialize)]
pub struct RequestGroup {
    #[serde(default)]
    pub subtest: Option<String>,
    pub gateway: String,
    pub gateway_listener_port: u16,
    pub scheme: String,
    #[serde(default)]
    pub mode: String,
    #[serde(default)]
    pub precondition: Option<Precondition>,
    pub cases: Vec<Case>,
}

#[derive(Debug, Deserialize)]
pub struct Precondition {
    pub delete: ObjectRef,
}

#[derive(Debug, Deserialize)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Deserialize, Clone)]
pub struct Case {
    pub name: String,
    pub request: Request,
    #[serde(default)]
    pub backend_set_response_headers: BTreeMap<String, String>,
    #[serde(default)]
    pub server_name: Option<String>,
    pub expected: Expected,
}

#[derive(Debug, Deserialize, Clone)]
pub struct Request {
    #[serde(default)]
    pub host: String,
    pub path: String,
    #[serde(default = "get")]
    pub method: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

fn get() -> String {
    "GET".into()
}

#[derive(Debug, Deserialize, Clone)]
pub struct Expected {
    pub status: Vec<u16>,
    #[serde(default)]
    pub backend: Option<String>,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub backend_request: Option<BackendRequest>,
    #[serde(default)]
    pub response_headers: BTreeMap<String, String>,
    #[serde(default)]
    pub response_absent_headers: Vec<String>,
    #[serde(default)]
    pub redirect: Option<Redirect>,
    #[serde(default)]
    pub mirrored_to: Vec<Mirror>,
}

#[derive(Debug, Deserialize, Clone, Default)]
pub struct BackendRequest {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    pub absent_headers: Vec<String>,
}

#[derive(Debug, Deserialize, Clone, Default)]
pub struct Redirect {
    #[serde(default)]
    pub scheme: String,
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub port: String,
    #[serde(default)]
    pub path: String,
}

#[derive(Debug, Deserialize, Clone)]
pub struct Mirror {
    pub name: String,
    pub namespace: String,
}

#[derive(Debug, Deserialize)]
pub struct WeightedDistribution {
    pub request: Request,
    pub expected_status: Vec<u16>,
    #[serde(default)]
    pub namespace: String,
    pub expected_weights: BTreeMap<String, f64>,
    pub total_requests: usize,
    pub concurrency: usize,
    pub tolerance: f64,
    pub max_attempts: usize,
}

/// Reads `index.json` and every listed test, in index order.
pub fn load(dir: &Path) -> anyhow::Result<Vec<Test>> {
    let index_path = dir.join("index.json");
    let index: Vec<IndexEntry> = read_json(&index_path)?;
    index
        .iter()
        .map(|e| {
            let tdir = dir.join(&e.test);
            let mut t: Test = read_json(&tdir.join("cases.json"))?;
            t.dir = tdir;
            Ok(t)
        })
        .collect()
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: invalid cases JSON", path.display()))
}
