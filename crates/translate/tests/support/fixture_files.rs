//! The golden fixtures (`tests/fixtures/*.yaml`), in file-name order, for
//! the tests that read them (`fixtures.rs`, which also rewrites them, keeps
//! its own listing): each holds its input, then [`MARKER`], then the
//! expected output.

// Each test binary includes this file and uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub const MARKER: &str = "# ---- expected output";

pub struct Fixture {
    pub path: PathBuf,
    pub text: String,
}

impl Fixture {
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// The manifests before the marker.
    pub fn input(&self) -> &str {
        self.text.split(MARKER).next().unwrap_or_default()
    }

    /// The expected output after the marker's line, if the fixture has one.
    pub fn expected(&self) -> Option<&str> {
        let after = self.text.split(MARKER).nth(1)?;
        Some(after.split_once('\n').map_or("", |(_, rest)| rest))
    }
}

pub fn all() -> Vec<Fixture> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Fixture { path, text }
        })
        .collect()
}
