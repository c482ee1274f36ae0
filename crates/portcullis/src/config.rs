//! The config file (`--config FILE`, YAML or JSON) and the settings that
//! can come from a flag, the environment or that file.
//!
//! ```yaml
//! routeReplacementMode: STRICT   # or STANDARD (the default)
//! refuseLoopbackEndpoints: true  # default false (file mode)
//! httpProxy:                     # Contour HTTPProxy (README "HTTPProxy")
//!   rootNamespaces: [platform]   # default: every namespace
//!   gatewayRef: {namespace: infra, name: edge}  # the Gateway serving them
//! adminTokenFile: /etc/portcullis/admin-token/token  # bearer token of the admin views
//! metricsAddress: 0.0.0.0:19001  # /metrics and health only, no token
//! xdsTls:                        # mTLS xDS (README "mTLS xDS"); flags win
//!   certFile: server.crt
//!   keyFile: server.key
//!   clientCaFile: ca.crt
//! ```
//!
//! Precedence: flag, then `PORTCULLIS_ROUTE_REPLACEMENT_MODE`, then the
//! file, then the default. Any other value is a startup error listing the
//! allowed ones. `refuseLoopbackEndpoints` (or the flag
//! `--refuse-loopback-endpoints`) refuses loopback endpoint addresses, as
//! the Kubernetes API server does (see `translate::endpoint_guard`).

use std::path::{Path, PathBuf};

use serde::Deserialize;
use translate::strict::{InvalidMode, ReplacementMode};

pub const MODE_ENV: &str = "PORTCULLIS_ROUTE_REPLACEMENT_MODE";

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    pub route_replacement_mode: Option<String>,
    pub refuse_loopback_endpoints: Option<bool>,
    /// Envoy Gateway's `extensionManager` (one extension server), as
    /// written; validated by `extension::ExtensionConfig::from_spec`.
    pub extension_manager: Option<extension::ExtensionManagerSpec>,
    /// Envoy Gateway's `extensionManagers` (chained in order); exclusive
    /// with `extensionManager`.
    pub extension_managers: Option<Vec<extension::ExtensionManagerSpec>>,
    pub http_proxy: Option<HttpProxyConfig>,
    /// `--admin-token-file` (see `serve::admin_auth`).
    pub admin_token_file: Option<PathBuf>,
    /// `--metrics-address`.
    pub metrics_address: Option<String>,
    pub xds_tls: Option<XdsTlsConfig>,
}

/// `xdsTls` of the config file (`--xds-tls-cert`, `--xds-tls-key`,
/// `--xds-tls-client-ca`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct XdsTlsConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub client_ca_file: PathBuf,
}

/// `httpProxy` of the config file (Contour's `gateway.gatewayRef` and
/// `rootNamespaces`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpProxyConfig {
    pub root_namespaces: Option<Vec<String>>,
    pub gateway_ref: Option<GatewayRef>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewayRef {
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{origin}: {source}")]
    Mode { origin: String, source: InvalidMode },
    #[error("{origin}: {value:?} is not NAMESPACE/NAME")]
    GatewayRef { origin: String, value: String },
    #[error("{origin}: {value:?} is not an address (IP:PORT): {source}")]
    Address {
        origin: String,
        value: String,
        source: std::net::AddrParseError,
    },
}

/// Where the admin API's token comes from and where metrics are served
/// besides the admin address (flags over the file).
#[derive(Debug, Default)]
pub struct AdminExposure {
    /// `(origin, path)`: `origin` names the flag or config key in errors.
    pub token_file: Option<(&'static str, PathBuf)>,
    pub metrics_address: Option<std::net::SocketAddr>,
}

pub fn load(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if text.trim().is_empty() {
        return Ok(ConfigFile::default());
    }
    serde_saphyr::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The mode from, in order, the flag, the environment, the file.
pub fn replacement_mode(
    flag: Option<&str>,
    env: Option<&str>,
    file: Option<(&Path, &ConfigFile)>,
) -> Result<ReplacementMode, ConfigError> {
    let (origin, value) = if let Some(v) = flag {
        ("--route-replacement-mode".to_string(), v)
    } else if let Some(v) = env {
        (MODE_ENV.to_string(), v)
    } else if let Some((path, v)) = file.and_then(|(p, f)| Some((p, f.route_replacement_mode.as_deref()?))) {
        (format!("{} routeReplacementMode", path.display()), v)
    } else {
        return Ok(ReplacementMode::default());
    };
    value
        .parse()
        .map_err(|source| ConfigError::Mode { origin, source })
}

/// Flags shared by `serve` and `translate`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ModeArgs {
    /// Config file (YAML/JSON) with `routeReplacementMode`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// STANDARD (default) or STRICT (also validate with the real Envoy).
    #[arg(long)]
    pub route_replacement_mode: Option<String>,
    /// Refuse loopback endpoint addresses in EndpointSlices (as Kubernetes
    /// does); file mode allows them by default.
    #[arg(long)]
    pub refuse_loopback_endpoints: bool,
    /// Namespaces root HTTPProxies may live in (comma-separated; default:
    /// all). Overrides `httpProxy.rootNamespaces`.
    #[arg(long, value_delimiter = ',')]
    pub root_namespaces: Vec<String>,
    /// The Gateway (NAMESPACE/NAME) whose listeners serve HTTPProxies.
    /// Overrides `httpProxy.gatewayRef`.
    #[arg(long = "httpproxy-gateway")]
    pub httpproxy_gateway: Option<String>,
}

impl ModeArgs {
    /// Reads `--config` once: every setting of a run comes from this one
    /// read, so a file rewritten while the process starts cannot give one
    /// setting from its old text and another from its new one.
    pub fn read(&self) -> Result<Config<'_>, ConfigError> {
        let file = self
            .config
            .as_deref()
            .map(|p| load(p).map(|f| (p, f)))
            .transpose()?;
        Ok(Config { args: self, file })
    }
}

/// The flags and the config file as read once by [`ModeArgs::read`]: each
/// setting is the flag, else the file. Nothing here reads the disk again.
#[derive(Debug)]
pub struct Config<'a> {
    args: &'a ModeArgs,
    file: Option<(&'a Path, ConfigFile)>,
}

impl Config<'_> {
    /// The config file and its path, if `--config` was given.
    pub fn file(&self) -> Option<(&Path, &ConfigFile)> {
        self.file.as_ref().map(|(p, f)| (*p, f))
    }

    /// Whether loopback endpoints are refused: the flag, else the file.
    pub fn refuse_loopback_endpoints(&self) -> bool {
        self.args.refuse_loopback_endpoints
            || self
                .file()
                .and_then(|(_, f)| f.refuse_loopback_endpoints)
                .unwrap_or(false)
    }

    /// HTTPProxy settings: each flag, else the file's `httpProxy`.
    pub fn http_proxy(&self) -> Result<translate::httpproxy::HttpProxySettings, ConfigError> {
        let file = self
            .file()
            .and_then(|(_, f)| f.http_proxy.clone())
            .unwrap_or_default();
        let root_namespaces = if self.args.root_namespaces.is_empty() {
            file.root_namespaces.unwrap_or_default()
        } else {
            self.args.root_namespaces.clone()
        };
        let gateway = match &self.args.httpproxy_gateway {
            Some(v) => match v.split_once('/') {
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                    Some((ns.to_string(), name.to_string()))
                }
                _ => {
                    return Err(ConfigError::GatewayRef {
                        origin: "--httpproxy-gateway".into(),
                        value: v.clone(),
                    });
                }
            },
            None => file.gateway_ref.map(|g| (g.namespace, g.name)),
        };
        Ok(translate::httpproxy::HttpProxySettings {
            root_namespaces: root_namespaces.into_iter().filter(|n| !n.is_empty()).collect(),
            gateway,
        })
    }

    /// The admin token file and metrics address: each flag, else the file.
    pub fn admin_exposure(
        &self,
        token_flag: Option<&Path>,
        metrics_flag: Option<std::net::SocketAddr>,
    ) -> Result<AdminExposure, ConfigError> {
        let (path, file) = match self.file() {
            Some((p, f)) => (p, Some(f)),
            None => (Path::new(""), None),
        };
        let token_file = match token_flag {
            Some(p) => Some(("--admin-token-file", p.to_path_buf())),
            None => file
                .and_then(|f| f.admin_token_file.clone())
                .map(|p| ("adminTokenFile", p)),
        };
        let metrics_address = match (metrics_flag, file.and_then(|f| f.metrics_address.as_ref())) {
            (Some(a), _) => Some(a),
            (None, Some(v)) => Some(v.parse().map_err(|source| ConfigError::Address {
                origin: format!("{} metricsAddress", path.display()),
                value: v.clone(),
                source,
            })?),
            (None, None) => None,
        };
        Ok(AdminExposure {
            token_file,
            metrics_address,
        })
    }

    /// The route replacement mode: the flag, the environment, the file.
    pub fn resolve(&self) -> Result<ReplacementMode, ConfigError> {
        let env = std::env::var(MODE_ENV).ok();
        replacement_mode(
            self.args.route_replacement_mode.as_deref(),
            env.as_deref(),
            self.file(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuse_loopback_endpoints_from_flag_or_file() {
        let dir = std::env::temp_dir().join(format!("portcullis-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let on = dir.join("on.yaml");
        std::fs::write(&on, "refuseLoopbackEndpoints: true\n").expect("write");
        let off = dir.join("off.yaml");
        std::fs::write(&off, "routeReplacementMode: STANDARD\n").expect("write");
        let args = |config: Option<&Path>, flag: bool| ModeArgs {
            config: config.map(Path::to_path_buf),
            route_replacement_mode: None,
            refuse_loopback_endpoints: flag,
            ..Default::default()
        };
        assert!(
            !args(None, false)
                .read()
                .expect("config read")
                .refuse_loopback_endpoints()
        );
        assert!(
            args(None, true)
                .read()
                .expect("config read")
                .refuse_loopback_endpoints()
        );
        assert!(
            args(Some(&on), false)
                .read()
                .expect("config read")
                .refuse_loopback_endpoints()
        );
        assert!(
            !args(Some(&off), false)
                .read()
                .expect("config read")
                .refuse_loopback_endpoints()
        );
        assert!(
            args(Some(&off), true)
                .read()
                .expect("config read")
                .refuse_loopback_endpoints()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Every setting comes from the one read: the file gone (or rewritten)
    /// after `read` changes none of them.
    #[test]
    fn every_setting_comes_from_one_read_of_the_file() {
        let dir = std::env::temp_dir().join(format!("portcullis-config-once-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let file = dir.join("c.yaml");
        std::fs::write(
            &file,
            "routeReplacementMode: STRICT\nrefuseLoopbackEndpoints: true\nmetricsAddress: 127.0.0.1:9\nhttpProxy: {rootNamespaces: [a]}\n",
        )
        .expect("write");
        let args = ModeArgs {
            config: Some(file.clone()),
            ..Default::default()
        };
        let config = args.read().expect("config read");
        std::fs::remove_file(&file).expect("remove");
        assert_eq!(config.resolve().ok(), Some(ReplacementMode::Strict));
        assert!(config.refuse_loopback_endpoints());
        assert_eq!(config.http_proxy().expect("settings").root_namespaces, vec!["a"]);
        assert_eq!(
            config
                .admin_exposure(None, None)
                .expect("exposure")
                .metrics_address,
            "127.0.0.1:9".parse().ok()
        );
        assert!(config.file().is_some());
        assert!(args.read().is_err(), "a second read finds the file gone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn extension_managers_in_envoy_gateways_shape() {
        let dir = std::env::temp_dir().join(format!("portcullis-config-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let one = dir.join("one.yaml");
        std::fs::write(
            &one,
            "extensionManager:\n  hooks: {xdsTranslator: {post: [Route]}}\n  service: {fqdn: {hostname: ext.local, port: 5005}}\n",
        )
        .expect("write");
        let f = load(&one).expect("extensionManager accepted");
        let c = extension::ExtensionConfig::from_spec(
            f.extension_manager.as_ref(),
            f.extension_managers.as_deref(),
        )
        .expect("valid");
        assert_eq!(c.managers[0].name, "ext.local:5005");
        let typo = dir.join("typo.yaml");
        std::fs::write(&typo, "extensionManager:\n  hook: {}\n").expect("write");
        assert!(
            load(&typo)
                .expect_err("unknown field")
                .to_string()
                .contains("unknown field")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn http_proxy_from_flags_or_file() {
        let dir = std::env::temp_dir().join(format!("portcullis-hp-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("c.yaml");
        std::fs::write(
            &file,
            "httpProxy:\n  rootNamespaces: [a, b]\n  gatewayRef: {namespace: infra, name: edge}\n",
        )
        .expect("write");
        let from_file = ModeArgs {
            config: Some(file.clone()),
            ..Default::default()
        };
        let s = from_file
            .read()
            .expect("config read")
            .http_proxy()
            .expect("settings");
        assert_eq!(s.root_namespaces, vec!["a", "b"]);
        assert_eq!(s.gateway, Some(("infra".into(), "edge".into())));
        let flags = ModeArgs {
            config: Some(file),
            root_namespaces: vec!["c".into()],
            httpproxy_gateway: Some("x/y".into()),
            ..Default::default()
        };
        let s = flags.read().expect("config read").http_proxy().expect("settings");
        assert_eq!(s.root_namespaces, vec!["c"]);
        assert_eq!(s.gateway, Some(("x".into(), "y".into())));
        let bad = ModeArgs {
            httpproxy_gateway: Some("nonamespace".into()),
            ..Default::default()
        };
        assert!(bad.read().expect("config read").http_proxy().is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn admin_exposure_from_flags_or_file() {
        let dir = std::env::temp_dir().join(format!("portcullis-admin-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("c.yaml");
        std::fs::write(&file, "adminTokenFile: /t\nmetricsAddress: 0.0.0.0:19001\n").expect("write");
        let args = ModeArgs {
            config: Some(file.clone()),
            ..Default::default()
        };
        let e = args
            .read()
            .expect("config read")
            .admin_exposure(None, None)
            .expect("from the file");
        assert_eq!(e.token_file, Some(("adminTokenFile", PathBuf::from("/t"))));
        assert_eq!(e.metrics_address, "0.0.0.0:19001".parse().ok());
        let e = args
            .read()
            .expect("config read")
            .admin_exposure(Some(Path::new("/f")), "127.0.0.1:9".parse().ok())
            .expect("flags win");
        assert_eq!(e.token_file, Some(("--admin-token-file", PathBuf::from("/f"))));
        assert_eq!(e.metrics_address, "127.0.0.1:9".parse().ok());
        std::fs::write(&file, "metricsAddress: nine\n").expect("write");
        let err = args
            .read()
            .expect("config read")
            .admin_exposure(None, None)
            .expect_err("not an address");
        assert!(err.to_string().contains("metricsAddress: \"nine\""), "{err}");
        let e = ModeArgs::default()
            .read()
            .expect("config read")
            .admin_exposure(None, None)
            .expect("default");
        assert!(e.token_file.is_none() && e.metrics_address.is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn precedence_and_errors() {
        let file = ConfigFile {
            route_replacement_mode: Some("STRICT".into()),
            ..Default::default()
        };
        let p = Path::new("portcullis.yaml");
        assert_eq!(
            replacement_mode(None, None, None).ok(),
            Some(ReplacementMode::Standard)
        );
        assert_eq!(
            replacement_mode(None, None, Some((p, &file))).ok(),
            Some(ReplacementMode::Strict)
        );
        assert_eq!(
            replacement_mode(None, Some("STANDARD"), Some((p, &file))).ok(),
            Some(ReplacementMode::Standard)
        );
        assert_eq!(
            replacement_mode(Some("STRICT"), Some("STANDARD"), None).ok(),
            Some(ReplacementMode::Strict)
        );
        let e = replacement_mode(None, Some("strict"), None).expect_err("lower case is not allowed");
        assert_eq!(
            e.to_string(),
            "PORTCULLIS_ROUTE_REPLACEMENT_MODE: invalid route replacement mode \"strict\": allowed values are STANDARD, STRICT"
        );
        let bad = ConfigFile {
            route_replacement_mode: Some("LENIENT".into()),
            ..Default::default()
        };
        let e = replacement_mode(None, None, Some((p, &bad))).expect_err("unknown value");
        assert!(
            e.to_string()
                .starts_with("portcullis.yaml routeReplacementMode: invalid"),
            "{e}"
        );
    }
}
