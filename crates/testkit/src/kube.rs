//! A real Kubernetes control plane for tests: `etcd` and `kube-apiserver`
//! (built from the Go modules pinned in `tools/kube/` by
//! `scripts/install-kube.sh` into `.tools/bin/`) started on free loopback
//! ports in a temporary directory, with a generated CA and serving
//! certificate and one static token in `system:masters`. No kubelet, no
//! controller-manager: objects exist only as API objects, which is all a
//! Gateway API controller reads (EndpointSlices are written by the test).
//!
//! [`Cluster::start`] returns `None` — after printing a `SKIPPED` line that
//! names the test and the reason — when the binaries are not installed;
//! with `PORTCULLIS_REQUIRE_KUBE` set (CI) a missing binary panics instead,
//! so a machine that cannot build them is never reported green.
//!
//! Both processes are killed when the [`Cluster`] is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PatchParams};

/// The static bearer token of the cluster's admin user.
pub const TOKEN: &str = "portcullis-test-admin-token";

/// Why a cluster could not be started (after its binaries were found).
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("generating certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    #[error("{what} did not become ready within {seconds} s; its log ends with:\n{log}")]
    NotReady {
        what: &'static str,
        seconds: u64,
        log: String,
    },
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("{file}: {message}")]
    Crd { file: String, message: String },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ClusterError {
    let what = what.into();
    move |source| ClusterError::Io { what, source }
}

/// Opt-ins of [`Cluster::start_with`].
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The apiserver writes an audit log ([`Cluster::audit_log`]): one JSON
    /// event per request and stage at `Metadata` level (who, verb,
    /// resource, the authorization decision), as RBAC tests need.
    pub audit: bool,
}

/// A running etcd + kube-apiserver.
pub struct Cluster {
    dir: PathBuf,
    etcd: Child,
    /// `None` while stopped ([`Cluster::stop_apiserver`]).
    apiserver: Option<Child>,
    bin: PathBuf,
    api_args: Vec<std::ffi::OsString>,
    /// `https://127.0.0.1:PORT`.
    pub server: String,
    /// A kubeconfig file for the admin user (for `--kubeconfig`).
    pub kubeconfig: PathBuf,
}

/// Where the binaries are: `PORTCULLIS_KUBE_BIN` (a directory), else the
/// workspace's `.tools/bin`.
pub fn bin_dir() -> PathBuf {
    std::env::var_os("PORTCULLIS_KUBE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::envoy::workspace_root().join(".tools/bin"))
}

/// Why the cluster cannot run on this machine (a binary is missing), or
/// `None` when it can.
pub fn missing() -> Option<String> {
    let dir = bin_dir();
    for bin in ["etcd", "kube-apiserver"] {
        if !dir.join(bin).is_file() {
            return Some(format!(
                "no {bin} in {}: run scripts/install-kube.sh (needs Go) or set PORTCULLIS_KUBE_BIN",
                dir.display()
            ));
        }
    }
    None
}

fn free_port() -> Result<u16, ClusterError> {
    Ok(crate::port::free())
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

impl Cluster {
    /// Starts a cluster for `test`, or prints why it is skipped and returns
    /// `None` (panics instead when `PORTCULLIS_REQUIRE_KUBE` is set, or
    /// when the binaries exist but the cluster does not come up).
    pub async fn start(test: &str) -> Option<Cluster> {
        Self::start_with(test, Options::default()).await
    }

    /// [`Cluster::start`] with opt-ins.
    pub async fn start_with(test: &str, options: Options) -> Option<Cluster> {
        if let Some(reason) = missing() {
            if std::env::var_os("PORTCULLIS_REQUIRE_KUBE").is_some_and(|v| !v.is_empty()) {
                panic!("{test}: PORTCULLIS_REQUIRE_KUBE is set but {reason}");
            }
            // Written to the process's stderr directly: libtest captures
            // `eprintln!` of passing tests, and a skip must be seen.
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
            return None;
        }
        match Self::try_start_with(options).await {
            Ok(c) => Some(c),
            Err(e) => panic!("{test}: cannot start the Kubernetes control plane: {e}"),
        }
    }

    /// Starts etcd and kube-apiserver and waits until the apiserver's
    /// `/readyz` answers `ok`.
    pub async fn try_start() -> Result<Cluster, ClusterError> {
        Self::try_start_with(Options::default()).await
    }

    /// [`Cluster::try_start`] with opt-ins.
    pub async fn try_start_with(options: Options) -> Result<Cluster, ClusterError> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let bin = bin_dir();
        let dir = std::env::temp_dir().join(format!(
            "portcullis-kube-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(io(format!("creating {}", dir.display())))?;

        // A CA and a serving certificate for 127.0.0.1 signed by it (a
        // self-signed leaf is not a valid trust anchor for rustls).
        let ca_key = rcgen::KeyPair::generate()?;
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "portcullis-test-ca");
        let ca = ca_params.self_signed(&ca_key)?;
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])?;
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
        let cert = params.signed_by(&key, &issuer)?;
        let sa_key = rcgen::KeyPair::generate()?;
        let write = |name: &str, text: &str| -> Result<PathBuf, ClusterError> {
            let p = dir.join(name);
            std::fs::write(&p, text).map_err(io(format!("writing {}", p.display())))?;
            Ok(p)
        };
        let ca_pem = ca.pem();
        write("ca.crt", &ca_pem)?;
        let cert_file = write("serving.crt", &cert.pem())?;
        let key_file = write("serving.key", &key.serialize_pem())?;
        let sa_file = write("sa.key", &sa_key.serialize_pem())?;
        let sa_public = write("sa.pub", &sa_key.public_key_pem())?;
        let tokens = write("tokens.csv", &format!("{TOKEN},admin,admin,system:masters\n"))?;

        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let api_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let log = |name: &str| -> Result<Stdio, ClusterError> {
            let p = dir.join(name);
            Ok(Stdio::from(
                std::fs::File::create(&p).map_err(io(format!("creating {}", p.display())))?,
            ))
        };
        let etcd = Command::new(bin.join("etcd"))
            .arg("--data-dir")
            .arg(dir.join("etcd"))
            .args([
                "--listen-client-urls",
                &etcd_url,
                "--advertise-client-urls",
                &etcd_url,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("default={peer_url}")])
            .args(["--log-level", "warn"])
            .stdout(log("etcd.log")?)
            .stderr(log("etcd.log")?)
            .spawn()
            .map_err(io("starting etcd"))?;
        let mut etcd = etcd;
        let to = |v: &str| std::ffi::OsString::from(v);
        let mut api_args: Vec<std::ffi::OsString> = vec![
            to("--etcd-servers"),
            to(&etcd_url),
            to("--secure-port"),
            to(&api_port.to_string()),
            to("--bind-address"),
            to("127.0.0.1"),
            to("--tls-cert-file"),
            cert_file.into(),
            to("--tls-private-key-file"),
            key_file.into(),
            to("--token-auth-file"),
            tokens.into(),
            to("--service-account-key-file"),
            sa_public.into(),
            to("--service-account-signing-key-file"),
            sa_file.into(),
            to("--service-account-issuer"),
            to("https://kubernetes.default.svc"),
            to("--authorization-mode"),
            to("RBAC"),
            to("--service-cluster-ip-range"),
            to("10.96.0.0/16"),
            to("--cert-dir"),
            dir.join("certs").into(),
        ];
        if options.audit {
            // Every request, once complete (a watch also when it starts).
            let policy = write(
                "audit-policy.yaml",
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
            )?;
            api_args.extend([
                to("--audit-policy-file"),
                policy.into(),
                to("--audit-log-path"),
                dir.join("audit.log").into(),
                // Written before the response: a test reads it right after.
                to("--audit-log-mode"),
                to("blocking"),
            ]);
        }
        let apiserver = spawn_apiserver(&bin, &api_args, &dir);
        let apiserver = match apiserver {
            Ok(a) => a,
            Err(e) => {
                let _ = etcd.kill();
                let _ = etcd.wait();
                return Err(io("starting kube-apiserver")(e));
            }
        };
        // From here on, dropping `cluster` stops both processes.
        let mut cluster = Cluster {
            etcd,
            apiserver: Some(apiserver),
            bin,
            api_args,
            server: format!("https://127.0.0.1:{api_port}"),
            kubeconfig: dir.join("kubeconfig"),
            dir: dir.clone(),
        };

        let b64 = |s: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode(s)
        };
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: admin\n  user:\n    token: {TOKEN}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: admin\ncurrent-context: test\n",
            cluster.server,
            b64(&ca_pem)
        );
        write("kubeconfig", &kubeconfig)?;

        cluster.wait_ready().await?;
        Ok(cluster)
    }

    /// Waits until `/readyz` answers `ok` (60 s at most).
    async fn wait_ready(&mut self) -> Result<(), ClusterError> {
        let client = self.client().await?;
        let started = Instant::now();
        let deadline = Duration::from_secs(60);
        loop {
            let ready = client
                .request_text(
                    http::Request::get("/readyz")
                        .body(Vec::new())
                        .map_err(|e| ClusterError::Kubeconfig(e.to_string()))?,
                )
                .await;
            if matches!(ready.as_deref(), Ok("ok")) {
                return Ok(());
            }
            let exited = self
                .apiserver
                .as_mut()
                .is_none_or(|a| a.try_wait().ok().flatten().is_some())
                || self.etcd.try_wait().ok().flatten().is_some();
            if exited || started.elapsed() > deadline {
                return Err(ClusterError::NotReady {
                    what: "kube-apiserver",
                    seconds: started.elapsed().as_secs(),
                    log: format!(
                        "{}\n--- etcd ---\n{}",
                        log_tail(&self.dir.join("apiserver.log")),
                        log_tail(&self.dir.join("etcd.log"))
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Kills the apiserver (an outage: etcd and every object stay).
    pub fn stop_apiserver(&mut self) {
        if let Some(mut a) = self.apiserver.take() {
            let _ = a.kill();
            let _ = a.wait();
        }
    }

    /// Starts the apiserver again (same port, same certificates) and waits
    /// until it is ready.
    pub async fn start_apiserver(&mut self) -> Result<(), ClusterError> {
        self.stop_apiserver();
        self.apiserver = Some(
            spawn_apiserver(&self.bin, &self.api_args, &self.dir).map_err(io("restarting kube-apiserver"))?,
        );
        self.wait_ready().await
    }

    /// A client for the admin user.
    pub async fn client(&self) -> Result<kube::Client, ClusterError> {
        let config = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| ClusterError::Kubeconfig(e.to_string()))?;
        let config =
            kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| ClusterError::Kubeconfig(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| ClusterError::Kubeconfig(e.to_string()))
    }

    /// Applies every CustomResourceDefinition of the YAML files (other
    /// kinds in them, such as upstream's upgrade-guard
    /// ValidatingAdmissionPolicy, are not applied) and waits until each is
    /// `Established`.
    pub async fn apply_crds(&self, files: &[PathBuf]) -> Result<(), ClusterError> {
        let client = self.client().await?;
        let api: Api<CustomResourceDefinition> = Api::all(client);
        let mut names = Vec::new();
        for file in files {
            let crd_error = |message: String| ClusterError::Crd {
                file: file.display().to_string(),
                message,
            };
            let text = std::fs::read_to_string(file).map_err(io(format!("reading {}", file.display())))?;
            let docs: Vec<serde_json::Value> =
                serde_saphyr::from_multiple(&text).map_err(|e| crd_error(e.to_string()))?;
            for doc in docs {
                if doc.get("kind").and_then(|k| k.as_str()) != Some("CustomResourceDefinition") {
                    continue;
                }
                let crd: CustomResourceDefinition =
                    serde_json::from_value(doc).map_err(|e| crd_error(e.to_string()))?;
                let name = crd.metadata.name.clone().unwrap_or_default();
                api.patch(
                    &name,
                    &PatchParams::apply("portcullis-test").force(),
                    &kube::api::Patch::Apply(&crd),
                )
                .await
                .map_err(|e| crd_error(format!("{name}: {e}")))?;
                names.push(name);
            }
        }
        let started = Instant::now();
        for name in names {
            loop {
                let crd = api.get(&name).await.map_err(|e| ClusterError::Crd {
                    file: name.clone(),
                    message: e.to_string(),
                })?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established {
                    break;
                }
                if started.elapsed() > Duration::from_secs(30) {
                    return Err(ClusterError::Crd {
                        file: name,
                        message: "not Established after 30 s".into(),
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// The repository's CRDs: Gateway API (experimental channel, a superset
    /// of standard) and the ones generated from the Rust types
    /// (`crds/portcullis/`: portcullis's own kinds and Contour's
    /// HTTPProxy/TLSCertificateDelegation).
    pub fn repo_crds() -> Vec<PathBuf> {
        let root = crate::envoy::workspace_root().join("crds");
        let mut files = vec![root.join("gateway-api/experimental-install.yaml")];
        let mut ours: Vec<PathBuf> = std::fs::read_dir(root.join("portcullis"))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        ours.sort();
        files.extend(ours);
        files
    }

    /// The audit log (JSON lines) of a cluster started with
    /// [`Options::audit`].
    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// Where the logs and certificates are (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

fn spawn_apiserver(bin: &Path, args: &[std::ffi::OsString], dir: &Path) -> std::io::Result<Child> {
    // Appended: a restart keeps the earlier log.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("apiserver.log"))?;
    Command::new(bin.join("kube-apiserver"))
        .args(args)
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .spawn()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_apiserver();
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
        if std::env::var_os("PORTCULLIS_KEEP_KUBE").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The host's own non-loopback IPv4 address: the apiserver refuses
/// loopback addresses in EndpointSlices, so test backends are reached
/// through it (see [`forward_from_host`]).
pub fn host_address() -> std::io::Result<std::net::Ipv4Addr> {
    // Connecting a UDP socket sends nothing; it only picks the source
    // address of the default route.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0")?;
    socket.connect("192.0.2.1:9")?;
    match socket.local_addr()?.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_loopback() && !ip.is_unspecified() => Ok(ip),
        other => Err(std::io::Error::other(format!(
            "no non-loopback IPv4 address on this host (got {other})"
        ))),
    }
}

/// Listens on the host's address (a free port) and forwards every
/// connection to `target` (a loopback test backend), so an EndpointSlice
/// can name it. The forwarder lives as long as the test process.
pub fn forward_from_host(target: std::net::SocketAddr) -> std::io::Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind((host_address()?, 0))?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for inbound in listener.incoming().flatten() {
            let Ok(outbound) = std::net::TcpStream::connect(target) else {
                continue;
            };
            let (Ok(mut in2), Ok(mut out2)) = (inbound.try_clone(), outbound.try_clone()) else {
                continue;
            };
            let (mut inbound, mut outbound) = (inbound, outbound);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut inbound, &mut outbound);
                let _ = outbound.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut out2, &mut in2);
                let _ = in2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    Ok(addr)
}
