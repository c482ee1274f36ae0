//! The extension managers of the config file (`extensionManager(s)`, README
//! "Extension hooks"), wired into loading and translation for `serve`,
//! `translate --config` and `get/describe -f --config`.
//!
//! One [`Extensions`] holds the gRPC client chain (which implements the
//! translator's `Hooks`) and the loader options that make the registered
//! kinds loadable. Every entry point builds it the same way
//! ([`Extensions::from_config`]): an invalid configuration is a
//! startup error naming the field.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The configured extension managers, ready to use.
pub struct Extensions {
    pub chain: Arc<extension::Chain>,
    /// What the loader must accept beyond the built-in kinds.
    pub loader: api::loader::Options,
}

/// Why the extension managers of a config file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ExtensionSetupError {
    #[error(transparent)]
    File(#[from] crate::config::ConfigError),
    /// The configuration is invalid (`field` names it, as
    /// `extensionManager.service.fqdn.port`).
    #[error("config file {path}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: extension::ConfigError,
    },
    #[error("config file {path}: {source}")]
    Client {
        path: PathBuf,
        #[source]
        source: extension::ClientError,
    },
}

impl Extensions {
    /// `None` without a config file or without extension managers in it.
    pub fn from_config(
        config: Option<(&std::path::Path, &crate::config::ConfigFile)>,
    ) -> Result<Option<Self>, ExtensionSetupError> {
        let Some((path, file)) = config else {
            return Ok(None);
        };
        let config = extension::ExtensionConfig::from_spec(
            file.extension_manager.as_ref(),
            file.extension_managers.as_deref(),
        )
        .map_err(|source| ExtensionSetupError::Invalid {
            path: path.to_path_buf(),
            source,
        })?;
        if config.is_empty() {
            return Ok(None);
        }
        let chain = extension::Chain::new(&config, extension::ChainOptions::default()).map_err(|source| {
            ExtensionSetupError::Client {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok(Some(Self {
            loader: translate::extension::resources::loader_options(&config.registration()),
            chain: Arc::new(chain),
        }))
    }

    /// The translator's view of the chain.
    pub fn hooks(&self) -> &dyn translate::extension::Hooks {
        &*self.chain
    }

    /// Warnings for the `failOpen` failures the chain skipped during the last
    /// translation (a chained manager failed while another one's change was
    /// used: the reply could not carry the warning). Drained, so each is
    /// reported once per translation that produced it.
    pub fn skipped_failures(&self) -> Vec<api::Diagnostic> {
        self.chain
            .take_skipped_failures()
            .into_iter()
            .map(|e| {
                api::Diagnostic::warning(
                    None,
                    None,
                    format!("[extension] {e}; the manager was skipped (failOpen) and the other managers' change used"),
                )
            })
            .collect()
    }
}

/// The loader options of `extensions` (the defaults without them).
pub fn loader_options(extensions: Option<&Extensions>) -> api::loader::Options {
    extensions.map(|e| e.loader.clone()).unwrap_or_default()
}

/// The translator's seams: the validator of the mode, and the hooks.
pub fn seams<'a>(
    validator: Option<&'a dyn translate::strict::Validator>,
    extensions: Option<&'a Extensions>,
) -> translate::Seams<'a> {
    translate::Seams {
        validator,
        hooks: extensions.map(Extensions::hooks),
    }
}

impl Extensions {
    /// Calls so far that ended at their deadline or found no server: a
    /// translation that adds to it may succeed when repeated unchanged.
    pub fn transient_failures(&self) -> u64 {
        self.chain
            .stats()
            .calls
            .iter()
            .filter(|((_, r), _)| {
                matches!(
                    r,
                    extension::CallResult::Deadline | extension::CallResult::Unreachable
                )
            })
            .map(|(_, n)| n)
            .sum()
    }
}

/// First wait before `serve` translates unchanged inputs again after a hook
/// failed at its deadline or found no server.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
/// The wait doubles up to this while the failures last.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// When `serve` translates the same inputs again. The file provider only
/// publishes changes, so without this a route fenced because its
/// extension server was down (or slow) at the last edit would stay fenced
/// after the server came back. Bounded: [`RETRY_FIRST`], doubling to
/// [`RETRY_MAX`], and only while some hook keeps failing that way (the
/// reply cache answers the hooks that succeeded, so a retry re-calls only
/// the failed ones).
#[derive(Debug, Default)]
pub struct Retry {
    delay: Duration,
    at: Option<tokio::time::Instant>,
}

impl Retry {
    /// Records the outcome of a translation: `failed` = some hook ended at
    /// its deadline or unreachable.
    pub fn after(&mut self, failed: bool) {
        if failed {
            self.delay = if self.delay.is_zero() {
                RETRY_FIRST
            } else {
                (self.delay * 2).min(RETRY_MAX)
            };
            self.at = Some(tokio::time::Instant::now() + self.delay);
        } else {
            self.delay = Duration::ZERO;
            self.at = None;
        }
    }

    /// Completes when the next retry is due; never when none is.
    pub fn wait(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let at = self.at;
        async move {
            match at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_backs_off_while_failing_and_stops_on_success() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut r = Retry::default();
            assert!(r.at.is_none());
            r.after(true);
            assert_eq!(r.delay, RETRY_FIRST);
            r.after(true);
            assert_eq!(r.delay, RETRY_FIRST * 2);
            for _ in 0..10 {
                r.after(true);
            }
            assert_eq!(r.delay, RETRY_MAX);
            r.after(false);
            assert!(r.at.is_none());
            // No retry due: `wait` does not complete.
            let waited = tokio::time::timeout(Duration::from_millis(20), r.wait()).await;
            assert!(waited.is_err());
        });
    }
}
