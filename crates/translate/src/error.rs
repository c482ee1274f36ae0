//! Errors found in a route rule, with the class and Gateway API reason that
//! status and metrics report.

use std::fmt;

/// Design §4 error classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorClass {
    /// A referenced object is missing (may be eventual consistency).
    Referential,
    /// Cannot be expressed in Envoy (bad regex, bad header name).
    Structural,
    /// Expressible but unsafe or contradictory.
    Semantic,
    /// An extension hook failed.
    Extension,
    /// The validator itself failed; never a replacement reason alone.
    Environment,
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorClass::Referential => "referential",
            ErrorClass::Structural => "structural",
            ErrorClass::Semantic => "semantic",
            ErrorClass::Extension => "extension",
            ErrorClass::Environment => "environment",
        })
    }
}

/// Why one rule cannot be programmed as written. `field` is the path from
/// the object root, e.g. `spec.rules[1].filters[0].requestHeaderModifier.set[0].name`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
#[error("{field}: {message}")]
pub struct RuleError {
    pub field: String,
    pub message: String,
    pub class: ErrorClass,
}

impl RuleError {
    pub fn structural(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            class: ErrorClass::Structural,
        }
    }

    pub fn semantic(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            class: ErrorClass::Semantic,
        }
    }

    pub fn referential(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            class: ErrorClass::Referential,
        }
    }

    pub fn extension(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
            class: ErrorClass::Extension,
        }
    }
}
