//! Snapshots whose unchanged documents keep their objects, as `serve`'s
//! loader gives them: the incremental translator's by-pointer paths are
//! then taken (`incremental_hostile.rs`, `incremental_standing.rs`).

use std::collections::BTreeMap;

use api::Inputs;

/// Documents by file name, each loaded once per text: an unchanged
/// document keeps its objects (the same `Arc`s) from snapshot to snapshot.
#[derive(Default)]
pub struct Docs {
    pub files: BTreeMap<String, String>,
    loaded: BTreeMap<String, (String, Inputs)>,
}

impl Docs {
    pub fn set(&mut self, name: &str, text: &str) {
        self.files.insert(name.to_string(), text.to_string());
    }

    pub fn remove(&mut self, name: &str) {
        self.files.remove(name);
    }

    /// The snapshot: every file's objects, in file-name order.
    pub fn inputs(&mut self) -> Inputs {
        let mut out = Inputs::default();
        for (name, text) in &self.files {
            let fresh = self.loaded.get(name).is_none_or(|(t, _)| t != text);
            if fresh {
                let loaded = api::loader::load_str(name, text);
                let errors: Vec<_> = loaded
                    .diagnostics
                    .iter()
                    .filter(|d| matches!(d.severity, api::Severity::Error))
                    .collect();
                assert!(errors.is_empty(), "{name}: loader errors {errors:?}\n{text}");
                self.loaded.insert(name.clone(), (text.clone(), loaded.inputs));
            }
            out.extend(self.loaded[name].1.clone());
        }
        out
    }
}
