//! Query strings the way Go's `url.ParseQuery` reads them: `&`-separated,
//! `+` is a space, `%XX` escapes; pairs with a `;` or a bad escape are
//! skipped; `get` returns the first value.

pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(raw: Option<&str>) -> Query {
        let mut pairs = Vec::new();
        for pair in raw.unwrap_or("").split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Some(k), Some(v)) = (unescape(k), unescape(v)) {
                pairs.push((k, v));
            }
        }
        Query(pairs)
    }

    /// First value for `key`, "" when absent (Go's `Values.Get`).
    pub(crate) fn get(&self, key: &str) -> &str {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map_or("", |(_, v)| v.as_str())
    }
}

fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hi = hex(*b.get(i + 1)?)?;
                let lo = hex(*b.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_parse_query() {
        let q = Query::parse(Some("a=1&b=x+y%21&a=2&c&bad=%zz&semi=1;x=2&&d=%41"));
        assert_eq!(q.get("a"), "1");
        assert_eq!(q.get("b"), "x y!");
        assert_eq!(q.get("c"), "");
        assert_eq!(q.get("bad"), "");
        assert_eq!(q.get("semi"), "");
        assert_eq!(q.get("d"), "A");
        assert_eq!(q.get("missing"), "");
        assert_eq!(Query::parse(None).get("a"), "");
    }
}
