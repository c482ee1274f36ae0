//! Long-running Envoys (the data plane, the resident STRICT validators)
//! die with portcullis, even when it is SIGKILLed and cleans nothing up.
//!
//! Linux's `PR_SET_PDEATHSIG` does that, but it must be set in the child
//! between fork and exec, which needs `unsafe` (forbidden here). util-linux's
//! `setpriv --pdeathsig KILL -- envoy …` sets it and execs Envoy, so the
//! child's pid, name and exit status stay Envoy's own.
//!
//! The kernel sends the signal when the *thread* that forked the child
//! exits, not only the process: a child spawned from a worker thread would
//! be killed when that thread ends (tokio retires blocking threads after
//! 10 s idle). So every guarded child is forked by one thread that lives as
//! long as the process.
//!
//! Without `setpriv` (not Linux, not util-linux), children are spawned
//! plainly and a warning says they may outlive a killed portcullis.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// The thread that forks guarded children; it never exits.
fn spawner() -> Option<&'static Mutex<Sender<Job>>> {
    static SPAWNER: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("portcullis-spawner".into())
                .spawn(move || {
                    // The static sender is never dropped: this loop, and
                    // the thread, last as long as the process.
                    for job in rx {
                        job();
                    }
                })
                .ok()?;
            Some(Mutex::new(tx))
        })
        .as_ref()
}

/// `setpriv`, if it is there and knows `--pdeathsig` (`spawn` warns once
/// when it is not).
fn setpriv() -> Option<&'static Path> {
    static SETPRIV: OnceLock<Option<PathBuf>> = OnceLock::new();
    SETPRIV
        .get_or_init(|| {
            let found = ["/usr/bin/setpriv", "/bin/setpriv"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())?;
            let works = Command::new(&found)
                .args(["--pdeathsig", "KILL", "--", "true"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            works.then_some(found)
        })
        .as_deref()
}

/// Whether children spawned here die with this process.
pub fn guarded() -> bool {
    setpriv().is_some() && spawner().is_some()
}

/// Spawns `program`, set up by `configure` (arguments, stdio, …), so that
/// it is SIGKILLed when this process dies.
pub fn spawn(program: &Path, configure: impl FnOnce(&mut Command) + Send + 'static) -> io::Result<Child> {
    let (Some(setpriv), Some(spawner)) = (setpriv(), spawner()) else {
        static WARNED: OnceLock<()> = OnceLock::new();
        WARNED.get_or_init(|| {
            tracing::warn!("no setpriv --pdeathsig: Envoys may outlive a killed portcullis");
        });
        let mut cmd = Command::new(program);
        configure(&mut cmd);
        return cmd.spawn();
    };
    let program = program.to_path_buf();
    let (reply, answer) = mpsc::channel();
    let job: Job = Box::new(move || {
        let mut cmd = Command::new(setpriv);
        cmd.args(["--pdeathsig", "KILL", "--"]).arg(&program);
        configure(&mut cmd);
        let _ = reply.send(cmd.spawn());
    });
    spawner
        .lock()
        .map_err(|_| io::Error::other("the spawner thread's lock is poisoned"))?
        .send(job)
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the spawner thread gave no answer"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_child_is_the_program_itself_and_runs_from_any_thread() {
        // Spawned from a short-lived thread: the child must outlive it.
        let child = std::thread::spawn(|| {
            spawn(Path::new("/bin/sleep"), |c| {
                c.arg("30");
            })
        })
        .join()
        .expect("thread")
        .expect("spawn");
        let mut child = child;
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            matches!(child.try_wait(), Ok(None)),
            "the child outlives the thread that asked for it"
        );
        // setpriv execs the program: the pid is sleep's own.
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", child.id())).unwrap_or_default();
        assert_eq!(comm.trim(), "sleep");
        if Path::new("/usr/bin/setpriv").is_file() {
            assert!(guarded(), "setpriv is here: children must be guarded");
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}
