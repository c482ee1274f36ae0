//! Who may read the admin API when it leaves loopback (README, "Admin API
//! exposure").
//!
//! The admin API has two kinds of routes:
//! - **health** (`/healthz`, `/readyz`): always open (kubelet probes carry
//!   no credentials);
//! - **views** (`/metrics`, `/api/status`, `/api/config_dump`,
//!   `/api/views`): names of every tenant's objects, their status and the
//!   (redacted) xDS. With a token configured (`--admin-token-file` or
//!   `adminTokenFile`), they answer `401` unless the request carries
//!   `Authorization: Bearer <token>`; the token is compared in constant
//!   time.
//!
//! `--metrics-address` (or `metricsAddress`) opens a second listener that
//! serves only `/metrics` and health, without a token: what Prometheus
//! scrapes can be exposed without exposing the views.
//!
//! A non-loopback (or unspecified, `0.0.0.0`) admin address without a
//! token is a startup error: the default stays loopback and open, and
//! exposing the views is never an accident.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// A token shorter than this is refused: it would be guessable.
pub const MIN_TOKEN_LEN: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum AdminAuthError {
    #[error("{origin}: cannot read the admin token file {path}: {source}")]
    Read {
        origin: &'static str,
        path: PathBuf,
        // In the message, not a `#[source]`: anyhow's chain would print
        // it twice.
        source: std::io::Error,
    },
    #[error(
        "{origin}: the admin token in {path} is {len} bytes; at least {MIN_TOKEN_LEN} are required (leading and trailing whitespace is ignored)"
    )]
    TooShort {
        origin: &'static str,
        path: PathBuf,
        len: usize,
    },
    #[error(
        "--admin-address {address} is not a loopback address: the admin API serves every tenant's status and configuration, so it needs a token there (--admin-token-file or adminTokenFile); use --metrics-address to expose only /metrics and health"
    )]
    ExposedWithoutToken { address: SocketAddr },
}

/// The bearer token the views require.
pub struct AdminToken {
    token: Vec<u8>,
}

impl AdminToken {
    /// Reads the token from `path` (`origin` names the flag or config key
    /// in errors). Surrounding whitespace (a trailing newline) is ignored.
    pub fn from_file(origin: &'static str, path: &Path) -> Result<AdminToken, AdminAuthError> {
        let text = std::fs::read(path).map_err(|source| AdminAuthError::Read {
            origin,
            path: path.to_path_buf(),
            source,
        })?;
        let token = text.trim_ascii().to_vec();
        if token.len() < MIN_TOKEN_LEN {
            return Err(AdminAuthError::TooShort {
                origin,
                path: path.to_path_buf(),
                len: token.len(),
            });
        }
        Ok(AdminToken { token })
    }

    /// Whether `header` (an `Authorization` value) carries the token.
    pub fn accepts(&self, header: Option<&[u8]>) -> bool {
        let Some(presented) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        // Constant time in the presented token's content: a timing
        // difference reveals neither a prefix nor a byte of the token.
        use subtle::ConstantTimeEq as _;
        bool::from(presented.trim_ascii().ct_eq(&self.token))
    }
}

/// Refuses an exposed admin address without a token (see the module doc).
pub fn check_exposure(address: SocketAddr, token: Option<&AdminToken>) -> Result<(), AdminAuthError> {
    if token.is_none() && !address.ip().is_loopback() {
        return Err(AdminAuthError::ExposedWithoutToken { address });
    }
    Ok(())
}

/// The middleware of the views: `401` without the token.
pub async fn require_token(State(token): State<Arc<AdminToken>>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(axum::http::HeaderValue::as_bytes);
    if token.accepts(presented) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "unauthorized: this admin API needs `Authorization: Bearer <token>` (portcullis get/describe: --admin-token-file)\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> Result<AdminToken, AdminAuthError> {
        let dir = std::env::temp_dir().join(format!("portcullis-admin-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join(format!("t{}", text.len()));
        std::fs::write(&path, text).expect("write");
        AdminToken::from_file("--admin-token-file", &path)
    }

    #[test]
    fn accepts_only_the_exact_bearer_token() {
        let t = token("0123456789abcdef-secret\n").expect("token");
        assert!(t.accepts(Some(b"Bearer 0123456789abcdef-secret")));
        assert!(!t.accepts(None));
        assert!(!t.accepts(Some(b"0123456789abcdef-secret")));
        assert!(!t.accepts(Some(b"Basic 0123456789abcdef-secret")));
        assert!(!t.accepts(Some(b"Bearer 0123456789abcdef-secreT")));
        assert!(!t.accepts(Some(b"Bearer 0123456789abcdef-secret-and-more")));
        assert!(!t.accepts(Some(b"Bearer 0123456789abcdef")));
        assert!(!t.accepts(Some(b"Bearer ")));
    }

    #[test]
    fn short_or_missing_tokens_are_refused() {
        assert!(matches!(
            token("short\n"),
            Err(AdminAuthError::TooShort { len: 5, .. })
        ));
        assert!(matches!(
            AdminToken::from_file("adminTokenFile", Path::new("/nonexistent/token")),
            Err(AdminAuthError::Read { .. })
        ));
    }

    #[test]
    fn exposure_needs_a_token() {
        let loopback: SocketAddr = "127.0.0.1:19000".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:19000".parse().expect("addr");
        let v6: SocketAddr = "[::]:19000".parse().expect("addr");
        assert!(check_exposure(loopback, None).is_ok());
        assert!(check_exposure(any, None).is_err());
        assert!(check_exposure(v6, None).is_err());
        let t = token("0123456789abcdef0123").expect("token");
        assert!(check_exposure(any, Some(&t)).is_ok());
    }
}
