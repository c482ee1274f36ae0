//! A DER reader shaped like BoringSSL's `CBS` (crypto/bytestring/cbs.cc),
//! so that the TLS checks read certificates and keys with the same
//! strictness as Envoy: definite, minimal lengths; INTEGERs minimally
//! encoded. Only low tag numbers (< 31) occur in the structures read here.

pub const INTEGER: u8 = 0x02;
pub const BIT_STRING: u8 = 0x03;
pub const OCTET_STRING: u8 = 0x04;
pub const NULL: u8 = 0x05;
pub const OID: u8 = 0x06;
pub const SEQUENCE: u8 = 0x30;

/// `[n]` context-specific, constructed.
pub const fn explicit(n: u8) -> u8 {
    0xa0 | n
}

/// `[n]` context-specific, primitive.
pub const fn implicit(n: u8) -> u8 {
    0x80 | n
}

#[derive(Clone, Copy, Debug)]
pub struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Der(bytes)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn peek_tag(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The next element's tag and contents (`CBS_get_any_asn1`).
    pub fn any(&mut self) -> Option<(u8, &'a [u8])> {
        self.any_element().map(|(tag, contents, _)| (tag, contents))
    }

    /// The next element with `tag`, header included (`CBS_get_asn1_element`).
    pub fn element(&mut self, tag: u8) -> Option<&'a [u8]> {
        let mut copy = *self;
        match copy.any_element()? {
            (t, _, element) if t == tag => {
                *self = copy;
                Some(element)
            }
            _ => None,
        }
    }

    fn any_element(&mut self) -> Option<(u8, &'a [u8], &'a [u8])> {
        let all = self.0;
        let (&tag, rest) = all.split_first()?;
        if tag & 0x1f == 0x1f {
            // High tag numbers: not part of any structure read here.
            return None;
        }
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            // Long form: 1 to 4 length bytes, no leading zero, and only
            // for lengths that do not fit the short form (DER).
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let (bytes, rest) = rest.split_at(n);
            if bytes[0] == 0 {
                return None;
            }
            let len = bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            if len < 0x80 {
                return None;
            }
            (len, rest)
        };
        if rest.len() < len {
            return None;
        }
        let (contents, rest) = rest.split_at(len);
        let element = &all[..all.len() - rest.len()];
        self.0 = rest;
        Some((tag, contents, element))
    }

    /// The next element's contents if it has `tag` (`CBS_get_asn1`).
    pub fn get(&mut self, tag: u8) -> Option<&'a [u8]> {
        let mut copy = *self;
        match copy.any()? {
            (t, contents) if t == tag => {
                *self = copy;
                Some(contents)
            }
            _ => None,
        }
    }

    /// `Some(contents)` if the next element has `tag`, `None` if another
    /// element (or nothing) follows; an unreadable element is an error.
    pub fn optional(&mut self, tag: u8) -> Result<Option<&'a [u8]>, ()> {
        if self.peek_tag() != Some(tag) {
            return Ok(None);
        }
        self.get(tag).map(Some).ok_or(())
    }

    /// An INTEGER that fits a u64 (`CBS_get_asn1_uint64`).
    pub fn uint64(&mut self) -> Option<u64> {
        uint64(self.get(INTEGER)?)
    }

    /// A non-negative INTEGER's magnitude, without a leading zero
    /// (`BN_parse_asn1_unsigned`).
    pub fn unsigned(&mut self) -> Option<&'a [u8]> {
        unsigned(self.get(INTEGER)?)
    }
}

/// `CBS_is_valid_asn1_integer`: at least one byte, minimally encoded.
pub fn is_valid_integer(contents: &[u8]) -> bool {
    match contents {
        [] => false,
        [0x00, next, ..] => *next & 0x80 != 0,
        [0xff, next, ..] => *next & 0x80 == 0,
        _ => true,
    }
}

/// `CBS_is_unsigned_asn1_integer`: a valid, non-negative INTEGER; its
/// magnitude with the sign byte removed.
pub fn unsigned(contents: &[u8]) -> Option<&[u8]> {
    if !is_valid_integer(contents) || contents[0] & 0x80 != 0 {
        return None;
    }
    Some(match contents {
        [0x00, rest @ ..] => rest,
        _ => contents,
    })
}

fn uint64(contents: &[u8]) -> Option<u64> {
    let magnitude = unsigned(contents)?;
    if magnitude.len() > 8 {
        return None;
    }
    Some(magnitude.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
}

/// The bit length of a big-endian magnitude without leading zeros.
pub fn bits(magnitude: &[u8]) -> usize {
    match magnitude.first() {
        None => 0,
        Some(&b) => (magnitude.len() - 1) * 8 + (8 - b.leading_zeros() as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_must_be_minimal() {
        assert_eq!(Der::new(&[0x02, 0x01, 0x05]).any(), Some((0x02, &[5u8][..])));
        assert_eq!(Der::new(&[0x02, 0x81, 0x01, 0x05]).any(), None);
        assert_eq!(Der::new(&[0x02, 0x80]).any(), None);
        assert_eq!(Der::new(&[0x02, 0x82, 0x00, 0x81]).any(), None);
        assert_eq!(Der::new(&[0x02, 0x05, 0x01]).any(), None);
        assert_eq!(Der::new(&[0x1f, 0x01, 0x00]).any(), None);
    }

    #[test]
    fn integers_must_be_minimal() {
        assert!(is_valid_integer(&[0x00]));
        assert!(is_valid_integer(&[0x00, 0x80]));
        assert!(is_valid_integer(&[0x92]));
        assert!(is_valid_integer(&[0xff]));
        assert!(!is_valid_integer(&[]));
        assert!(!is_valid_integer(&[0x00, 0x12]));
        assert!(!is_valid_integer(&[0xff, 0x92]));
        assert_eq!(unsigned(&[0x00, 0x80]), Some(&[0x80u8][..]));
        assert_eq!(unsigned(&[0x80]), None);
        assert_eq!(uint64(&[0x02]), Some(2));
        assert_eq!(uint64(&[0x00, 0x02]), None);
        assert_eq!(bits(&[0x01, 0x00]), 9);
        assert_eq!(bits(&[]), 0);
    }
}
