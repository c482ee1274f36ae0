//! Reading manifest files from a directory a tenant can write to, without
//! letting what is in it hang the reader or reach outside it.
//!
//! Both readers of a directory (`loader::load_path` for `translate -f DIR`
//! and the file provider of `serve DIR`) judge every entry with
//! [`Root::entry`] and read files with [`Root::read`]:
//!
//! - **Regular files only.** A FIFO, socket or device named `*.yaml` is
//!   reported ([`FileError::NotRegular`]) and never read: reading a FIFO
//!   blocks until a writer comes, `/dev/zero` never ends. The type is
//!   checked before opening and again on the opened handle, and the file
//!   is opened with `O_NONBLOCK`, so an entry that becomes a FIFO between
//!   the check and the open does not block the open either.
//! - **A size cap**, [`MAX_FILE_BYTES`] (16 MiB) per file: far above any
//!   real manifest (Kubernetes caps an object at ~1.5 MiB in etcd), small
//!   enough that one file cannot exhaust memory. Larger files are reported
//!   ([`FileError::TooLarge`]); at most cap + 1 bytes are ever read.
//! - **Containment.** An entry is followed (file or directory, through
//!   any number of symbolic links) only when its canonical path is inside
//!   the canonical root; anything else is reported with the link and its
//!   target ([`FileError::Escapes`]). Links inside the root keep working
//!   (Kubernetes' ConfigMap volumes are `name -> ..data/name`,
//!   `..data -> ..2024_…`). A link loop is reported, never followed
//!   ([`FileError::Unresolvable`]). The file is then opened by its
//!   canonical path with `O_NOFOLLOW`, so a last component swapped for a
//!   link after the check is refused rather than followed, and the path
//!   the kernel actually opened (`/proc/self/fd/N`) is checked against the
//!   root again, which catches a directory component swapped for a link in
//!   that window (without `/proc` only the checks before the open remain;
//!   `openat2(RESOLVE_BENEATH)` would need `unsafe`, which is forbidden).

use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Largest manifest file read: 16 MiB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Why a file (or directory entry) is not read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A FIFO, socket or device: reading it may block forever or never end.
    #[error("not a regular file ({kind}); only regular files are read")]
    NotRegular { kind: &'static str },
    #[error("the file is larger than the {limit}-byte limit")]
    TooLarge { limit: u64 },
    /// The entry (a symbolic link, or a path through one) leads outside the
    /// directory being read.
    #[error(
        "symbolic link to {}, outside the directory {}; not followed",
        target.display(),
        root.display()
    )]
    Escapes { target: PathBuf, root: PathBuf },
    /// A dangling link or a link loop.
    #[error("cannot read file: {source}")]
    Unresolvable {
        #[source]
        source: io::Error,
    },
    #[error("cannot read file: {source}")]
    Io {
        #[source]
        source: io::Error,
    },
}

impl FileError {
    /// Whether nothing is at the path at all (not even a dangling link).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { source } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What a directory entry is, judged from inside a [`Root`].
#[derive(Debug)]
pub enum Entry {
    /// A directory inside the root; `real` is its canonical path (for loop
    /// detection).
    Dir { real: PathBuf },
    /// A regular file inside the root.
    File,
    /// Something not to follow or read, and why.
    Refused(FileError),
}

/// A directory whose entries are read only if they stay inside it.
#[derive(Clone, Debug)]
pub struct Root {
    canonical: PathBuf,
}

impl Root {
    /// Fails if `dir` cannot be resolved.
    pub fn new(dir: &Path) -> io::Result<Self> {
        Ok(Self {
            canonical: fs::canonicalize(dir)?,
        })
    }

    /// The canonical root.
    pub fn canonical(&self) -> &Path {
        &self.canonical
    }

    /// Resolves `path` and checks that it stays inside the root.
    fn resolve(&self, path: &Path) -> Result<PathBuf, FileError> {
        let real = match fs::canonicalize(path) {
            Ok(real) => real,
            // Nothing there at all, not even a dangling link: gone.
            Err(source)
                if source.kind() == io::ErrorKind::NotFound && fs::symlink_metadata(path).is_err() =>
            {
                return Err(FileError::Io { source });
            }
            Err(source) if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
                return Err(FileError::Unresolvable { source });
            }
            Err(source) => return Err(FileError::Io { source }),
        };
        if !real.starts_with(&self.canonical) {
            return Err(FileError::Escapes {
                target: real,
                root: self.canonical.clone(),
            });
        }
        Ok(real)
    }

    /// Judges one path below the root, following links only inside it.
    pub fn entry(&self, path: &Path) -> Entry {
        let real = match self.resolve(path) {
            Ok(real) => real,
            Err(error) => return Entry::Refused(error),
        };
        match fs::metadata(&real) {
            Ok(metadata) if metadata.is_dir() => Entry::Dir { real },
            Ok(metadata) => match regular(&metadata) {
                Ok(()) => Entry::File,
                Err(error) => Entry::Refused(error),
            },
            Err(source) => Entry::Refused(FileError::Io { source }),
        }
    }

    /// Reads a regular file below the root (see the module docs): never
    /// blocks on a FIFO or device, never reads more than [`MAX_FILE_BYTES`]
    /// + 1 bytes, never follows a link out of the root.
    pub fn read(&self, path: &Path) -> Result<Vec<u8>, FileError> {
        let real = self.resolve(path)?;
        let file = open_nonblocking(&real)?;
        // Where the kernel actually opened it (Linux): a directory swapped
        // for a link between `resolve` and the open shows here.
        if let Ok(opened) = fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            && opened.is_absolute()
            && !opened.starts_with(&self.canonical)
        {
            return Err(FileError::Escapes {
                target: opened,
                root: self.canonical.clone(),
            });
        }
        read_capped(file)
    }
}

/// Reads one file the user named explicitly (`translate -f FILE`): links
/// are followed and a pipe is read (`-f <(command)` is the user's choice
/// to wait for it), but never more than [`MAX_FILE_BYTES`], so `-f
/// /dev/zero` ends with an error instead of exhausting memory.
pub fn read_file(path: &Path) -> Result<Vec<u8>, FileError> {
    let file = File::open(path).map_err(|source| FileError::Io { source })?;
    read_capped(file)
}

fn open_nonblocking(path: &Path) -> Result<File, FileError> {
    // Checked before opening: opening some devices has side effects.
    let metadata = fs::symlink_metadata(path).map_err(|source| FileError::Io { source })?;
    regular(&metadata)?;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| {
            if source.raw_os_error() == Some(libc::ELOOP) {
                FileError::Unresolvable { source }
            } else {
                FileError::Io { source }
            }
        })?;
    // The entry may have been replaced between the check and the open.
    let metadata = file.metadata().map_err(|source| FileError::Io { source })?;
    regular(&metadata)?;
    Ok(file)
}

fn read_capped(file: File) -> Result<Vec<u8>, FileError> {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            limit: MAX_FILE_BYTES,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // The file may grow while it is read: never take more than the cap + 1.
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Io { source })?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(FileError::TooLarge {
            limit: MAX_FILE_BYTES,
        });
    }
    Ok(bytes)
}

fn regular(metadata: &Metadata) -> Result<(), FileError> {
    let t = metadata.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link that appeared while it was read"
    } else {
        "not a file"
    };
    Err(FileError::NotRegular { kind })
}
