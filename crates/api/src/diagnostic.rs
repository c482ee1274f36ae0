//! Diagnostics: problems found in the inputs, reported beside the output.

use serde::Serialize;

use crate::Source;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem, shaped as design §5's `diagnostics` entries.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// `Kind namespace/name` (or `Kind name` for cluster-scoped kinds), when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// `path:line`, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub message: String,
}

impl Diagnostic {
    pub fn error(object: Option<String>, source: Option<&Source>, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, object, source, message)
    }

    pub fn warning(object: Option<String>, source: Option<&Source>, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, object, source, message)
    }

    fn new(
        severity: Severity,
        object: Option<String>,
        source: Option<&Source>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity,
            object,
            file: source.map(ToString::to_string),
            message: message.into(),
        }
    }
}
