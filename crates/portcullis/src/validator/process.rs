//! The process leaf of the validator: `envoy --mode validate` on one
//! candidate bootstrap. Envoy refuses `/dev/stdin` as a config path
//! ("Invalid path"), so the candidate goes through a private temporary file
//! at `path`, removed afterwards.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use translate::strict::Verdict;

/// Runs Envoy on `text`; a timeout, a missing binary or a crash is
/// `Unavailable`, exit code 1 is a rejection with Envoy's reason.
pub(super) fn run(bin: &Path, path: &Path, text: &str, timeout: Duration) -> Verdict {
    if let Err(e) = std::fs::write(path, text) {
        return Verdict::Unavailable(format!("cannot write {}: {e}", path.display()));
    }
    let child = Command::new(bin)
        .args(["--mode", "validate", "--log-level", "critical", "-c"])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_file(path);
            return Verdict::Unavailable(format!("cannot run {}: {e}", bin.display()));
        }
    };
    // Drained while Envoy runs: a rejection prints the whole proto,
    // which can be larger than the pipe buffer.
    let reader = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
            text
        })
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("envoy --mode validate timed out after {:?}", timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(format!("waiting for envoy: {e}")),
        }
    };
    // After a timeout the reader is left behind: a grandchild may still
    // hold the pipe open.
    let stderr = match (&status, reader) {
        (Ok(_), Some(r)) => r.join().unwrap_or_default(),
        _ => String::new(),
    };
    let _ = std::fs::remove_file(path);
    match status {
        Err(e) => Verdict::Unavailable(e),
        Ok(s) if s.success() => Verdict::Accepted,
        // Envoy exits 1 on a configuration it rejects; killed by a
        // signal (no code) is a crash, an environment problem.
        Ok(s) if s.code() == Some(1) => Verdict::Rejected(translate::strict::envoy_reason(&stderr)),
        Ok(s) => Verdict::Unavailable(format!(
            "envoy --mode validate exited with {s}: {}",
            translate::strict::envoy_reason(&stderr)
        )),
    }
}
