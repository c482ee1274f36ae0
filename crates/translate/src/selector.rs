//! Kubernetes label selectors (matchLabels + matchExpressions).

use std::collections::BTreeMap;

/// One `matchExpressions` entry.
pub struct Requirement<'a> {
    pub key: &'a str,
    pub operator: &'a str,
    pub values: &'a [String],
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
}
