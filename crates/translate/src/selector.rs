//! Kubernetes label selectors (matchLabels + matchExpressions).

use std::collections::BTreeMap;

/// One `matchExpressions` entry.
pub struct Requirement<'a> {
    pub key: &'a str,
    pub operator: &'a str,
    pub values: &'a [String],
}

/// Why a `matchExpressions` entry is invalid, as the API server's
/// `LabelSelectorAsSelector` refuses it (the caller names the field).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    #[error("operator {operator} needs at least one value (key {key:?})")]
    NoValues { operator: String, key: String },
    #[error("operator {operator} takes no values (key {key:?})")]
    Values { operator: String, key: String },
    #[error("unknown operator {operator:?} (key {key:?}; allowed: In, NotIn, Exists, DoesNotExist)")]
    UnknownOperator { operator: String, key: String },
}

/// Why a `matchExpressions` entry is invalid, or `None` when it is valid.
pub fn requirement_problem(r: &Requirement<'_>) -> Option<RequirementError> {
    let operator = r.operator.to_string();
    let key = r.key.to_string();
    match r.operator {
        "In" | "NotIn" if r.values.is_empty() => Some(RequirementError::NoValues { operator, key }),
        "Exists" | "DoesNotExist" if !r.values.is_empty() => Some(RequirementError::Values { operator, key }),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
        _ => Some(RequirementError::UnknownOperator { operator, key }),
    }
}

/// Whether `labels` satisfy the selector. An unknown operator matches
/// nothing (fail closed: a typo must not open a listener to every namespace).
pub fn matches(
    match_labels: Option<&BTreeMap<String, String>>,
    expressions: &[Requirement<'_>],
    labels: &BTreeMap<String, String>,
) -> bool {
    let labels_ok = match_labels.is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    labels_ok
        && expressions.iter().all(|r| match r.operator {
            "In" => labels.get(r.key).is_some_and(|v| r.values.contains(v)),
            "NotIn" => labels.get(r.key).is_none_or(|v| !r.values.contains(v)),
            "Exists" => labels.contains_key(r.key),
            "DoesNotExist" => !labels.contains_key(r.key),
            _ => false,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn match_labels_and_expressions() {
        let l = labels(&[("env", "prod"), ("team", "a")]);
        assert!(matches(Some(&labels(&[("env", "prod")])), &[], &l));
        assert!(!matches(Some(&labels(&[("env", "dev")])), &[], &l));
        let vals = vec!["a".to_string(), "b".to_string()];
        assert!(matches(
            None,
            &[Requirement {
                key: "team",
                operator: "In",
                values: &vals
            }],
            &l
        ));
        assert!(!matches(
            None,
            &[Requirement {
                key: "team",
                operator: "NotIn",
                values: &vals
            }],
            &l
        ));
        assert!(matches(
            None,
            &[Requirement {
                key: "x",
                operator: "DoesNotExist",
                values: &[]
            }],
            &l
        ));
        assert!(!matches(
            None,
            &[Requirement {
                key: "x",
                operator: "Exists",
                values: &[]
            }],
            &l
        ));
        assert!(!matches(
            None,
            &[Requirement {
                key: "team",
                operator: "Bogus",
                values: &vals
            }],
            &l
        ));
    }

    #[test]
    fn requirement_problems_follow_the_api_server() {
        let vals = vec!["a".to_string()];
        let req = |operator, values: &'static [String]| Requirement {
            key: "k",
            operator,
            values,
        };
        assert!(requirement_problem(&req("In", &[])).is_some());
        assert!(requirement_problem(&req("NotIn", &[])).is_some());
        assert!(requirement_problem(&req("Bogus", &[])).is_some());
        let unknown = requirement_problem(&req("Bogus", &[]));
        assert_eq!(
            unknown,
            Some(RequirementError::UnknownOperator {
                operator: "Bogus".into(),
                key: "k".into()
            })
        );
        assert_eq!(
            unknown.map(|e| e.to_string()).as_deref(),
            Some(r#"unknown operator "Bogus" (key "k"; allowed: In, NotIn, Exists, DoesNotExist)"#)
        );
        assert_eq!(
            requirement_problem(&req("In", &[]))
                .map(|e| e.to_string())
                .as_deref(),
            Some(r#"operator In needs at least one value (key "k")"#)
        );
        for op in ["In", "NotIn"] {
            let r = Requirement {
                key: "k",
                operator: op,
                values: &vals,
            };
            assert!(requirement_problem(&r).is_none());
        }
        for op in ["Exists", "DoesNotExist"] {
            assert!(requirement_problem(&req(op, &[])).is_none());
            let r = Requirement {
                key: "k",
                operator: op,
                values: &vals,
            };
            assert!(requirement_problem(&r).is_some());
        }
    }
}
