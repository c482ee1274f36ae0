//! Kubernetes label selectors (matchLabels + matchExpressions).

use std::collections::BTreeMap;

/// One `matchExpressions` entry.
pub struct Requirement<'a> {
    pub key: &'a str,
    pub operator: &'a str,
    pub values: &'a [String],
}

/// Why a `matchExpressions` entry is invalid, as the API server's
/// `LabelSelectorAsSelector` would refuse it, or `None` when it is valid.
pub fn requirement_problem(r: &Requirement<'_>) -> Option<String> {
    match r.operator {
        "In" | "NotIn" if r.values.is_empty() => Some(format!(
            "operator {} needs at least one value (key {:?})",
            r.operator, r.key
        )),
        "Exists" | "DoesNotExist" if !r.values.is_empty() => Some(format!(
            "operator {} takes no values (key {:?})",
            r.operator, r.key
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
        other => Some(format!(
            "unknown operator {other:?} (key {:?}; allowed: In, NotIn, Exists, DoesNotExist)",
            r.key
        )),
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
