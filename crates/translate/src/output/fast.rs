//! Canonical proto-JSON written straight from a message's wire bytes, in
//! the pretty layout (two spaces, starting at a given depth): the bytes
//! that `bytes_to_json` (decode into a `prost_reflect::DynamicMessage`,
//! serialize into a `serde_json::Value`, sort map keys) and then
//! pretty-printing give, without the dynamic message or the `Value`. This
//! is what `translate -o json` spends most of its time on at 10,000 routes
//! otherwise.
//!
//! It follows prost-reflect's serializer rule by rule: fields in number
//! order under their proto names, unknown fields left out, fields without
//! presence left out at their default value, 64-bit integers as strings,
//! enums by name (by number when unknown), bytes as padded base64, floats
//! through `serde_json::Value` (an `f32` widens to `f64`, as it does
//! there), maps sorted by key, `Any` as `{"@type": …, fields…}`, `Duration`
//! as `"1.5s"`, wrappers as their value, `Empty` as `{}`. Whatever it does
//! not follow exactly — a singular field repeated on the wire (merge
//! semantics), the other well-known types (`Struct`, `Value`, `Timestamp`,
//! `FieldMask`, …), an `Any` of a well-known type, a non-finite float in a
//! wrapper, invalid UTF-8, a negative or out-of-range `Duration`, nesting
//! deeper than the sorter's bound — is [`Unsupported`]: the caller renders
//! that message the slow way, so the output is the same either way
//! (`tests/output_stream.rs` compares the two on every fixture).

use std::io::Write;

use base64::Engine;
use prost::encoding::{WireType, decode_key, decode_varint};
use prost_reflect::{Kind, MessageDescriptor};

/// This message needs the general path.
#[derive(Debug)]
pub(super) struct Unsupported;

type Fast<T = ()> = Result<T, Unsupported>;

#[derive(Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Len(&'a [u8]),
}

/// `sort_map_fields` stops sorting below this depth; deeper messages take
/// the general path so that both agree.
const MAX_DEPTH: usize = 60;

fn fields(mut bytes: &[u8]) -> Fast<Vec<(u32, Wire<'_>)>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (number, wire_type) = decode_key(&mut bytes).map_err(|_| Unsupported)?;
        let value = match wire_type {
            WireType::Varint => Wire::Varint(decode_varint(&mut bytes).map_err(|_| Unsupported)?),
            WireType::SixtyFourBit => {
                let (v, rest) = bytes.split_first_chunk::<8>().ok_or(Unsupported)?;
                bytes = rest;
                Wire::Fixed64(u64::from_le_bytes(*v))
            }
            WireType::ThirtyTwoBit => {
                let (v, rest) = bytes.split_first_chunk::<4>().ok_or(Unsupported)?;
                bytes = rest;
                Wire::Fixed32(u32::from_le_bytes(*v))
            }
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut bytes).map_err(|_| Unsupported)?)
                    .map_err(|_| Unsupported)?;
                let payload = bytes.get(..len).ok_or(Unsupported)?;
                bytes = bytes.get(len..).ok_or(Unsupported)?;
                Wire::Len(payload)
            }
            WireType::StartGroup | WireType::EndGroup => return Err(Unsupported),
        };
        out.push((number, value));
    }
    // Number order; stable, so a repeated field keeps its elements' order.
    if !out.is_sorted_by_key(|(n, _)| *n) {
        out.sort_by_key(|(n, _)| *n);
    }
    Ok(out)
}

fn indent(out: &mut Vec<u8>, depth: usize) {
    for _ in 0..depth {
        out.extend_from_slice(b"  ");
    }
}

/// The pretty-printer's framing of one object or array.
struct Frame {
    depth: usize,
    first: bool,
}

impl Frame {
    fn open(out: &mut Vec<u8>, depth: usize, bracket: u8) -> Self {
        out.push(bracket);
        Self {
            depth: depth + 1,
            first: true,
        }
    }
    fn next(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(if self.first { b"\n" } else { b",\n" });
        self.first = false;
        indent(out, self.depth);
    }
    fn key(&mut self, out: &mut Vec<u8>, key: &str) {
        self.next(out);
        string(out, key);
        out.extend_from_slice(b": ");
    }
    fn close(self, out: &mut Vec<u8>, bracket: u8) {
        if !self.first {
            out.push(b'\n');
            indent(out, self.depth - 1);
        }
        out.push(bracket);
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    // serde_json's own escaping; writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

fn number<T: serde::Serialize>(out: &mut Vec<u8>, n: T) {
    let _ = serde_json::to_writer(&mut *out, &n);
}

fn quoted<T: std::fmt::Display>(out: &mut Vec<u8>, n: T) {
    let _ = write!(out, "\"{n}\"");
}

/// One message at `depth` (its closing brace's indentation).
pub(super) fn message(out: &mut Vec<u8>, desc: &MessageDescriptor, bytes: &[u8], depth: usize) -> Fast {
    if depth > MAX_DEPTH {
        return Err(Unsupported);
    }
    let name = desc.full_name();
    if let Some(wkt) = name.strip_prefix("google.protobuf.") {
        return well_known(out, desc, wkt, bytes, depth);
    }
    let mut obj = Frame::open(out, depth, b'{');
    members(out, desc, bytes, &mut obj)?;
    obj.close(out, b'}');
    Ok(())
}

fn well_known(out: &mut Vec<u8>, desc: &MessageDescriptor, wkt: &str, bytes: &[u8], depth: usize) -> Fast {
    match wkt {
        "Any" => any(out, desc, bytes, depth),
        "Empty" => {
            out.extend_from_slice(b"{}");
            Ok(())
        }
        "Duration" => duration(out, bytes),
        "Int32Value" | "Int64Value" | "UInt32Value" | "UInt64Value" | "BoolValue" | "StringValue"
        | "FloatValue" | "DoubleValue" => {
            let field = desc.get_field(1).ok_or(Unsupported)?;
            let kind = field.kind();
            let fs = fields(bytes)?;
            let mut value = None;
            for (n, w) in fs {
                if n == 1 {
                    if value.is_some() {
                        return Err(Unsupported);
                    }
                    value = Some(w);
                }
            }
            let w = value.unwrap_or_else(|| default_wire(&kind));
            // The wrapper serializers write a float as it is (a NaN would be
            // `null`): only finite ones here.
            match (&kind, w) {
                (Kind::Float, Wire::Fixed32(b)) if !f32::from_bits(b).is_finite() => return Err(Unsupported),
                (Kind::Double, Wire::Fixed64(b)) if !f64::from_bits(b).is_finite() => {
                    return Err(Unsupported);
                }
                _ => {}
            }
            scalar_or_message(out, &kind, w, depth)
        }
        _ => Err(Unsupported),
    }
}

/// prost-reflect's range check, and only the non-negative durations the
/// translator writes (the sign rules of the general path are left to it).
fn duration(out: &mut Vec<u8>, bytes: &[u8]) -> Fast {
    let (mut seconds, mut nanos) = (0i64, 0i32);
    let (mut seen_s, mut seen_n) = (false, false);
    for (n, w) in fields(bytes)? {
        match (n, w) {
            (1, Wire::Varint(v)) if !seen_s => {
                seconds = v as i64;
                seen_s = true;
            }
            (2, Wire::Varint(v)) if !seen_n => {
                nanos = v as i32;
                seen_n = true;
            }
            (1 | 2, _) => return Err(Unsupported),
            _ => {}
        }
    }
    if !(0..=315_576_000_000).contains(&seconds) || !(0..1_000_000_000).contains(&nanos) {
        return Err(Unsupported);
    }
    let _ = if nanos == 0 {
        write!(out, "\"{seconds}s\"")
    } else if nanos % 1_000_000 == 0 {
        write!(out, "\"{seconds}.{:03}s\"", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
        write!(out, "\"{seconds}.{:06}s\"", nanos / 1_000)
    } else {
        write!(out, "\"{seconds}.{nanos:09}s\"")
    };
    Ok(())
}

fn any(out: &mut Vec<u8>, desc: &MessageDescriptor, bytes: &[u8], depth: usize) -> Fast {
    let (mut type_url, mut value): (Option<&[u8]>, Option<&[u8]>) = (None, None);
    for (n, w) in fields(bytes)? {
        match (n, w) {
            (1, Wire::Len(b)) if type_url.is_none() => type_url = Some(b),
            (2, Wire::Len(b)) if value.is_none() => value = Some(b),
            (1 | 2, _) => return Err(Unsupported),
            _ => {}
        }
    }
    let type_url = std::str::from_utf8(type_url.ok_or(Unsupported)?).map_err(|_| Unsupported)?;
    // `sort_map_fields` finds the packed type only under this prefix (and
    // leaves its maps unsorted otherwise): other URLs take the general path.
    let name = type_url.strip_prefix("type.googleapis.com/").ok_or(Unsupported)?;
    if name.is_empty() || name.contains('/') || name.starts_with("google.protobuf.") {
        return Err(Unsupported);
    }
    let inner = desc.parent_pool().get_message_by_name(name).ok_or(Unsupported)?;
    let mut obj = Frame::open(out, depth, b'{');
    obj.key(out, "@type");
    string(out, type_url);
    members(out, &inner, value.unwrap_or_default(), &mut obj)?;
    obj.close(out, b'}');
    Ok(())
}

/// A message's fields as members of the object `obj`.
fn members(out: &mut Vec<u8>, desc: &MessageDescriptor, bytes: &[u8], obj: &mut Frame) -> Fast {
    let fs = fields(bytes)?;
    let mut i = 0;
    while i < fs.len() {
        let number = fs[i].0;
        let mut j = i + 1;
        while j < fs.len() && fs[j].0 == number {
            j += 1;
        }
        let group = &fs[i..j];
        i = j;
        // Unknown fields are not rendered.
        let Some(field) = desc.get_field(number) else {
            continue;
        };
        let kind = field.kind();
        if field.is_map() {
            map(out, field.name(), &kind, group, obj)?;
        } else if field.is_list() {
            list(out, field.name(), &kind, group, obj)?;
        } else {
            let [(_, w)] = group else {
                // A singular field more than once: merged or last-wins,
                // by kind: left to the general path.
                return Err(Unsupported);
            };
            if !field.supports_presence() && is_default(&kind, *w)? {
                continue;
            }
            obj.key(out, field.name());
            scalar_or_message(out, &kind, *w, obj.depth)?;
        }
    }
    Ok(())
}

fn list(out: &mut Vec<u8>, name: &str, kind: &Kind, group: &[(u32, Wire<'_>)], obj: &mut Frame) -> Fast {
    let mut items = Vec::with_capacity(group.len());
    for (_, w) in group {
        match (w, packed_width(kind)) {
            (Wire::Len(b), Some(width)) => unpack(b, width, &mut items)?,
            _ => items.push(*w),
        }
    }
    if items.is_empty() {
        return Ok(());
    }
    obj.key(out, name);
    let mut arr = Frame::open(out, obj.depth, b'[');
    for w in items {
        arr.next(out);
        scalar_or_message(out, kind, w, arr.depth)?;
    }
    arr.close(out, b']');
    Ok(())
}

#[derive(Clone, Copy)]
enum Width {
    Varint,
    Four,
    Eight,
}

/// How a packed repeated field of this kind lays out its elements.
fn packed_width(kind: &Kind) -> Option<Width> {
    match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => Some(Width::Eight),
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => Some(Width::Four),
        Kind::Int32
        | Kind::Int64
        | Kind::Uint32
        | Kind::Uint64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Bool
        | Kind::Enum(_) => Some(Width::Varint),
        Kind::String | Kind::Bytes | Kind::Message(_) => None,
    }
}

fn unpack<'a>(mut b: &'a [u8], width: Width, items: &mut Vec<Wire<'a>>) -> Fast {
    while !b.is_empty() {
        items.push(match width {
            Width::Varint => Wire::Varint(decode_varint(&mut b).map_err(|_| Unsupported)?),
            Width::Four => {
                let (v, rest) = b.split_first_chunk::<4>().ok_or(Unsupported)?;
                b = rest;
                Wire::Fixed32(u32::from_le_bytes(*v))
            }
            Width::Eight => {
                let (v, rest) = b.split_first_chunk::<8>().ok_or(Unsupported)?;
                b = rest;
                Wire::Fixed64(u64::from_le_bytes(*v))
            }
        });
    }
    Ok(())
}

fn default_wire(kind: &Kind) -> Wire<'static> {
    match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => Wire::Fixed64(0),
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => Wire::Fixed32(0),
        Kind::String | Kind::Bytes | Kind::Message(_) => Wire::Len(&[]),
        _ => Wire::Varint(0),
    }
}

/// Whether a value equals its kind's default (a field without presence at
/// its default is left out). `-0.0` equals `0.0`, as prost-reflect's
/// comparison has it.
fn is_default(kind: &Kind, w: Wire<'_>) -> Fast<bool> {
    Ok(match (kind, w) {
        (Kind::Double, Wire::Fixed64(b)) => f64::from_bits(b) == 0.0,
        (Kind::Float, Wire::Fixed32(b)) => f32::from_bits(b) == 0.0,
        (Kind::Message(_), _) => false,
        // 32-bit kinds are the varint's low 32 bits (a bool is any non-zero).
        (Kind::Int32 | Kind::Sint32 | Kind::Uint32 | Kind::Enum(_), Wire::Varint(v)) => v as u32 == 0,
        (_, Wire::Varint(v)) => v == 0,
        (_, Wire::Fixed64(v)) => v == 0,
        (_, Wire::Fixed32(v)) => v == 0,
        (Kind::String | Kind::Bytes, Wire::Len(b)) => b.is_empty(),
        (_, Wire::Len(_)) => return Err(Unsupported),
    })
}

fn float_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        number(out, serde_json::Value::from(v));
    } else if v == f64::INFINITY {
        string(out, "Infinity");
    } else if v == f64::NEG_INFINITY {
        string(out, "-Infinity");
    } else {
        string(out, "NaN");
    }
}

fn scalar_or_message(out: &mut Vec<u8>, kind: &Kind, w: Wire<'_>, depth: usize) -> Fast {
    match (kind, w) {
        (Kind::Double, Wire::Fixed64(b)) => float_f64(out, f64::from_bits(b)),
        (Kind::Float, Wire::Fixed32(b)) => {
            let v = f32::from_bits(b);
            if v.is_finite() {
                // As `serde_json::value::Serializer::serialize_f32` does.
                number(out, serde_json::Value::from(v));
            } else {
                float_f64(out, f64::from(v));
            }
        }
        (Kind::Int32, Wire::Varint(v)) => number(out, v as i32),
        (Kind::Sint32, Wire::Varint(v)) => {
            let u = v as u32;
            number(out, ((u >> 1) as i32) ^ -((u & 1) as i32));
        }
        (Kind::Uint32, Wire::Varint(v)) => number(out, v as u32),
        (Kind::Int64, Wire::Varint(v)) => quoted(out, v as i64),
        (Kind::Sint64, Wire::Varint(v)) => quoted(out, ((v >> 1) as i64) ^ -((v & 1) as i64)),
        (Kind::Uint64, Wire::Varint(v)) => quoted(out, v),
        (Kind::Fixed32, Wire::Fixed32(v)) => number(out, v),
        (Kind::Sfixed32, Wire::Fixed32(v)) => number(out, v as i32),
        (Kind::Fixed64, Wire::Fixed64(v)) => quoted(out, v),
        (Kind::Sfixed64, Wire::Fixed64(v)) => quoted(out, v as i64),
        (Kind::Bool, Wire::Varint(v)) => out.extend_from_slice(if v != 0 { b"true" } else { b"false" }),
        (Kind::String, Wire::Len(b)) => string(out, std::str::from_utf8(b).map_err(|_| Unsupported)?),
        (Kind::Bytes, Wire::Len(b)) => {
            out.push(b'"');
            out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(b).as_bytes());
            out.push(b'"');
        }
        (Kind::Enum(e), Wire::Varint(v)) => {
            if e.full_name() == "google.protobuf.NullValue" {
                return Err(Unsupported);
            }
            let n = v as i32;
            match e.get_value(n) {
                Some(value) => string(out, value.name()),
                None => number(out, n),
            }
        }
        (Kind::Message(m), Wire::Len(b)) => message(out, m, b, depth)?,
        _ => return Err(Unsupported),
    }
    Ok(())
}

/// A map field: its entries' keys as strings, the last of equal keys
/// kept, sorted (as `sort_map_fields` sorts them).
fn map(out: &mut Vec<u8>, name: &str, kind: &Kind, group: &[(u32, Wire<'_>)], obj: &mut Frame) -> Fast {
    let Kind::Message(entry) = kind else {
        return Err(Unsupported);
    };
    let key_kind = entry.map_entry_key_field().kind();
    let value_kind = entry.map_entry_value_field().kind();
    let mut entries: Vec<(String, Wire<'_>)> = Vec::with_capacity(group.len());
    for (_, w) in group {
        let Wire::Len(b) = w else { return Err(Unsupported) };
        let (mut key, mut value) = (None, None);
        for (n, w) in fields(b)? {
            match n {
                1 => key = Some(w),
                2 => {
                    // A message value given twice is merged: general path.
                    if value.is_some() && matches!(value_kind, Kind::Message(_)) {
                        return Err(Unsupported);
                    }
                    value = Some(w);
                }
                _ => {}
            }
        }
        let key = map_key(&key_kind, key.unwrap_or_else(|| default_wire(&key_kind)))?;
        let value = value.unwrap_or_else(|| default_wire(&value_kind));
        entries.push((key, value));
    }
    // Last of equal keys wins (a stable sort keeps wire order among them).
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.reverse();
    entries.dedup_by(|a, b| a.0 == b.0);
    entries.reverse();
    obj.key(out, name);
    let mut m = Frame::open(out, obj.depth, b'{');
    for (key, w) in entries {
        m.key(out, &key);
        scalar_or_message(out, &value_kind, w, m.depth)?;
    }
    m.close(out, b'}');
    Ok(())
}

fn map_key(kind: &Kind, w: Wire<'_>) -> Fast<String> {
    Ok(match (kind, w) {
        (Kind::String, Wire::Len(b)) => std::str::from_utf8(b).map_err(|_| Unsupported)?.to_string(),
        (Kind::Bool, Wire::Varint(v)) => (v != 0).to_string(),
        (Kind::Int32, Wire::Varint(v)) => (v as i32).to_string(),
        (Kind::Int64, Wire::Varint(v)) => (v as i64).to_string(),
        (Kind::Uint32, Wire::Varint(v)) => (v as u32).to_string(),
        (Kind::Uint64, Wire::Varint(v)) => v.to_string(),
        (Kind::Sint32, Wire::Varint(v)) => {
            let u = v as u32;
            (((u >> 1) as i32) ^ -((u & 1) as i32)).to_string()
        }
        (Kind::Sint64, Wire::Varint(v)) => (((v >> 1) as i64) ^ -((v & 1) as i64)).to_string(),
        (Kind::Fixed32, Wire::Fixed32(v)) => v.to_string(),
        (Kind::Sfixed32, Wire::Fixed32(v)) => (v as i32).to_string(),
        (Kind::Fixed64, Wire::Fixed64(v)) => v.to_string(),
        (Kind::Sfixed64, Wire::Fixed64(v)) => (v as i64).to_string(),
        _ => return Err(Unsupported),
    })
}
