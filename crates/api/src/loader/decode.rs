//! Typed decoding straight from a spanless tree, for the loader's fast path
//! (`loader.rs` `load_fast`).
//!
//! The reference path turns a document's [`Node`] tree into a
//! `serde_json::Value`, parses the typed object from it (with
//! `serde_path_to_error`, neutralising unreadable values), serialises the
//! object back into a `Value` and compares both to find unknown fields
//! (`objects.rs` `Document::load`). For a document that loads cleanly all
//! of that gives the object and nothing else; this module gets the same
//! object with neither intermediate `Value`:
//!
//! - [`from_node`] deserialises `T` from the tree, answering every request
//!   exactly as `serde_json`'s `&Value` deserializer answers it for the
//!   tree's `to_json()` (`{}` / `[]` / numbers / strings / `null`, unit
//!   enum variants as strings). Whatever is not plainly equal (a map as an
//!   enum, a non-finite float, a non-string map key, `serde_json`'s private
//!   tokens) is an error here, never a guess.
//! - [`unknown_fields`] walks the object's serialisation (the calls
//!   `serde_json::to_value` would receive) beside the tree, and says
//!   whether a key of the tree with a non-empty value is absent from it:
//!   the reference path's unknown-field check, without building the value.
//!
//! Any error or unknown field is a "bail": the caller drops the fast result
//! and the document takes the reference path, which finds and words the
//! diagnostics. So this module only has to be right when it succeeds, and
//! it may refuse anything it is unsure of; the differential tests compare
//! both paths (`loader/fast_path_tests.rs`, `tests/fast_yaml_differential.rs`).
//!
//! The tree must have no duplicate keys (the fast YAML reader and the JSON
//! fast path refuse them), since `to_json()` would merge them.

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde::ser::{self, Serialize};

use super::tree::{Entry, Node, NodeValue};

/// Why the fast decode gave up: the reference path takes the document.
#[derive(Debug)]
pub(crate) struct Bail(String);

impl fmt::Display for Bail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Bail {}

impl de::Error for Bail {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Bail(msg.to_string())
    }
}

impl ser::Error for Bail {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Bail(msg.to_string())
    }
}

fn bail<T>(why: &str) -> Result<T, Bail> {
    Err(Bail(why.to_string()))
}

/// Deserialises `T` from `root`, leaving out the root key `skip` (the
/// reference path removes `status` before parsing).
pub(crate) fn from_node<T: DeserializeOwned>(root: &Node, skip: &str) -> Result<T, Bail> {
    T::deserialize(NodeDe {
        node: root,
        skip: Some(skip),
    })
}

/// Whether the serialisation of `object` lacks a key of `root` whose value
/// is not empty (null, `{}`, `[]`), with the root key `skip` left out:
/// the reference path's `unknown_fields(input, to_value(object))`.
/// `Err`: the serialisation has a shape this walk does not follow.
pub(crate) fn unknown_fields<T: Serialize>(object: &T, root: &Node, skip: &str) -> Result<bool, Bail> {
    let mut found = false;
    object.serialize(Cmp {
        input: Some(root),
        skip: Some(skip),
        found: &mut found,
    })?;
    Ok(found)
}

/// A node as a deserializer (see the module docs for what it mirrors).
#[derive(Clone, Copy)]
struct NodeDe<'a> {
    node: &'a Node,
    /// A key of this mapping to leave out (the root's `status`).
    skip: Option<&'a str>,
}

impl<'a> NodeDe<'a> {
    fn new(node: &'a Node) -> Self {
        NodeDe { node, skip: None }
    }

    fn unexpected(&self) -> de::Unexpected<'a> {
        match &self.node.value {
            NodeValue::Null => de::Unexpected::Unit,
            NodeValue::Bool(b) => de::Unexpected::Bool(*b),
            NodeValue::Int(i) => de::Unexpected::Signed(*i),
            NodeValue::UInt(u) => de::Unexpected::Unsigned(*u),
            NodeValue::Float(f) => de::Unexpected::Float(*f),
            NodeValue::Str(s) => de::Unexpected::Str(s),
            NodeValue::Seq(_) => de::Unexpected::Seq,
            NodeValue::Map(_) => de::Unexpected::Map,
        }
    }

    fn invalid<V: Visitor<'a>, R>(&self, visitor: &V) -> Result<R, Bail> {
        Err(de::Error::invalid_type(self.unexpected(), visitor))
    }

    /// A number as `serde_json::Number` gives it: non-negative integers
    /// as `u64` (`Value::from(i64)` stores them so), floats as `f64`.
    fn number<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.node.value {
            NodeValue::UInt(u) => visitor.visit_u64(u),
            NodeValue::Int(i) => match u64::try_from(i) {
                Ok(u) => visitor.visit_u64(u),
                Err(_) => visitor.visit_i64(i),
            },
            // `to_json` writes a non-finite float as a string.
            NodeValue::Float(f) if f.is_finite() => visitor.visit_f64(f),
            NodeValue::Float(_) => bail("non-finite float"),
            _ => self.invalid(&visitor),
        }
    }

    fn seq<V: Visitor<'a>>(items: &'a [Node], visitor: V) -> Result<V::Value, Bail> {
        let mut access = SeqDe { items: items.iter() };
        let value = visitor.visit_seq(&mut access)?;
        if access.items.len() == 0 {
            Ok(value)
        } else {
            bail("fewer elements in array")
        }
    }

    fn map<V: Visitor<'a>>(self, entries: &'a [Entry], visitor: V) -> Result<V::Value, Bail> {
        let mut access = MapDe {
            entries: entries.iter(),
            skip: self.skip,
            value: None,
        };
        let value = visitor.visit_map(&mut access)?;
        if access.next_entry().is_none() {
            Ok(value)
        } else {
            bail("fewer elements in map")
        }
    }
}

macro_rules! numbers {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
                self.number(visitor)
            }
        )*
    };
}

impl<'a> de::Deserializer<'a> for NodeDe<'a> {
    type Error = Bail;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match &self.node.value {
            NodeValue::Null => visitor.visit_unit(),
            NodeValue::Bool(b) => visitor.visit_bool(*b),
            NodeValue::Int(_) | NodeValue::UInt(_) | NodeValue::Float(_) => self.number(visitor),
            NodeValue::Str(s) => visitor.visit_borrowed_str(s),
            NodeValue::Seq(items) => Self::seq(items, visitor),
            NodeValue::Map(entries) => self.map(entries, visitor),
        }
    }

    numbers!(deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_f32 deserialize_f64);

    fn deserialize_i128<V: Visitor<'a>>(self, _visitor: V) -> Result<V::Value, Bail> {
        bail("i128")
    }

    fn deserialize_u128<V: Visitor<'a>>(self, _visitor: V) -> Result<V::Value, Bail> {
        bail("u128")
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.node.value {
            NodeValue::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Bail> {
        match &self.node.value {
            NodeValue::Str(variant) => visitor.visit_enum(UnitVariant(variant)),
            // `{variant: value}`: rare in manifests; the reference path's.
            _ => bail("enum not written as a string"),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        if name.starts_with("$serde_json") {
            return bail("serde_json private token");
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bool<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.node.value {
            NodeValue::Bool(b) => visitor.visit_bool(b),
            _ => self.invalid(&visitor),
        }
    }

    fn deserialize_char<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match &self.node.value {
            NodeValue::Str(s) => visitor.visit_borrowed_str(s),
            _ => self.invalid(&visitor),
        }
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match &self.node.value {
            NodeValue::Str(s) => visitor.visit_borrowed_str(s),
            NodeValue::Seq(items) => Self::seq(items, visitor),
            _ => self.invalid(&visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match self.node.value {
            NodeValue::Null => visitor.visit_unit(),
            _ => self.invalid(&visitor),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match &self.node.value {
            NodeValue::Seq(items) => Self::seq(items, visitor),
            _ => self.invalid(&visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, _len: usize, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        match &self.node.value {
            NodeValue::Map(entries) => self.map(entries, visitor),
            _ => self.invalid(&visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Bail> {
        match &self.node.value {
            NodeValue::Seq(items) => Self::seq(items, visitor),
            NodeValue::Map(entries) => self.map(entries, visitor),
            _ => self.invalid(&visitor),
        }
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_unit()
    }
}

struct SeqDe<'a> {
    items: std::slice::Iter<'a, Node>,
}

impl<'a> SeqAccess<'a> for SeqDe<'a> {
    type Error = Bail;

    fn next_element_seed<S: DeserializeSeed<'a>>(&mut self, seed: S) -> Result<Option<S::Value>, Bail> {
        match self.items.next() {
            Some(node) => seed.deserialize(NodeDe::new(node)).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapDe<'a> {
    entries: std::slice::Iter<'a, Entry>,
    skip: Option<&'a str>,
    value: Option<&'a Node>,
}

impl<'a> MapDe<'a> {
    fn next_entry(&mut self) -> Option<&'a Entry> {
        loop {
            let entry = self.entries.next()?;
            if self.skip != Some(entry.key.as_str()) {
                return Some(entry);
            }
        }
    }
}

impl<'a> MapAccess<'a> for MapDe<'a> {
    type Error = Bail;

    fn next_key_seed<K: DeserializeSeed<'a>>(&mut self, seed: K) -> Result<Option<K::Value>, Bail> {
        match self.next_entry() {
            Some(entry) => {
                self.value = Some(&entry.value);
                seed.deserialize(KeyDe(&entry.key)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, Bail> {
        match self.value.take() {
            Some(node) => seed.deserialize(NodeDe::new(node)),
            None => bail("value without a key"),
        }
    }
}

/// A mapping key: a string. What `serde_json`'s key deserializer does
/// beyond strings (numbers and booleans parsed from keys) is refused.
struct KeyDe<'a>(&'a str);

impl<'a> de::Deserializer<'a> for KeyDe<'a> {
    type Error = Bail;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_str<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_string<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_unit()
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, Bail> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Bail> {
        if name.starts_with("$serde_json") {
            return bail("serde_json private token");
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bool<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_i8<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_i16<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_i32<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_i64<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_u8<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_u16<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_u32<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_u64<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_f32<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_f64<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_char<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_bytes<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_byte_buf<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_unit<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_unit_struct<V: Visitor<'a>>(self, _: &'static str, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_seq<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_tuple<V: Visitor<'a>>(self, _: usize, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _: &'static str,
        _: usize,
        _: V,
    ) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_map<V: Visitor<'a>>(self, _: V) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Bail> {
        bail("non-string key")
    }
}

/// A unit variant written as a string (`serde_json`'s `EnumRefDeserializer`
/// with no value).
struct UnitVariant<'a>(&'a str);

impl<'a> EnumAccess<'a> for UnitVariant<'a> {
    type Error = Bail;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'a>>(self, seed: V) -> Result<(V::Value, Self), Bail> {
        let variant: de::value::StrDeserializer<'a, Bail> = self.0.into_deserializer();
        seed.deserialize(variant).map(|v| (v, self))
    }
}

impl<'a> VariantAccess<'a> for UnitVariant<'a> {
    type Error = Bail;

    fn unit_variant(self) -> Result<(), Bail> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'a>>(self, _seed: T) -> Result<T::Value, Bail> {
        bail("newtype variant written as a string")
    }

    fn tuple_variant<V: Visitor<'a>>(self, _len: usize, _visitor: V) -> Result<V::Value, Bail> {
        bail("tuple variant written as a string")
    }

    fn struct_variant<V: Visitor<'a>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Bail> {
        bail("struct variant written as a string")
    }
}

/// Whether a value counts as absent for the unknown-field check (the
/// reference path's `unknown_fields`: null, `{}`, `[]`).
fn empty(node: &Node) -> bool {
    match &node.value {
        NodeValue::Null => true,
        NodeValue::Map(entries) => entries.is_empty(),
        NodeValue::Seq(items) => items.is_empty(),
        _ => false,
    }
}

/// A serializer that produces nothing: it follows what `to_value` would
/// build beside `input` (the tree at the same place) and sets `found` when
/// a mapping of the tree has a non-empty key the serialisation lacks.
struct Cmp<'n, 'f> {
    input: Option<&'n Node>,
    /// A key of this mapping to leave out (the root's `status`).
    skip: Option<&'n str>,
    found: &'f mut bool,
}

impl<'n, 'f> Cmp<'n, 'f> {
    fn at<'g>(input: Option<&'n Node>, found: &'g mut bool) -> Cmp<'n, 'g> {
        Cmp {
            input,
            skip: None,
            found,
        }
    }

    /// The compound for a mapping (`to_value`'s `Object`).
    fn object(self) -> Fields<'n, 'f> {
        let entries = match self.input.map(|n| &n.value) {
            Some(NodeValue::Map(entries)) => entries.as_slice(),
            _ => &[],
        };
        Fields {
            entries,
            seen: Seen::new(entries.len()),
            skip: self.skip,
            found: self.found,
            key: None,
        }
    }

    /// The compound for a sequence (`to_value`'s `Array`).
    fn array(self) -> Items<'n, 'f> {
        let items = match self.input.map(|n| &n.value) {
            Some(NodeValue::Seq(items)) => items.as_slice(),
            _ => &[],
        };
        Items {
            items,
            next: 0,
            found: self.found,
        }
    }

    /// A one-key object `{variant: ...}` (newtype, tuple and struct
    /// variants): the key is marked, the inner value compared.
    fn variant(self, variant: &'static str) -> (Fields<'n, 'f>, Option<&'n Node>) {
        let mut fields = self.object();
        let inner = fields.mark(variant);
        (fields, inner)
    }
}

/// A mapping of the serialisation beside the tree's mapping.
struct Fields<'n, 'f> {
    entries: &'n [Entry],
    seen: Seen,
    skip: Option<&'n str>,
    found: &'f mut bool,
    /// The key of a map entry whose value comes next.
    key: Option<Option<&'n Node>>,
}

impl<'n> Fields<'n, '_> {
    /// Marks `key` present; the tree's value there.
    fn mark(&mut self, key: &str) -> Option<&'n Node> {
        let index = self.entries.iter().rposition(|e| e.key == key)?;
        self.seen.set(index);
        Some(&self.entries[index].value)
    }

    fn finish(self) -> Result<(), Bail> {
        for (index, entry) in self.entries.iter().enumerate() {
            if !self.seen.get(index) && self.skip != Some(entry.key.as_str()) && !empty(&entry.value) {
                *self.found = true;
            }
        }
        Ok(())
    }

    fn field<T: ?Sized + Serialize>(&mut self, key: &str, value: &T) -> Result<(), Bail> {
        let input = self.mark(key);
        value.serialize(Cmp::at(input, self.found))
    }
}

/// Which keys of a mapping the serialisation has: a bit mask for the usual
/// small mapping (no allocation per mapping), a vector beyond 64 keys.
enum Seen {
    Mask(u64),
    Many(Vec<bool>),
}

impl Seen {
    fn new(len: usize) -> Self {
        if len <= 64 {
            Seen::Mask(0)
        } else {
            Seen::Many(vec![false; len])
        }
    }

    fn set(&mut self, index: usize) {
        match self {
            Seen::Mask(mask) => *mask |= 1u64 << index,
            Seen::Many(seen) => seen[index] = true,
        }
    }

    fn get(&self, index: usize) -> bool {
        match self {
            Seen::Mask(mask) => *mask & (1u64 << index) != 0,
            Seen::Many(seen) => seen.get(index).copied().unwrap_or(false),
        }
    }
}

/// A sequence of the serialisation beside the tree's sequence: element
/// `i` against element `i` (the reference compares only sequences of one
/// length; comparing more can only bail more).
struct Items<'n, 'f> {
    items: &'n [Node],
    next: usize,
    found: &'f mut bool,
}

impl Items<'_, '_> {
    fn element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Bail> {
        let input = self.items.get(self.next);
        self.next += 1;
        value.serialize(Cmp::at(input, self.found))
    }
}

/// A map key of the serialisation: only strings (what `to_value` would
/// turn into other keys is refused).
struct KeyName;

impl ser::Serializer for KeyName {
    type Ok = String;
    type Error = Bail;
    type SerializeSeq = ser::Impossible<String, Bail>;
    type SerializeTuple = ser::Impossible<String, Bail>;
    type SerializeTupleStruct = ser::Impossible<String, Bail>;
    type SerializeTupleVariant = ser::Impossible<String, Bail>;
    type SerializeMap = ser::Impossible<String, Bail>;
    type SerializeStruct = ser::Impossible<String, Bail>;
    type SerializeStructVariant = ser::Impossible<String, Bail>;

    fn serialize_str(self, v: &str) -> Result<String, Bail> {
        Ok(v.to_string())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, v: &T) -> Result<String, Bail> {
        v.serialize(self)
    }
    fn serialize_bool(self, _: bool) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_i8(self, _: i8) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_i16(self, _: i16) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_i32(self, _: i32) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_i64(self, _: i64) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_u8(self, _: u8) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_u16(self, _: u16) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_u32(self, _: u32) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_u64(self, _: u64) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_f32(self, _: f32) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_f64(self, _: f64) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_char(self, _: char) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_none(self) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_unit(self) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Bail> {
        bail("non-string key")
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Bail> {
        bail("non-string key")
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Bail> {
        bail("non-string key")
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Bail> {
        bail("non-string key")
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Bail> {
        bail("non-string key")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Bail> {
        bail("non-string key")
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, Bail> {
        bail("non-string key")
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Bail> {
        bail("non-string key")
    }
}

impl<'n, 'f> ser::Serializer for Cmp<'n, 'f> {
    type Ok = ();
    type Error = Bail;
    type SerializeSeq = Items<'n, 'f>;
    type SerializeTuple = Items<'n, 'f>;
    type SerializeTupleStruct = Items<'n, 'f>;
    type SerializeTupleVariant = ser::Impossible<(), Bail>;
    type SerializeMap = Fields<'n, 'f>;
    type SerializeStruct = Fields<'n, 'f>;
    type SerializeStructVariant = ser::Impossible<(), Bail>;

    // Scalars: nothing below them to compare.
    fn serialize_bool(self, _: bool) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), Bail> {
        bail("i128")
    }
    fn serialize_u128(self, _: u128) -> Result<(), Bail> {
        bail("u128")
    }
    fn serialize_f32(self, _: f32) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Bail> {
        Ok(())
    }
    // An array of numbers to `to_value`: no mapping inside.
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, value: &T) -> Result<(), Bail> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Bail> {
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Bail> {
        if name.starts_with("$serde_json") {
            return bail("serde_json private token");
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Bail> {
        let (outer, inner) = self.variant(variant);
        value.serialize(Cmp::at(inner, &mut *outer.found))?;
        outer.finish()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Items<'n, 'f>, Bail> {
        Ok(self.array())
    }
    fn serialize_tuple(self, _: usize) -> Result<Items<'n, 'f>, Bail> {
        Ok(self.array())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Items<'n, 'f>, Bail> {
        Ok(self.array())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Bail> {
        // Not in any kind the loader reads: the reference path's.
        let _ = variant;
        bail("tuple variant")
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Fields<'n, 'f>, Bail> {
        Ok(self.object())
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Fields<'n, 'f>, Bail> {
        if name.starts_with("$serde_json") {
            return bail("serde_json private token");
        }
        Ok(self.object())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Bail> {
        let _ = variant;
        bail("struct variant")
    }
}

impl ser::SerializeSeq for Items<'_, '_> {
    type Ok = ();
    type Error = Bail;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Bail> {
        self.element(value)
    }
    fn end(self) -> Result<(), Bail> {
        Ok(())
    }
}

impl ser::SerializeTuple for Items<'_, '_> {
    type Ok = ();
    type Error = Bail;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Bail> {
        self.element(value)
    }
    fn end(self) -> Result<(), Bail> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Items<'_, '_> {
    type Ok = ();
    type Error = Bail;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Bail> {
        self.element(value)
    }
    fn end(self) -> Result<(), Bail> {
        Ok(())
    }
}

impl ser::SerializeStruct for Fields<'_, '_> {
    type Ok = ();
    type Error = Bail;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), Bail> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Bail> {
        self.finish()
    }
}

impl ser::SerializeMap for Fields<'_, '_> {
    type Ok = ();
    type Error = Bail;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), Bail> {
        let key = key.serialize(KeyName)?;
        self.key = Some(self.mark(&key));
        Ok(())
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Bail> {
        let Some(input) = self.key.take() else {
            return bail("value without a key");
        };
        value.serialize(Cmp::at(input, self.found))
    }
    fn end(self) -> Result<(), Bail> {
        self.finish()
    }
}
