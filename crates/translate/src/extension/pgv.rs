//! Envoy's protoc-gen-validate rules, read from the descriptors
//! (`validate.rules` field options in envoy-types' descriptor set) and
//! applied to an extension's reply: Envoy validates every resource it
//! loads against them and NACKs a violation (`connect_timeout` must be
//! positive, a `cluster` name at least one character, …).
//!
//! A subset is evaluated, the rules Envoy's API uses most: `message.required`,
//! required oneofs, string and bytes lengths, numeric and duration bounds,
//! repeated and map sizes (with string/numeric item rules), and
//! `enum.defined_only`. Rules not evaluated (patterns, well-known regexes,
//! `in`/`not_in` lists, inverted ranges) never refuse anything: this check
//! may miss a violation (STRICT's real Envoy does not), never invent one.
//!
//! Rules are compiled once per message type and kept (the set of types is
//! the descriptor set's, bounded).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use prost_reflect::{
    DynamicMessage, ExtensionDescriptor, FieldDescriptor, Kind, OneofDescriptor, ReflectMessage, Value,
};

/// Why a message breaks its validate rules; the text names the field
/// (the extension check adds the path to the message).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PgvError {
    #[error("{oneof}: one of its fields is required")]
    OneofRequired { oneof: String },
    /// `message.required` on an unset field.
    #[error("{field}: required")]
    Required { field: String },
    #[error("{field}: {violation}")]
    Field {
        field: String,
        #[source]
        violation: Violation,
    },
}

/// What one field's value breaks.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Violation {
    /// A required duration is unset.
    #[error("required")]
    Required,
    #[error("{count} entries is outside {min:?}..{max:?}")]
    MapSize {
        count: u64,
        min: Option<u64>,
        max: Option<u64>,
    },
    #[error("{0} (nanoseconds)")]
    Duration(#[source] BoundViolation),
    #[error("{count} items, at least {min} required")]
    TooFewItems { count: u64, min: u64 },
    #[error("{count} items, at most {max} allowed")]
    TooManyItems { count: u64, max: u64 },
    #[error("[{index}]: {violation}")]
    Item {
        index: usize,
        #[source]
        violation: Box<Violation>,
    },
    #[error("{value:?} is shorter than {min} characters")]
    TooShort { value: String, min: u64 },
    #[error("longer than {max} characters")]
    TooLong { max: u64 },
    /// A string's or a bytes field's length in bytes.
    #[error("{count} bytes is outside {min:?}..{max:?}")]
    ByteLength {
        count: u64,
        min: Option<u64>,
        max: Option<u64>,
    },
    #[error(transparent)]
    Bound(#[from] BoundViolation),
    #[error("{number} is not a defined value of {enum_name}")]
    UndefinedEnum { number: i32, enum_name: String },
}

/// A number outside its bound: `value {value} must be {relation} {limit}`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("value {value} must be {relation} {limit}")]
pub struct BoundViolation {
    pub value: f64,
    /// "greater than", "at least", "less than" or "at most".
    pub relation: &'static str,
    pub limit: f64,
}

/// One bound on a number (as i128 for integers and nanoseconds, or f64).
#[derive(Clone, Debug, Default)]
struct Bounds {
    gt: Option<f64>,
    gte: Option<f64>,
    lt: Option<f64>,
    lte: Option<f64>,
}

impl Bounds {
    fn from(rules: &DynamicMessage, read: impl Fn(&Value) -> Option<f64>) -> Self {
        let get = |name: &str| {
            rules
                .has_field_by_name(name)
                .then(|| rules.get_field_by_name(name).and_then(|v| read(&v)))
                .flatten()
        };
        let b = Self {
            gt: get("gt"),
            gte: get("gte"),
            lt: get("lt"),
            lte: get("lte"),
        };
        // An inverted range means "outside"; not evaluated.
        let lower = b.gt.or(b.gte);
        let upper = b.lt.or(b.lte);
        match (lower, upper) {
            (Some(l), Some(u)) if u < l => Self::default(),
            _ => b,
        }
    }

    fn check(&self, x: f64) -> Result<(), BoundViolation> {
        let bad = |relation: &'static str, limit: f64| {
            Err(BoundViolation {
                value: x,
                relation,
                limit,
            })
        };
        if let Some(v) = self.gt
            && x <= v
        {
            return bad("greater than", v);
        }
        if let Some(v) = self.gte
            && x < v
        {
            return bad("at least", v);
        }
        if let Some(v) = self.lt
            && x >= v
        {
            return bad("less than", v);
        }
        if let Some(v) = self.lte
            && x > v
        {
            return bad("at most", v);
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
enum Rule {
    Str {
        min_len: Option<u64>,
        max_len: Option<u64>,
        min_bytes: Option<u64>,
        max_bytes: Option<u64>,
        ignore_empty: bool,
    },
    Bytes {
        min_len: Option<u64>,
        max_len: Option<u64>,
    },
    Number {
        bounds: Bounds,
        ignore_empty: bool,
    },
    Duration {
        required: bool,
        bounds: Bounds,
    },
    Repeated {
        min_items: Option<u64>,
        max_items: Option<u64>,
        items: Option<Box<Rule>>,
        ignore_empty: bool,
    },
    Map {
        min_pairs: Option<u64>,
        max_pairs: Option<u64>,
    },
    DefinedEnum,
    None,
}

#[derive(Debug, Default)]
struct MessageRules {
    /// (field, message.required, rule)
    fields: Vec<(FieldDescriptor, bool, Rule)>,
    required_oneofs: Vec<OneofDescriptor>,
}

static CACHE: LazyLock<Mutex<HashMap<String, Arc<MessageRules>>>> = LazyLock::new(Default::default);

fn extension(name: &str) -> Option<ExtensionDescriptor> {
    crate::output::descriptor_pool().get_extension_by_name(name)
}

fn u64_of(v: &Value) -> Option<u64> {
    match v {
        Value::U64(n) => Some(*n),
        Value::U32(n) => Some(u64::from(*n)),
        Value::I64(n) => u64::try_from(*n).ok(),
        Value::I32(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

fn f64_of(v: &Value) -> Option<f64> {
    match v {
        Value::U64(n) => Some(*n as f64),
        Value::U32(n) => Some(f64::from(*n)),
        Value::I64(n) => Some(*n as f64),
        Value::I32(n) => Some(f64::from(*n)),
        Value::F64(n) => Some(*n),
        Value::F32(n) => Some(f64::from(*n)),
        _ => None,
    }
}

/// A `google.protobuf.Duration` as nanoseconds.
fn nanos_of(v: &Value) -> Option<f64> {
    let Value::Message(d) = v else { return None };
    let seconds = d.get_field_by_name("seconds").and_then(|v| v.as_i64())?;
    let nanos = d.get_field_by_name("nanos").and_then(|v| v.as_i32())?;
    Some(seconds as f64 * 1e9 + f64::from(nanos))
}

fn opt_u64(m: &DynamicMessage, name: &str) -> Option<u64> {
    m.has_field_by_name(name)
        .then(|| m.get_field_by_name(name).and_then(|v| u64_of(&v)))
        .flatten()
}

fn flag(m: &DynamicMessage, name: &str) -> bool {
    m.get_field_by_name(name).and_then(|v| v.as_bool()) == Some(true)
}

/// One `FieldRules` message → the rule it sets (its `type` oneof).
fn compile_rule(rules: &DynamicMessage) -> Rule {
    let set = |name: &str| {
        rules
            .has_field_by_name(name)
            .then(|| rules.get_field_by_name(name))
            .flatten()
            .and_then(|v| v.as_message().cloned())
    };
    if let Some(s) = set("string") {
        return Rule::Str {
            min_len: opt_u64(&s, "min_len"),
            max_len: opt_u64(&s, "max_len"),
            min_bytes: opt_u64(&s, "min_bytes"),
            max_bytes: opt_u64(&s, "max_bytes"),
            ignore_empty: flag(&s, "ignore_empty"),
        };
    }
    if let Some(s) = set("bytes") {
        return Rule::Bytes {
            min_len: opt_u64(&s, "min_len"),
            max_len: opt_u64(&s, "max_len"),
        };
    }
    for numeric in [
        "uint32", "uint64", "int32", "int64", "double", "float", "sint32", "sint64", "fixed32", "fixed64",
        "sfixed32", "sfixed64",
    ] {
        if let Some(n) = set(numeric) {
            return Rule::Number {
                bounds: Bounds::from(&n, f64_of),
                ignore_empty: flag(&n, "ignore_empty"),
            };
        }
    }
    if let Some(d) = set("duration") {
        return Rule::Duration {
            required: flag(&d, "required"),
            bounds: Bounds::from(&d, nanos_of),
        };
    }
    if let Some(r) = set("repeated") {
        let items = r
            .has_field_by_name("items")
            .then(|| r.get_field_by_name("items"))
            .flatten()
            .and_then(|v| v.as_message().map(compile_rule))
            .filter(|rule| !matches!(rule, Rule::None))
            .map(Box::new);
        return Rule::Repeated {
            min_items: opt_u64(&r, "min_items"),
            max_items: opt_u64(&r, "max_items"),
            items,
            ignore_empty: flag(&r, "ignore_empty"),
        };
    }
    if let Some(m) = set("map") {
        return Rule::Map {
            min_pairs: opt_u64(&m, "min_pairs"),
            max_pairs: opt_u64(&m, "max_pairs"),
        };
    }
    if let Some(e) = set("enum")
        && flag(&e, "defined_only")
    {
        return Rule::DefinedEnum;
    }
    Rule::None
}

fn rules_of(desc: &prost_reflect::MessageDescriptor) -> Arc<MessageRules> {
    if let Ok(cache) = CACHE.lock()
        && let Some(r) = cache.get(desc.full_name())
    {
        return r.clone();
    }
    let mut out = MessageRules::default();
    if let Some(ext) = extension("validate.rules") {
        for field in desc.fields() {
            let options = field.options();
            if !options.has_extension(&ext) {
                continue;
            }
            let Some(rules) = options.get_extension(&ext).as_message().cloned() else {
                continue;
            };
            let required = rules
                .get_field_by_name("message")
                .and_then(|m| m.as_message().map(|m| flag(m, "required")))
                .unwrap_or(false);
            let rule = compile_rule(&rules);
            if required || !matches!(rule, Rule::None) {
                out.fields.push((field, required, rule));
            }
        }
    }
    if let Some(ext) = extension("validate.required") {
        for oneof in desc.oneofs() {
            let options = oneof.options();
            if options.has_extension(&ext) && options.get_extension(&ext).as_bool() == Some(true) {
                out.required_oneofs.push(oneof);
            }
        }
    }
    let out = Arc::new(out);
    if let Ok(mut cache) = CACHE.lock() {
        cache.insert(desc.full_name().to_string(), out.clone());
    }
    out
}

/// The rules of `m`'s own fields (not nested messages: the caller walks
/// those). The error names the field.
pub fn check(m: &DynamicMessage) -> Result<(), PgvError> {
    let rules = rules_of(&m.descriptor());
    for oneof in &rules.required_oneofs {
        if !oneof.fields().any(|f| m.has_field(&f)) {
            return Err(PgvError::OneofRequired {
                oneof: oneof.name().to_string(),
            });
        }
    }
    for (field, required, rule) in &rules.fields {
        let set = m.has_field(field);
        // A member of a oneof is only checked when it is the one set
        // (`required` on it means "when chosen").
        if field.containing_oneof().is_some() && !set {
            continue;
        }
        if *required && !set {
            return Err(PgvError::Required {
                field: field.name().to_string(),
            });
        }
        let value = m.get_field(field);
        check_value(field, &value, set, rule).map_err(|violation| PgvError::Field {
            field: field.name().to_string(),
            violation,
        })?;
    }
    Ok(())
}

/// The value a scalar rule applies to: a wrapper (`UInt32Value`, …) is
/// checked through its `value` when set, and not at all when unset.
fn scalar(field_kind: &Kind, value: &Value, set: bool) -> Option<Value> {
    match (field_kind, value) {
        (Kind::Message(d), Value::Message(w)) if d.full_name().starts_with("google.protobuf.") => set
            .then(|| w.get_field_by_name("value").map(|v| v.into_owned()))
            .flatten(),
        (Kind::Message(_), _) => None,
        _ => Some(value.clone()),
    }
}

fn check_value(field: &FieldDescriptor, value: &Value, set: bool, rule: &Rule) -> Result<(), Violation> {
    match (rule, value) {
        (Rule::Repeated { .. }, Value::List(items)) => check_repeated(field, items, rule),
        (Rule::Map { min_pairs, max_pairs }, Value::Map(entries)) => {
            let n = entries.len() as u64;
            if min_pairs.is_some_and(|m| n < m) || max_pairs.is_some_and(|m| n > m) {
                return Err(Violation::MapSize {
                    count: n,
                    min: *min_pairs,
                    max: *max_pairs,
                });
            }
            Ok(())
        }
        (Rule::Duration { required, bounds }, v) => {
            if !set {
                return if *required {
                    Err(Violation::Required)
                } else {
                    Ok(())
                };
            }
            match nanos_of(v) {
                Some(n) => bounds.check(n).map_err(Violation::Duration),
                None => Ok(()),
            }
        }
        (rule, v) => match scalar(&field.kind(), v, set) {
            Some(v) => check_scalar(&field.kind(), &v, rule),
            None => Ok(()),
        },
    }
}

fn check_repeated(field: &FieldDescriptor, items: &[Value], rule: &Rule) -> Result<(), Violation> {
    let Rule::Repeated {
        min_items,
        max_items,
        items: item_rule,
        ignore_empty,
    } = rule
    else {
        return Ok(());
    };
    if *ignore_empty && items.is_empty() {
        return Ok(());
    }
    let n = items.len() as u64;
    if let Some(m) = min_items
        && n < *m
    {
        return Err(Violation::TooFewItems { count: n, min: *m });
    }
    if let Some(m) = max_items
        && n > *m
    {
        return Err(Violation::TooManyItems { count: n, max: *m });
    }
    if let Some(r) = item_rule {
        for (i, v) in items.iter().enumerate() {
            check_scalar(&field.kind(), v, r).map_err(|e| Violation::Item {
                index: i,
                violation: Box::new(e),
            })?;
        }
    }
    Ok(())
}

fn check_scalar(kind: &Kind, v: &Value, rule: &Rule) -> Result<(), Violation> {
    match (rule, v) {
        (
            Rule::Str {
                min_len,
                max_len,
                min_bytes,
                max_bytes,
                ignore_empty,
            },
            Value::String(s),
        ) => {
            if *ignore_empty && s.is_empty() {
                return Ok(());
            }
            let chars = s.chars().count() as u64;
            let bytes = s.len() as u64;
            if let Some(min) = *min_len
                && chars < min
            {
                return Err(Violation::TooShort {
                    value: s.clone(),
                    min,
                });
            }
            if let Some(max) = *max_len
                && chars > max
            {
                return Err(Violation::TooLong { max });
            }
            if min_bytes.is_some_and(|m| bytes < m) || max_bytes.is_some_and(|m| bytes > m) {
                return Err(Violation::ByteLength {
                    count: bytes,
                    min: *min_bytes,
                    max: *max_bytes,
                });
            }
            Ok(())
        }
        (Rule::Bytes { min_len, max_len }, Value::Bytes(b)) => {
            let n = b.len() as u64;
            if min_len.is_some_and(|m| n < m) || max_len.is_some_and(|m| n > m) {
                return Err(Violation::ByteLength {
                    count: n,
                    min: *min_len,
                    max: *max_len,
                });
            }
            Ok(())
        }
        (Rule::Number { bounds, ignore_empty }, v) => match f64_of(v) {
            Some(x) if !(*ignore_empty && x == 0.0) => Ok(bounds.check(x)?),
            _ => Ok(()),
        },
        (Rule::DefinedEnum, Value::EnumNumber(n)) => match kind {
            Kind::Enum(e) if e.get_value(*n).is_none() => Err(Violation::UndefinedEnum {
                number: *n,
                enum_name: e.name().to_string(),
            }),
            _ => Ok(()),
        },
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::route::v3::{RouteAction, route_action};
    use prost::{Message, Name};

    use super::*;

    fn dynamic<M: Message + Name>(m: &M) -> Option<DynamicMessage> {
        let desc = crate::output::descriptor_pool().get_message_by_name(&M::full_name())?;
        DynamicMessage::decode(desc, m.encode_to_vec().as_slice()).ok()
    }

    /// Each error is its variant, and its text is what the hook's
    /// failure shows (`RouteAction.cluster` is `min_len: 1`; `priority`
    /// is `enum.defined_only`).
    #[test]
    fn violations_name_the_variant_and_keep_their_text() {
        let empty_cluster = RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(String::new())),
            ..Default::default()
        };
        let err = dynamic(&empty_cluster).and_then(|m| check(&m).err());
        assert_eq!(
            err,
            Some(PgvError::Field {
                field: "cluster".into(),
                violation: Violation::TooShort {
                    value: String::new(),
                    min: 1
                },
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some(r#"cluster: "" is shorter than 1 characters"#)
        );
        let bad_priority = RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster("c".into())),
            priority: 7,
            ..Default::default()
        };
        let err = dynamic(&bad_priority).and_then(|m| check(&m).err());
        assert_eq!(
            err,
            Some(PgvError::Field {
                field: "priority".into(),
                violation: Violation::UndefinedEnum {
                    number: 7,
                    enum_name: "RoutingPriority".into()
                },
            })
        );
        assert_eq!(
            err.map(|e| e.to_string()).as_deref(),
            Some("priority: 7 is not a defined value of RoutingPriority")
        );
        assert_eq!(
            Violation::Duration(BoundViolation {
                value: 0.0,
                relation: "greater than",
                limit: 0.0
            })
            .to_string(),
            "value 0 must be greater than 0 (nanoseconds)"
        );
    }
}
