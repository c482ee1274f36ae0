//! Reading a file without letting it stall the provider.
//!
//! `api::files` already refuses what is known to block (FIFOs, devices) and
//! caps the size, but a regular file can still block a `read` for as long
//! as its file system likes (a hung NFS or FUSE mount). Each read therefore
//! runs on its own short-lived thread and is waited for at most
//! [`READ_DEADLINE`]; a read that overruns is reported as this file's
//! error (its last good version stays in force) and the provider moves on
//! to the other files. The overrunning thread is left to finish on its
//! own; while it has not, that file is not read again (so a stuck mount
//! costs one thread per file, not one per rescan).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use api::files::{FileError, Root};

/// Longest wait for one file's read.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadFailure {
    #[error("{0}")]
    File(#[from] FileError),
    #[error("reading the file did not finish within {0:?}; the file system may be hung; not read")]
    Timeout(Duration),
    #[error("an earlier read of the file has not finished yet (the file system may be hung); not read")]
    StillReading,
    #[error("cannot start a thread to read the file: {0}")]
    Thread(std::io::Error),
    #[error("reading the file failed unexpectedly (the reading thread panicked); not read")]
    Panicked,
}

/// Runs reads with a deadline; counts the ones that overran.
#[derive(Clone, Debug)]
pub struct Reader {
    deadline: Duration,
    in_flight: Arc<Mutex<HashSet<PathBuf>>>,
    timeouts: Arc<AtomicU64>,
}

impl Reader {
    pub fn new(deadline: Duration) -> Self {
        Self {
            deadline,
            in_flight: Arc::default(),
            timeouts: Arc::default(),
        }
    }

    /// Reads that overran their deadline so far.
    pub fn timeouts(&self) -> u64 {
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Reads `path` below `root` (`Root::read`) with the deadline.
    pub fn read(&self, root: &Root, path: &Path) -> Result<Vec<u8>, ReadFailure> {
        let root = root.clone();
        let owned = path.to_path_buf();
        self.run(path, move || root.read(&owned))
    }

    /// Runs `read` (a read of `path`) on its own thread, waiting at most
    /// the deadline.
    pub fn run(
        &self,
        path: &Path,
        read: impl FnOnce() -> Result<Vec<u8>, FileError> + Send + 'static,
    ) -> Result<Vec<u8>, ReadFailure> {
        let in_flight = || self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        if !in_flight().insert(path.to_path_buf()) {
            return Err(ReadFailure::StillReading);
        }
        let (done, result) = mpsc::sync_channel(1);
        let registry = self.in_flight.clone();
        let key = path.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("portcullis-read".into())
            .spawn(move || {
                let bytes = read();
                // Out of the registry before the answer: once the caller
                // has the answer, reading the file again must not find
                // this finished read still in flight.
                registry
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&key);
                let _ = done.send(bytes);
            });
        if let Err(error) = spawned {
            in_flight().remove(path);
            return Err(ReadFailure::Thread(error));
        }
        match result.recv_timeout(self.deadline) {
            Ok(read) => Ok(read?),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
                Err(ReadFailure::Timeout(self.deadline))
            }
            // The thread ended without an answer (it panicked).
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(ReadFailure::Panicked),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_overruns_is_abandoned_and_not_started_again_while_it_runs() {
        let reader = Reader::new(Duration::from_millis(50));
        let (release, wait) = mpsc::channel::<()>();
        let path = Path::new("/stuck.yaml");
        let started = std::time::Instant::now();
        let first = reader.run(path, move || {
            let _ = wait.recv();
            Ok(b"late".to_vec())
        });
        assert!(matches!(first, Err(ReadFailure::Timeout(_))), "{first:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(reader.timeouts(), 1);
        let again = reader.run(path, || Ok(b"x".to_vec()));
        assert!(matches!(again, Err(ReadFailure::StillReading)), "{again:?}");
        // Other files are read meanwhile.
        let other = reader.run(Path::new("/other.yaml"), || Ok(b"ok".to_vec()));
        assert_eq!(other.ok(), Some(b"ok".to_vec()));
        // Once the stuck read ends, the file can be read again.
        let _ = release.send(());
        let mut next = reader.run(path, || Ok(b"x".to_vec()));
        for _ in 0..100 {
            if !matches!(next, Err(ReadFailure::StillReading)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            next = reader.run(path, || Ok(b"x".to_vec()));
        }
        assert_eq!(next.ok(), Some(b"x".to_vec()));
    }

    /// A read that has answered is over: the same file read right after
    /// it is read, never refused as still in flight (the provider reads a
    /// file again as soon as an edit is seen).
    #[test]
    fn a_file_read_right_after_its_last_read_answered_is_read() {
        let reader = Reader::new(Duration::from_secs(5));
        let path = Path::new("/again.yaml");
        for round in 0..2000 {
            let read = reader.run(path, || Ok(b"x".to_vec()));
            assert!(read.is_ok(), "read {round}: {read:?}");
        }
    }
}
