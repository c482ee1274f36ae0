//! Will Envoy accept this? Checkers for the parts of a configuration that
//! Envoy parses itself and rejects (NACKs) when they do not parse.
//!
//! Each module mirrors the parser it stands in for, so the translator can
//! fence what Envoy would refuse (a 500 in its place) instead of sending it:
//!
//! - [`regex`]: RE2 with Envoy's options (`safe_regex`): syntax and compiled
//!   program size, split along RE2's own source files;
//! - [`format`](mod@format): Envoy's substitution format strings
//!   (`%REQ(x)%`, …), after its formatter command parsers;
//! - [`cel`]: CEL text → the parsed AST Envoy's RBAC filter takes, after
//!   cel-go/cel-cpp's grammar (Envoy does not parse CEL text itself).
//!
//! They are pure functions of one string and know nothing of Gateway API.
//! The real Envoy is the oracle: `tests/regex_oracle.rs` and
//! `tests/policy_oracle.rs` compare their verdicts with the pinned binary's,
//! so an Envoy upgrade that changes an answer fails a test.

pub mod cel;
pub mod format;
pub mod regex;
