//! Splitting a YAML stream into documents before parsing, so that one broken
//! document does not lose the others.
//!
//! A line that starts at column 0 with `---` followed by nothing, whitespace or
//! a comment is a document marker. YAML forbids a document marker at column 0
//! inside any scalar (block scalars of a top-level key are indented; flow
//! scalars may not contain one), so this split agrees with a real YAML parser
//! for every document a Kubernetes manifest can hold. A marker followed by
//! content on the same line (`--- |`, `--- !tag`, `--- {a: b}`) starts a new
//! chunk that keeps the marker line, and the parser reads it. Directives
//! (`%YAML 1.2`) stay attached to the document they introduce.

/// One piece of the stream, holding at most one `---` (at its start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunk<'a> {
    pub(crate) text: &'a str,
    /// 1-based line number of the chunk's first line in the whole file.
    pub(crate) first_line: usize,
    /// 1-based line of the first line that holds content (not blank, not a
    /// comment, not a directive, not a bare document marker); `None` when the
    /// chunk is empty.
    pub(crate) content_line: Option<usize>,
}

/// Splits `text` into chunks at document markers. Empty chunks are kept (the
/// caller skips them) so that splitting never loses text.
pub(crate) fn split(text: &str) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let mut start = 0usize; // byte offset of the current chunk
    let mut start_line = 1usize;
    let mut state = ChunkState::default();
    let mut offset = 0usize;

    for (index, raw) in text.split_inclusive('\n').enumerate() {
        let line_no = index + 1;
        let line = trim_eol(raw);
        match marker(line) {
            Some(Marker::Bare) if state.only_directives() => {
                // `%YAML 1.2` / `---`: the marker opens the directives' document.
                state.opened = true;
            }
            Some(kind) => {
                if offset > start || state.any_line {
                    push_chunk(&mut chunks, text, start, offset, start_line, state.content_line);
                }
                state = ChunkState::default();
                match kind {
                    Marker::Bare => {
                        start = offset + raw.len();
                        start_line = line_no + 1;
                    }
                    Marker::WithContent => {
                        start = offset;
                        start_line = line_no;
                        state.any_line = true;
                        state.content_line = Some(line_no);
                    }
                }
            }
            None => {
                state.any_line = true;
                let trimmed = line.trim();
                if trimmed.is_empty() || trimmed.starts_with('#') {
                    // blank or comment
                } else if line.starts_with('%') && state.content_line.is_none() && !state.opened {
                    state.directives = true;
                } else if state.content_line.is_none() {
                    state.content_line = Some(line_no);
                }
            }
        }
        offset += raw.len();
    }
    if offset > start {
        push_chunk(&mut chunks, text, start, offset, start_line, state.content_line);
    }
    chunks
}

/// Line number (1-based) of the first content line of `text`, as [`split`]
/// would compute it for a single chunk; `None` when there is none.
pub(crate) fn first_content_line(text: &str) -> Option<usize> {
    text.split_inclusive('\n').enumerate().find_map(|(index, raw)| {
        let line = trim_eol(raw);
        let trimmed = line.trim();
        let skip = trimmed.is_empty()
            || trimmed.starts_with('#')
            || line.starts_with('%')
            || marker(line) == Some(Marker::Bare);
        (!skip).then_some(index + 1)
    })
}

#[derive(Default)]
struct ChunkState {
    any_line: bool,
    directives: bool,
    opened: bool,
    content_line: Option<usize>,
}

impl ChunkState {
    fn only_directives(&self) -> bool {
        self.directives && !self.opened && self.content_line.is_none()
    }
}

fn push_chunk<'a>(
    chunks: &mut Vec<Chunk<'a>>,
    text: &'a str,
    start: usize,
    end: usize,
    first_line: usize,
    content_line: Option<usize>,
) {
    if let Some(slice) = text.get(start..end) {
        chunks.push(Chunk {
            text: slice,
            first_line,
            content_line,
        });
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Marker {
    /// `---`, optionally followed by whitespace and a comment.
    Bare,
    /// `--- something`.
    WithContent,
}

fn marker(line: &str) -> Option<Marker> {
    let rest = line.strip_prefix("---")?;
    if rest.is_empty() {
        return Some(Marker::Bare);
    }
    if !rest.starts_with([' ', '\t']) {
        return None; // `----` or `---foo` is content
    }
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Some(Marker::Bare)
    } else {
        Some(Marker::WithContent)
    }
}

fn trim_eol(raw: &str) -> &str {
    let line = raw.strip_suffix('\n').unwrap_or(raw);
    line.strip_suffix('\r').unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(text: &str) -> Vec<(usize, Option<usize>, String)> {
        split(text)
            .into_iter()
            .map(|c| (c.first_line, c.content_line, c.text.to_string()))
            .collect()
    }

    #[test]
    fn splits_on_bare_markers_only() {
        let text = "---\na: 1\n--- # two\n\nb: 2\n----\nc: 3\n---\n";
        assert_eq!(
            summary(text),
            vec![
                (2, Some(2), "a: 1\n".to_string()),
                (4, Some(5), "\nb: 2\n----\nc: 3\n".to_string()),
            ]
        );
    }

    #[test]
    fn marker_with_content_keeps_its_line() {
        let text = "a: 1\n--- {b: 2}\n---\r\nc: 3";
        assert_eq!(
            summary(text),
            vec![
                (1, Some(1), "a: 1\n".to_string()),
                (2, Some(2), "--- {b: 2}\n".to_string()),
                (4, Some(4), "c: 3".to_string()),
            ]
        );
    }

    #[test]
    fn directives_stay_with_their_document() {
        let text = "%YAML 1.2\n---\na: 1\n---\nb: 2\n";
        assert_eq!(
            summary(text),
            vec![
                (1, Some(3), "%YAML 1.2\n---\na: 1\n".to_string()),
                (5, Some(5), "b: 2\n".to_string()),
            ]
        );
    }

    #[test]
    fn comment_only_chunks_have_no_content() {
        let text = "# just a comment\n---\n  \n";
        let chunks = split(text);
        assert_eq!(chunks.len(), 2);
        assert!(chunks.iter().all(|c| c.content_line.is_none()));
        assert_eq!(first_content_line("\n# c\n---\n  x: 1\n"), Some(4));
    }
}
