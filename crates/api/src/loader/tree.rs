//! An untyped document tree that remembers the line of every node, so that a
//! field path (from `serde_path_to_error`, or from the unknown-field check)
//! can be turned back into a line of the input file.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use serde_saphyr::Spanned;

/// A node and the 1-based line it starts on (0 when unknown).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) line: usize,
    pub(crate) value: NodeValue,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) key: String,
    /// Line of the key (0 when unknown).
    pub(crate) key_line: usize,
    pub(crate) value: Node,
}

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    Key(String),
    Index(usize),
    /// A step that cannot be followed in the tree (an enum variant or an
    /// unknown step); rendering skips it.
    Opaque,
}

/// Renders a path as `spec.rules[0].matches`; the empty path renders as "".
pub(crate) fn render_path(path: &[Segment]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Index(index) => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
            Segment::Opaque => {}
        }
    }
    out
}

/// Converts a `serde_path_to_error` path into segments.
pub(crate) fn segments(path: &serde_path_to_error::Path) -> Vec<Segment> {
    path.iter()
        .map(|segment| match segment {
            serde_path_to_error::Segment::Map { key } => Segment::Key(key.clone()),
            serde_path_to_error::Segment::Seq { index } => Segment::Index(*index),
            serde_path_to_error::Segment::Enum { .. } | serde_path_to_error::Segment::Unknown => {
                Segment::Opaque
            }
        })
        .collect()
}

impl Node {
    /// The line of the deepest node `path` reaches (for a mapping entry, the
    /// line of its key); `fallback` when nothing on the path has a known line.
    pub(crate) fn line_at(&self, path: &[Segment], fallback: usize) -> usize {
        let mut line = if self.line > 0 { self.line } else { fallback };
        let mut node = self;
        for segment in path {
            match (segment, &node.value) {
                (Segment::Key(key), NodeValue::Map(entries)) => {
                    let Some(entry) = entries.iter().rev().find(|e| &e.key == key) else {
                        break;
                    };
                    if entry.key_line > 0 {
                        line = entry.key_line;
                    } else if entry.value.line > 0 {
                        line = entry.value.line;
                    }
                    node = &entry.value;
                }
                (Segment::Index(index), NodeValue::Seq(items)) => {
                    let Some(item) = items.get(*index) else {
                        break;
                    };
                    if item.line > 0 {
                        line = item.line;
                    }
                    node = item;
                }
                (Segment::Opaque, _) => {}
                _ => break,
            }
        }
        line
    }

    /// The entry `key` of a mapping node.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            NodeValue::Map(entries) => entries.iter().rev().find(|e| e.key == key).map(|e| &e.value),
            _ => None,
        }
    }

    /// The JSON value this node stands for (what `kubectl` would send).
    pub(crate) fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::UInt(u) => Value::from(*u),
            NodeValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(|| Value::String(f.to_string()), Value::Number)
            }
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                let mut map = Map::new();
                for entry in entries {
                    map.insert(entry.key.clone(), entry.value.to_json());
                }
                Value::Object(map)
            }
        }
    }

    /// A tree for a value whose lines are unknown: every node gets `line`.
    pub(crate) fn from_json(value: &Value, line: usize) -> Node {
        let value = match value {
            Value::Null => NodeValue::Null,
            Value::Bool(b) => NodeValue::Bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    NodeValue::UInt(u)
                } else if let Some(i) = n.as_i64() {
                    NodeValue::Int(i)
                } else {
                    NodeValue::Float(n.as_f64().unwrap_or(0.0))
                }
            }
            Value::String(s) => NodeValue::Str(s.clone()),
            Value::Array(items) => NodeValue::Seq(items.iter().map(|v| Node::from_json(v, line)).collect()),
            Value::Object(map) => NodeValue::Map(
                map.iter()
                    .map(|(k, v)| Entry {
                        key: k.clone(),
                        key_line: line,
                        value: Node::from_json(v, line),
                    })
                    .collect(),
            ),
        };
        Node { line, value }
    }

    /// Moves every known line by `delta` (for chunks parsed on their own).
    pub(crate) fn shift(&mut self, delta: usize) {
        if self.line > 0 {
            self.line += delta;
        }
        match &mut self.value {
            NodeValue::Seq(items) => items.iter_mut().for_each(|n| n.shift(delta)),
            NodeValue::Map(entries) => {
                for entry in entries {
                    if entry.key_line > 0 {
                        entry.key_line += delta;
                    }
                    entry.value.shift(delta);
                }
            }
            _ => {}
        }
    }

    /// Whether a tree read from JSON is one the YAML reader reads the same
    /// (see `load_fast_json`): no duplicate key, and well inside its
    /// limits (250,000 nodes, depth 64, 1,024 bytes of lookahead for a key),
    /// and no `<<` key (a merge key to YAML).
    pub(crate) fn within_yaml_limits(&self, depth: usize, nodes: &mut usize) -> bool {
        const MAX_NODES: usize = 100_000;
        const MAX_DEPTH: usize = 40;
        const MAX_KEY_BYTES: usize = 512;
        *nodes += 1;
        if *nodes > MAX_NODES || depth > MAX_DEPTH {
            return false;
        }
        match &self.value {
            NodeValue::Seq(items) => items.iter().all(|n| n.within_yaml_limits(depth + 1, nodes)),
            NodeValue::Map(entries) => {
                *nodes += entries.len();
                let unique = if entries.len() <= 16 {
                    entries
                        .iter()
                        .enumerate()
                        .all(|(i, e)| entries.iter().skip(i + 1).all(|f| f.key != e.key))
                } else {
                    let mut seen = std::collections::HashSet::new();
                    entries.iter().all(|e| seen.insert(e.key.as_str()))
                };
                unique
                    && entries.iter().all(|e| {
                        // `<<` may read as a YAML merge key.
                        e.key.len() <= MAX_KEY_BYTES
                            && e.key != "<<"
                            && e.value.within_yaml_limits(depth + 1, nodes)
                    })
            }
            _ => true,
        }
    }

    /// A short description of the node's type, for messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) | NodeValue::UInt(_) | NodeValue::Float(_) => "a number",
            NodeValue::Str(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<NodeValue>::deserialize(deserializer)?;
        Ok(Node {
            line: spanned.referenced.line() as usize,
            value: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor::<true>)
    }
}

/// A [`Node`] read without spans: every line is 0 (unknown). The loader's
/// fast path (see `loader.rs`): recording a span for every node costs more
/// than the parse itself, and lines are only needed for a diagnostic.
pub(crate) struct PlainNode(pub(crate) Node);

impl<'de> Deserialize<'de> for PlainNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = deserializer.deserialize_any(NodeVisitor::<false>)?;
        Ok(PlainNode(Node { line: 0, value }))
    }
}

/// Builds a [`NodeValue`]; children are spanned [`Node`]s when `SPANNED`,
/// [`PlainNode`]s otherwise. Everything else is the same, so both reads
/// of a document give the same tree but for its lines.
struct NodeVisitor<const SPANNED: bool>;

impl<const SPANNED: bool> NodeVisitor<SPANNED> {
    fn child<'de, D: Deserializer<'de>>(deserializer: D) -> Result<NodeValue, D::Error> {
        if SPANNED {
            NodeValue::deserialize(deserializer)
        } else {
            deserializer.deserialize_any(NodeVisitor::<false>)
        }
    }
}

impl<'de, const SPANNED: bool> Visitor<'de> for NodeVisitor<SPANNED> {
    type Value = NodeValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<NodeValue, D::Error> {
        Self::child(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<NodeValue, D::Error> {
        Self::child(deserializer)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeValue, E> {
        Ok(NodeValue::UInt(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<NodeValue, E> {
        Ok(match i64::try_from(v) {
            Ok(i) => NodeValue::Int(i),
            Err(_) => match u64::try_from(v) {
                Ok(u) => NodeValue::UInt(u),
                Err(_) => NodeValue::Float(v as f64),
            },
        })
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeValue, E> {
        Ok(match u64::try_from(v) {
            Ok(u) => NodeValue::UInt(u),
            Err(_) => NodeValue::Float(v as f64),
        })
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<NodeValue, E> {
        Ok(NodeValue::Float(v))
    }

    fn visit_char<E: de::Error>(self, v: char) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v.to_string()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(String::from_utf8_lossy(v).into_owned()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        if SPANNED {
            while let Some(item) = seq.next_element::<Node>()? {
                items.push(item);
            }
        } else {
            while let Some(PlainNode(item)) = seq.next_element::<PlainNode>()? {
                items.push(item);
            }
        }
        Ok(NodeValue::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries: Vec<Entry> = Vec::new();
        if !SPANNED {
            while let Some(key) = map.next_key::<String>()? {
                let PlainNode(value) = map.next_value::<PlainNode>()?;
                entries.push(Entry {
                    key,
                    key_line: 0,
                    value,
                });
            }
            return Ok(NodeValue::Map(entries));
        }
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Node>()?;
            entries.push(Entry {
                key: key.value,
                key_line: key.referenced.line() as usize,
                value,
            });
        }
        Ok(NodeValue::Map(entries))
    }
}
