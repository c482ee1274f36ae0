//! The process leaf of the validator: `envoy --mode validate` on one
//! candidate bootstrap. Envoy refuses `/dev/stdin` as a config path
//! ("Invalid path"), so the candidate goes through a private temporary file
//! at `path`, removed afterwards.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use translate::strict::Verdict;

/// Why Envoy's validation ended without an exit status (`Unavailable`:
/// an environment problem, never the candidate's).
#[derive(Debug, thiserror::Error)]
enum WaitError {
    #[error("envoy --mode validate timed out after {0:?}")]
    TimedOut(Duration),
    #[error("waiting for envoy: {0}")]
    Wait(#[source] std::io::Error),
}

/// Runs Envoy on `text`; exit code 1 is a rejection with Envoy's reason,
/// and so is a fault Envoy caught while loading it (a crash the data plane
/// would have too); a timeout, a missing binary or a kill from outside is
/// `Unavailable`.
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
                break Err(WaitError::TimedOut(timeout));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(WaitError::Wait(e)),
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
        Err(e) => Verdict::Unavailable(e.to_string()),
        Ok(s) if s.success() => Verdict::Accepted,
        // Envoy exits 1 on a configuration it rejects.
        Ok(s) if s.code() == Some(1) => Verdict::Rejected(translate::strict::envoy_reason(&stderr)),
        // A fault Envoy's own handler caught while loading the candidate
        // (Envoy 1.40 segfaults on `%COALESCE(1)%`): the data-plane Envoy
        // would crash on it too, so it is the candidate's fault, not the
        // environment's, and is rejected (then isolated like a NACK).
        Ok(s) if crashed_on_input(&s, &stderr) => {
            Verdict::Rejected(format!("Envoy crashed loading it ({})", crash_line(&stderr)))
        }
        // Any other end (killed from outside, an odd exit code) is an
        // environment problem.
        Ok(s) => Verdict::Unavailable(format!(
            "envoy --mode validate exited with {s}: {}",
            translate::strict::envoy_reason(&stderr)
        )),
    }
}

/// Signals a fault inside Envoy raises; a kill from outside (SIGKILL,
/// SIGTERM) is not one of them.
const FAULT_SIGNALS: [i32; 5] = [
    4,  /* ILL */
    6,  /* ABRT */
    7,  /* BUS */
    8,  /* FPE */
    11, /* SEGV */
];

/// Whether Envoy died of a fault its backtrace handler reported ("Caught
/// Segmentation fault"), i.e. while loading the candidate.
fn crashed_on_input(status: &std::process::ExitStatus, stderr: &str) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal().is_some_and(|s| FAULT_SIGNALS.contains(&s)) && stderr.contains("Caught ")
}

/// Envoy's "Caught `<signal>`…" line, without the log prefix.
fn crash_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find_map(|l| l.find("Caught ").map(|i| l[i..].trim()))
        .unwrap_or("killed by a signal")
}

#[cfg(test)]
mod tests {
    use super::{WaitError, crash_line};

    #[test]
    fn a_validation_that_did_not_end_says_why() {
        assert_eq!(
            WaitError::TimedOut(std::time::Duration::from_secs(2)).to_string(),
            "envoy --mode validate timed out after 2s"
        );
        let e = std::io::Error::other("gone");
        assert_eq!(WaitError::Wait(e).to_string(), "waiting for envoy: gone");
    }

    #[test]
    fn crash_line_drops_the_log_prefix() {
        let stderr = "[2026-11-23 13:59:12.189][14364][critical][backtrace] [./source/server/backtrace.h:173] Caught Segmentation fault, suspect faulting address 0x0\n[x] Backtrace";
        assert_eq!(
            crash_line(stderr),
            "Caught Segmentation fault, suspect faulting address 0x0"
        );
        assert_eq!(crash_line("nothing"), "killed by a signal");
    }
}
