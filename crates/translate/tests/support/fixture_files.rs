//! The golden fixtures (`tests/fixtures/*.yaml`), in file-name order, for
//! the tests that read them (`fixtures.rs`, which also rewrites them, takes
//! only their paths: [`paths`]): each holds its input, then [`MARKER`],
//! then the expected output. [`yaml_files`] lists any such directory.

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

/// The `*.yaml` files of `dir`, in file-name order.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// The golden fixtures' paths, in file-name order.
pub fn paths() -> Vec<PathBuf> {
    yaml_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"))
}

pub fn all() -> Vec<Fixture> {
    paths()
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Fixture { path, text }
        })
        .collect()
}
