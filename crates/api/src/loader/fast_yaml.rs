//! A fast reader for the YAML that Kubernetes manifests are made of.
//!
//! serde-saphyr reads a few MB/s; most manifests use a small, regular part
//! of YAML. [`read`] reads one document (a chunk from `split.rs`) of that
//! part straight into the loader's untyped tree ([`Node`], every line 0, as
//! the spanless read of `loader.rs`'s fast path gives it) and answers
//! `None` — "not mine" — for anything else, which then goes through
//! serde-saphyr exactly as before. It never reports an error itself: a
//! document it refuses is read by serde-saphyr, which gives `file:line`.
//!
//! What it reads (everything must be on the lines shown; nothing else is
//! guessed at):
//! - block mappings and block sequences (including a sequence at its key's
//!   indentation and `- key: value` compact mappings), indented by spaces;
//! - flow mappings and sequences `{a: b}` / `[x, y]` on one line, nested;
//! - plain scalars on one line, resolved as serde-saphyr does with the
//!   loader's options (YAML 1.2 core schema, strict booleans, non-finite
//!   floats as the strings `.inf`/`-.inf`/`.nan`): see [`resolve_plain`];
//! - single- and double-quoted scalars on one line, with every YAML escape;
//! - literal and folded block scalars (`|`, `|-`, `>`, `>-`) whose lines
//!   share one indentation (no indentation indicator, no `+`);
//! - comments and blank lines.
//!
//! Not mine: anchors, aliases, tags, directives, `?` complex keys, keys that
//! are not strings (`1:`, `true:`, `null:`), the merge key `<<`, duplicate
//! keys, scalars over several lines, flow collections over several lines,
//! tabs, carriage returns, characters YAML does not print, a `---` or `...`
//! inside the chunk, anything beyond 40 levels, 100,000 nodes, 512-byte
//! keys, 16 consecutive comment lines or 16 MiB (well inside serde-saphyr's own limits, so that nothing it
//! refuses is taken), and anything malformed. `crates/api/tests/fast_yaml_differential.rs`
//! holds the reader to serde-saphyr's result on every document it accepts.

use super::tree::{Entry, Node, NodeValue};

/// Deeper documents go to serde-saphyr (whose own limit is higher).
const MAX_DEPTH: usize = 40;
const MAX_NODES: usize = 100_000;
const MAX_KEY_BYTES: usize = 512;
const MAX_BYTES: usize = 16 << 20;
/// Consecutive comment lines (serde-saphyr's limit is 32 buffered).
const MAX_COMMENT_RUN: usize = 16;

/// Reads one YAML document; `None` when the document is not in the subset
/// this reader fully understands (see the module docs).
pub(crate) fn read(text: &str) -> Option<Node> {
    // Well inside serde-saphyr's budgets (64 MiB of scalars, of comments).
    if text.len() > MAX_BYTES || !plain_text(text) {
        return None;
    }
    let mut reader = Reader::new(text)?;
    let first = reader.next_content(0);
    let line = reader.lines.get(first)?;
    let (value, next) = reader.block_at(first, line.indent, -1, 0)?;
    // serde-saphyr's stream reader drops a null document: not mine.
    if next != reader.lines.len() || value == NodeValue::Null {
        return None;
    }
    Some(plain(value))
}

fn plain(value: NodeValue) -> Node {
    Node { line: 0, value }
}

/// Only printable YAML characters, no tab, no carriage return (so that
/// every line break is `\n` and every indentation is spaces).
fn plain_text(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.iter().all(|&b| b == b'\n' || (b' '..=b'~').contains(&b)) {
        return true;
    }
    text.chars().all(|c| {
        matches!(c, '\n' | ' '..='~')
            || (c >= '\u{a0}' && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'))
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Blank,
    Comment,
    Content,
}

#[derive(Clone, Copy)]
struct Line {
    start: usize,
    /// Exclusive, before the `\n`.
    end: usize,
    indent: usize,
    kind: Kind,
    /// Whether a `\n` ends the line (the last line of a file may lack one).
    newline: bool,
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    lines: Vec<Line>,
    nodes: usize,
}

type Parsed = Option<(NodeValue, usize)>;

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Option<Self> {
        let bytes = text.as_bytes();
        let mut lines = Vec::with_capacity(bytes.len() / 24 + 1);
        let mut start = 0usize;
        let mut comments = 0usize;
        while start < bytes.len() {
            let (end, newline) = match bytes[start..].iter().position(|&b| b == b'\n') {
                Some(at) => (start + at, true),
                None => (bytes.len(), false),
            };
            let raw = &bytes[start..end];
            // Document markers and directives are serde-saphyr's business.
            if raw.starts_with(b"---") || raw.starts_with(b"...") || raw.starts_with(b"%") {
                return None;
            }
            let indent = raw.iter().take_while(|&&b| b == b' ').count();
            let kind = match raw.get(indent) {
                None => Kind::Blank,
                Some(b'#') => Kind::Comment,
                Some(_) => Kind::Content,
            };
            // serde-saphyr refuses more than 32 comments buffered while it
            // looks ahead: long runs of comment lines are its business.
            comments = match kind {
                Kind::Comment => comments + 1,
                Kind::Blank => comments,
                Kind::Content => 0,
            };
            if comments > MAX_COMMENT_RUN {
                return None;
            }
            lines.push(Line {
                start,
                end,
                indent,
                kind,
                newline,
            });
            start = end + 1;
        }
        Some(Reader {
            text,
            bytes,
            lines,
            nodes: 0,
        })
    }

    fn count(&mut self) -> Option<()> {
        self.nodes += 1;
        (self.nodes <= MAX_NODES).then_some(())
    }

    /// Index of the first content line at or after `from` (`lines.len()`
    /// when there is none).
    fn next_content(&self, from: usize) -> usize {
        let mut at = from;
        while let Some(line) = self.lines.get(at) {
            if line.kind == Kind::Content {
                return at;
            }
            at += 1;
        }
        self.lines.len()
    }

    fn byte(&self, pos: usize) -> Option<u8> {
        self.bytes.get(pos).copied()
    }

    /// Whether `line` starts a block sequence entry at column `col`.
    fn dash_at(&self, line: usize, col: usize) -> bool {
        let Some(l) = self.lines.get(line) else {
            return false;
        };
        let pos = l.start + col;
        pos < l.end && self.bytes[pos] == b'-' && (pos + 1 == l.end || self.bytes[pos + 1] == b' ')
    }

    /// A block node whose first character is on `line` at column `col`;
    /// `parent` is the indentation of the enclosing block collection (-1 at
    /// the top). Returns the node and the next content line after it.
    fn block_at(&mut self, line: usize, col: usize, parent: isize, depth: usize) -> Parsed {
        if depth > MAX_DEPTH || (col as isize) <= parent {
            return None;
        }
        if self.dash_at(line, col) {
            return self.block_seq(line, col, depth);
        }
        let l = self.lines[line];
        let pos = l.start + col;
        if matches!(self.byte(pos)?, b'|' | b'>') {
            return self.block_scalar(line, pos, parent);
        }
        if let Some((key, after)) = self.block_key(pos, l.end)? {
            return self.block_map(line, col, key, after, depth);
        }
        let (value, end) = self.inline(pos, l.end, depth)?;
        self.line_rest(end, l.end)?;
        Some((value, self.next_content(line + 1)))
    }

    /// A block sequence whose first `-` is on `line` at column `col`.
    fn block_seq(&mut self, mut line: usize, col: usize, depth: usize) -> Parsed {
        self.count()?;
        let mut items = Vec::new();
        loop {
            let l = self.lines[line];
            let after = l.start + col + 1;
            let (value, next) = self.value_after(line, after, col, false, depth + 1)?;
            self.count()?;
            items.push(plain(value));
            match self.lines.get(next) {
                Some(n) if n.indent == col && self.dash_at(next, col) => line = next,
                Some(n) if n.indent > col => return None,
                _ => return Some((NodeValue::Seq(items), next)),
            }
        }
    }

    /// A block mapping at column `col` whose first key (already read) ends
    /// before `after` on `line`.
    fn block_map(
        &mut self,
        mut line: usize,
        col: usize,
        first: String,
        mut after: usize,
        depth: usize,
    ) -> Parsed {
        self.count()?;
        let mut entries: Vec<Entry> = Vec::new();
        let mut key = first;
        loop {
            if key == "<<" || key.len() > MAX_KEY_BYTES || duplicate(&entries, &key) {
                return None;
            }
            let (value, next) = self.value_after(line, after, col, true, depth + 1)?;
            self.count()?;
            entries.push(Entry {
                key,
                key_line: 0,
                value: plain(value),
            });
            match self.lines.get(next) {
                Some(n) if n.indent == col => {
                    let (k, a) = self.block_key(n.start + col, n.end)??;
                    key = k;
                    after = a;
                    line = next;
                }
                Some(n) if n.indent > col => return None,
                _ => return Some((NodeValue::Map(entries), next)),
            }
        }
    }

    /// The value after a key's `:` or a sequence's `-` (at `pos` on `line`),
    /// in a collection at indentation `col`. `in_map`: a sequence at `col`
    /// on the next lines is the value (`key:\n- a`).
    fn value_after(&mut self, line: usize, pos: usize, col: usize, in_map: bool, depth: usize) -> Parsed {
        let l = self.lines[line];
        let mut at = pos;
        while at < l.end && self.bytes[at] == b' ' {
            at += 1;
        }
        if at == l.end || self.bytes[at] == b'#' {
            if at < l.end && at == pos {
                return None; // `-#`: not a comment
            }
            let next = self.next_content(line + 1);
            return match self.lines.get(next) {
                Some(n) if n.indent > col => self.block_at(next, n.indent, col as isize, depth),
                Some(n) if in_map && n.indent == col && self.dash_at(next, col) => {
                    self.block_seq(next, col, depth)
                }
                _ => {
                    self.count()?;
                    Some((NodeValue::Null, next))
                }
            };
        }
        if in_map {
            // The value is on the key's line: a scalar, a flow collection
            // or a block scalar; never a nested block collection.
            match self.bytes[at] {
                b'|' | b'>' => self.block_scalar(line, at, col as isize),
                _ => {
                    let (value, end) = self.inline(at, l.end, depth)?;
                    self.line_rest(end, l.end)?;
                    Some((value, self.next_content(line + 1)))
                }
            }
        } else {
            let column = at - l.start;
            self.block_at(line, column, col as isize, depth)
        }
    }

    /// Only spaces and a comment from `pos` to the end of the line.
    fn line_rest(&self, pos: usize, end: usize) -> Option<()> {
        let mut at = pos;
        while at < end && self.bytes[at] == b' ' {
            at += 1;
        }
        // `#` starts a comment only after a space.
        if at == end || (self.bytes[at] == b'#' && at > 0 && self.bytes[at - 1] == b' ') {
            Some(())
        } else {
            None
        }
    }

    /// If a block mapping key starts at `pos`: the key and the position
    /// after its `:`. `Some(None)`: not a key. `None`: not mine.
    fn block_key(&self, pos: usize, end: usize) -> Option<Option<(String, usize)>> {
        match self.byte(pos)? {
            quote @ (b'"' | b'\'') => {
                let (key, mut at) = self.quoted(pos, end, quote)?;
                while at < end && self.bytes[at] == b' ' {
                    at += 1;
                }
                if at < end && self.bytes[at] == b':' && (at + 1 == end || self.bytes[at + 1] == b' ') {
                    Some(Some((key, at + 1)))
                } else {
                    Some(None)
                }
            }
            b'[' | b'{' => Some(None),
            _ => {
                let (text, stop) = self.plain_scalar(pos, end, false)?;
                if stop < end && self.bytes[stop] == b':' {
                    plain_key(text).map(|key| Some((key, stop + 1)))
                } else {
                    Some(None)
                }
            }
        }
    }

    /// A plain scalar starting at `pos` on one line: its text (trailing
    /// spaces trimmed) and where it stops (at a `: `, a ` #`, the end of the
    /// line, or in flow context a flow indicator).
    fn plain_scalar(&self, pos: usize, end: usize, flow: bool) -> Option<(&'a str, usize)> {
        let first = self.byte(pos)?;
        let next = self.bytes.get(pos + 1).copied().filter(|_| pos + 1 < end);
        let separator = |b: Option<u8>| match b {
            None | Some(b' ') => true,
            Some(b',' | b'[' | b']' | b'{' | b'}') => flow,
            _ => false,
        };
        match first {
            b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|' | b'>' | b'\'' | b'"'
            | b'%' | b'@' | b'`' => return None,
            // `?x` and `:x` are plain scalars to YAML 1.2, but rare enough
            // to leave to serde-saphyr.
            b'?' | b':' => return None,
            b'-' if separator(next) => return None,
            _ => {}
        }
        let mut at = pos;
        let mut last = pos; // end of the last non-space character
        while at < end {
            let b = self.bytes[at];
            match b {
                b':' if separator(self.bytes.get(at + 1).copied().filter(|_| at + 1 < end)) => break,
                b'#' if at > pos && self.bytes[at - 1] == b' ' => break,
                b',' | b'[' | b']' | b'{' | b'}' if flow => break,
                b' ' => {}
                _ => last = at + 1,
            }
            at += 1;
        }
        // `at == pos` only when the scalar would be empty, which a plain
        // scalar cannot be.
        if last == pos {
            return None;
        }
        Some((&self.text[pos..last], at))
    }

    /// A node on one line in block context after a key or `-`: a flow
    /// collection, a quoted scalar or a plain scalar. Returns the value and
    /// the position after it.
    fn inline(&mut self, pos: usize, end: usize, depth: usize) -> Option<(NodeValue, usize)> {
        self.count()?;
        match self.byte(pos)? {
            b'[' | b'{' => self.flow(pos, end, depth),
            quote @ (b'"' | b'\'') => {
                let (s, after) = self.quoted(pos, end, quote)?;
                Some((NodeValue::Str(s), after))
            }
            _ => {
                let (text, stop) = self.plain_scalar(pos, end, false)?;
                Some((resolve_plain(text), stop))
            }
        }
    }

    /// A flow collection starting at `pos` (`[` or `{`), ending on the same
    /// line.
    fn flow(&mut self, pos: usize, end: usize, depth: usize) -> Option<(NodeValue, usize)> {
        if depth > MAX_DEPTH {
            return None;
        }
        let open = self.bytes[pos];
        let close = if open == b'[' { b']' } else { b'}' };
        let mut at = pos + 1;
        let mut items = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        loop {
            at = self.skip_spaces(at, end);
            let b = self.byte(at).filter(|_| at < end)?;
            if b == close && items.is_empty() && entries.is_empty() {
                at += 1;
                break;
            }
            if open == b'[' {
                let (value, after) = self.flow_node(at, end, depth + 1)?;
                items.push(plain(value));
                at = self.skip_spaces(after, end);
            } else {
                let (key, after) = match b {
                    quote @ (b'"' | b'\'') => self.quoted(at, end, quote)?,
                    b'[' | b'{' => return None,
                    _ => {
                        let (text, stop) = self.plain_scalar(at, end, true)?;
                        // After a plain key, serde-saphyr wants `: ` (it
                        // refuses `{a:[]}`; `{a:}` is left to it too).
                        if self.byte(stop + 1).filter(|_| stop + 1 < end) != Some(b' ') {
                            return None;
                        }
                        (plain_key(text)?, stop)
                    }
                };
                if key == "<<" || key.len() > MAX_KEY_BYTES || duplicate(&entries, &key) {
                    return None;
                }
                at = self.skip_spaces(after, end);
                if self.byte(at).filter(|_| at < end)? != b':' {
                    return None; // `{a}` or `{a b}`
                }
                at = self.skip_spaces(at + 1, end);
                let value = match self.byte(at).filter(|_| at < end)? {
                    b',' | b'}' => {
                        self.count()?;
                        NodeValue::Null
                    }
                    _ => {
                        let (value, after) = self.flow_node(at, end, depth + 1)?;
                        at = self.skip_spaces(after, end);
                        value
                    }
                };
                entries.push(Entry {
                    key,
                    key_line: 0,
                    value: plain(value),
                });
            }
            match self.byte(at).filter(|_| at < end)? {
                b',' => {
                    at += 1;
                    // A trailing comma, `[a, ]`: serde-saphyr's business.
                    let next = self.skip_spaces(at, end);
                    if self.byte(next) == Some(close) {
                        return None;
                    }
                }
                b if b == close => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
        let value = if open == b'[' {
            NodeValue::Seq(items)
        } else {
            NodeValue::Map(entries)
        };
        Some((value, at))
    }

    fn skip_spaces(&self, mut at: usize, end: usize) -> usize {
        while at < end && self.bytes[at] == b' ' {
            at += 1;
        }
        at
    }

    /// A node inside a flow collection.
    fn flow_node(&mut self, pos: usize, end: usize, depth: usize) -> Option<(NodeValue, usize)> {
        self.count()?;
        match self.byte(pos)? {
            b'[' | b'{' => self.flow(pos, end, depth),
            quote @ (b'"' | b'\'') => {
                let (s, after) = self.quoted(pos, end, quote)?;
                // `["a": b]` is a one-pair mapping: not mine.
                if self.byte(self.skip_spaces(after, end)) == Some(b':') {
                    return None;
                }
                Some((NodeValue::Str(s), after))
            }
            _ => {
                let (text, stop) = self.plain_scalar(pos, end, true)?;
                if self.byte(stop) == Some(b':') {
                    return None; // `[a: b]`
                }
                Some((resolve_plain(text), stop))
            }
        }
    }

    /// A quoted scalar on one line starting at `pos`: its value and the
    /// position after the closing quote.
    fn quoted(&self, pos: usize, end: usize, quote: u8) -> Option<(String, usize)> {
        let mut out = String::new();
        let mut at = pos + 1;
        let mut run = at; // start of the text not yet copied
        while at < end {
            let b = self.bytes[at];
            if b == quote {
                if quote == b'\'' && self.bytes.get(at + 1) == Some(&b'\'') && at + 1 < end {
                    out.push_str(&self.text[run..=at]);
                    at += 2;
                    run = at;
                    continue;
                }
                out.push_str(&self.text[run..at]);
                return Some((out, at + 1));
            }
            if quote == b'"' && b == b'\\' {
                out.push_str(&self.text[run..at]);
                let e = *self.bytes.get(at + 1).filter(|_| at + 1 < end)?;
                at += 2;
                let simple = match e {
                    b'0' => Some('\0'),
                    b'a' => Some('\u{7}'),
                    b'b' => Some('\u{8}'),
                    b't' => Some('\t'),
                    b'n' => Some('\n'),
                    b'v' => Some('\u{b}'),
                    b'f' => Some('\u{c}'),
                    b'r' => Some('\r'),
                    b'e' => Some('\u{1b}'),
                    b' ' => Some(' '),
                    b'"' => Some('"'),
                    b'/' => Some('/'),
                    b'\\' => Some('\\'),
                    b'N' => Some('\u{85}'),
                    b'_' => Some('\u{a0}'),
                    b'L' => Some('\u{2028}'),
                    b'P' => Some('\u{2029}'),
                    _ => None,
                };
                let c = match (simple, e) {
                    (Some(c), _) => c,
                    (None, b'x' | b'u' | b'U') => {
                        let digits = match e {
                            b'x' => 2,
                            b'u' => 4,
                            _ => 8,
                        };
                        let hex = self.text.get(at..at + digits).filter(|_| at + digits <= end)?;
                        if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                            return None;
                        }
                        at += digits;
                        char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                    }
                    _ => return None,
                };
                out.push(c);
                run = at;
                continue;
            }
            at += 1;
        }
        None // not closed on this line
    }

    /// A block scalar whose indicator is at `pos` on `line`, in a
    /// collection at indentation `parent`.
    fn block_scalar(&mut self, line: usize, pos: usize, parent: isize) -> Parsed {
        self.count()?;
        let l = self.lines[line];
        let folded = self.bytes[pos] == b'>';
        let mut at = pos + 1;
        let strip = match self.byte(at).filter(|_| at < l.end) {
            Some(b'-') => {
                at += 1;
                true
            }
            Some(b' ') | None => false,
            _ => return None, // `+`, an indentation indicator, ...
        };
        self.line_rest(at, l.end)?;
        // The first line decides the indentation; a leading blank line
        // (whose spaces may matter) is serde-saphyr's business.
        let first = line + 1;
        let f = self.lines.get(first)?;
        if f.kind == Kind::Blank || (f.indent as isize) <= parent {
            return None;
        }
        let indent = f.indent;
        let mut body = String::new();
        let mut last = first; // last line with content
        let mut blanks = 0usize; // blank lines since the last content line
        let mut at_line = first;
        while let Some(c) = self.lines.get(at_line) {
            let blank = c.end == c.start + c.indent;
            if blank {
                if c.indent > indent {
                    return None; // spaces that would be content
                }
                blanks += 1;
            } else if c.indent < indent {
                break;
            } else {
                let content = &self.text[c.start + indent..c.end];
                if at_line != first {
                    if folded {
                        if content.starts_with(' ') {
                            return None; // a more-indented line keeps its breaks
                        }
                        if blanks == 0 {
                            body.push(' ');
                        }
                    } else {
                        body.push('\n');
                    }
                    for _ in 0..blanks {
                        body.push('\n');
                    }
                } else if folded && content.starts_with(' ') {
                    return None;
                }
                body.push_str(content);
                blanks = 0;
                last = at_line;
            }
            at_line += 1;
        }
        if !self.lines[last].newline {
            return None;
        }
        if !strip {
            body.push('\n');
        }
        Some((NodeValue::Str(body), self.next_content(at_line)))
    }
}

/// A plain key: serde-saphyr reads keys as strings, from the text as
/// written; only text that resolves to itself as a string is mine (`1:`,
/// `true:`, `~:`, `.Inf:` are not).
fn plain_key(text: &str) -> Option<String> {
    match resolve_plain(text) {
        NodeValue::Str(key) if key == text => Some(key),
        _ => None,
    }
}

fn duplicate(entries: &[Entry], key: &str) -> bool {
    entries.iter().any(|e| e.key == key)
}

/// What serde-saphyr (with the loader's options) makes of a plain scalar
/// read into an untyped value: null, a YAML 1.2 boolean, an integer
/// (decimal, `0x`, `0o`, `0b`, with `_` between digits), a float (Rust's
/// float syntax, finite), a non-finite float as the string `.inf`, `-.inf`
/// or `.nan`, or else the string itself. A port of serde-saphyr's
/// `deserialize_any` for plain scalars; the differential test keeps it
/// honest.
pub(crate) fn resolve_plain(text: &str) -> NodeValue {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return NodeValue::Null,
        "true" | "True" | "TRUE" => return NodeValue::Bool(true),
        "false" | "False" | "FALSE" => return NodeValue::Bool(false),
        _ => {}
    }
    // Only text starting with a digit, a sign or a dot can be a number.
    if !text
        .as_bytes()
        .first()
        .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.'))
    {
        return NodeValue::Str(text.to_string());
    }
    if let Some(rest) = text.strip_prefix('-') {
        if !leading_zero_decimal(rest)
            && let Some(v) = parse_int(rest, true)
            && let Ok(v) = i64::try_from(v)
        {
            return NodeValue::Int(v);
        }
    } else if let Some(v) = parse_int(text.strip_prefix('+').unwrap_or(text), false)
        && let Ok(v) = u64::try_from(v)
    {
        return NodeValue::UInt(v);
    }
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    match unsigned {
        ".nan" | ".NaN" | ".NAN" => return NodeValue::Str(".nan".to_string()),
        ".inf" | ".Inf" | ".INF" => {
            return NodeValue::Str(if negative { "-.inf" } else { ".inf" }.to_string());
        }
        _ => {}
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => NodeValue::Float(v),
        // A numeral too large for f64 (`1e999`).
        Ok(v) if v.is_infinite() && unsigned.as_bytes().first().is_some_and(u8::is_ascii_digit) => {
            NodeValue::Str(if v < 0.0 { "-.inf" } else { ".inf" }.to_string())
        }
        _ => NodeValue::Str(text.to_string()),
    }
}

/// `0127` (a decimal with a redundant leading zero; no `_`, no radix).
fn leading_zero_decimal(digits: &str) -> bool {
    digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit())
}

/// An integer without its sign (as serde-saphyr's `parse_int_*`): decimal
/// without a redundant leading zero, or `0x`/`0o`/`0b`; `_` only between
/// digits. `negative` gives the value's sign.
fn parse_int(rest: &str, negative: bool) -> Option<i128> {
    let (radix, digits) = if let Some(d) = rest.strip_prefix("0x").or_else(|| rest.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = rest.strip_prefix("0o").or_else(|| rest.strip_prefix("0O")) {
        (8, d)
    } else if let Some(d) = rest.strip_prefix("0b").or_else(|| rest.strip_prefix("0B")) {
        (2, d)
    } else {
        if rest.starts_with('0') && rest != "0" {
            return None;
        }
        (10, rest)
    };
    let bytes = digits.as_bytes();
    let mut magnitude: u128 = 0;
    let mut saw = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let prev_ok = i > 0 && bytes[i - 1] != b'_';
            let next_ok = i + 1 < bytes.len() && bytes[i + 1] != b'_';
            if !prev_ok || !next_ok {
                return None;
            }
            continue;
        }
        let d = char::from(b).to_digit(radix)?;
        magnitude = magnitude
            .checked_mul(u128::from(radix))?
            .checked_add(u128::from(d))?;
        saw = true;
    }
    if !saw {
        return None;
    }
    if negative {
        if magnitude == (i128::MAX as u128) + 1 {
            Some(i128::MIN)
        } else {
            i128::try_from(magnitude).ok()?.checked_neg()
        }
    } else {
        i128::try_from(magnitude).ok()
    }
}
