//! Go conventions echo-basic's clients see: canonical header names
//! (`textproto.CanonicalMIMEHeaderKey`) and `encoding/json` output
//! (`MarshalIndent(v, "", " ")`, HTML-safe escaping).

use serde::Serialize;

/// `x-forwarded-for` → `X-Forwarded-For`: upper-case the first letter and
/// every letter after a `-`, lower-case the rest.
pub(crate) fn canonical_header(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            };
            upper = c == '-';
            out
        })
        .collect()
}

/// Pretty JSON with a one-space indent, as `json.MarshalIndent(v, "", " ")`.
pub(crate) fn marshal_indent(v: &serde_json::Value) -> String {
    let mut out = Vec::new();
    let mut ser =
        serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b" "));
    // Serialising a `Value` into a Vec cannot fail.
    let _ = v.serialize(&mut ser);
    html_safe(&String::from_utf8_lossy(&out))
}

/// Compact JSON, as `json.Marshal`.
pub(crate) fn marshal(v: &serde_json::Value) -> String {
    html_safe(&v.to_string())
}

/// Go's encoder escapes `<`, `>`, `&`, U+2028 and U+2029 inside strings.
/// In serialised JSON these characters can only occur inside strings, so a
/// textual replacement is exact.
fn html_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        assert_eq!(canonical_header("x-forwarded-for"), "X-Forwarded-For");
        assert_eq!(canonical_header("user-agent"), "User-Agent");
        assert_eq!(canonical_header("X-ECHO-set-header"), "X-Echo-Set-Header");
        assert_eq!(canonical_header("x_foo-bar"), "X_foo-Bar");
        assert_eq!(canonical_header("--a"), "--A");
        assert_eq!(canonical_header("te"), "Te");
    }

    #[test]
    fn go_json_layout() {
        let v = serde_json::json!({"path": "/a?b=<&>", "headers": {"A": ["1", "2"]}, "e": {}});
        assert_eq!(
            marshal_indent(&v),
            "{\n \"path\": \"/a?b=\\u003c\\u0026\\u003e\",\n \"headers\": {\n  \"A\": [\n   \"1\",\n   \"2\"\n  ]\n },\n \"e\": {}\n}"
        );
        assert_eq!(
            marshal(&serde_json::json!({"message": "a<b"})),
            r#"{"message":"a\u003cb"}"#
        );
    }
}
