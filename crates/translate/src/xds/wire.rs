//! Walking protobuf wire format one field at a time, without decoding or
//! collecting the fields: encoded route configurations are spliced
//! (`encoded.rs`) and rendered (`output/lazy.rs`) in place.

use prost::encoding::{WireType, decode_key, decode_varint};

/// One field as encoded: its number, its whole encoding (key included)
/// and, for a length-delimited field, its payload.
pub struct Field<'a> {
    pub number: u32,
    pub whole: &'a [u8],
    pub payload: Option<&'a [u8]>,
}

/// The fields of a message, in wire order. Yields `Err(())` once (and
/// then stops) on bytes that are not well-formed.
pub struct Fields<'a> {
    bytes: &'a [u8],
    rest: &'a [u8],
}

pub fn fields(bytes: &[u8]) -> Fields<'_> {
    Fields { bytes, rest: bytes }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Option<Field<'a>> {
        let start = self.bytes.len() - self.rest.len();
        let mut rest = self.rest;
        let (number, wire_type) = decode_key(&mut rest).ok()?;
        let payload = match wire_type {
            WireType::Varint => {
                decode_varint(&mut rest).ok()?;
                None
            }
            WireType::SixtyFourBit => {
                rest = rest.get(8..)?;
                None
            }
            WireType::ThirtyTwoBit => {
                rest = rest.get(4..)?;
                None
            }
            WireType::LengthDelimited => {
                let len = usize::try_from(decode_varint(&mut rest).ok()?).ok()?;
                let payload = rest.get(..len)?;
                rest = rest.get(len..)?;
                Some(payload)
            }
            WireType::StartGroup | WireType::EndGroup => return None,
        };
        let end = self.bytes.len() - rest.len();
        self.rest = rest;
        Some(Field {
            number,
            whole: self.bytes.get(start..end)?,
            payload,
        })
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, ()>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match self.field() {
            Some(f) => Some(Ok(f)),
            None => {
                self.rest = &[];
                Some(Err(()))
            }
        }
    }
}
