//! `portcullis get gateways|routes|policies|httpproxies` and `portcullis
//! describe gateway|route|policy|httpproxy NAME`: kubectl-style views, read from a running portcullis's admin API
//! or computed offline from manifests with `-f`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::ValueEnum;

use crate::views::{self, ConditionRow, Views};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Kind {
    #[value(alias = "gateway", alias = "gw")]
    Gateways,
    #[value(alias = "route", alias = "httproutes", alias = "httproute")]
    Routes,
    /// TrafficPolicies and GatewayExtensions.
    #[value(alias = "policy", alias = "trafficpolicies", alias = "trafficpolicy")]
    Policies,
    /// Contour HTTPProxies (`projectcontour.io/v1`).
    #[value(alias = "httpproxy", alias = "proxy", alias = "proxies")]
    Httpproxies,
}

#[derive(clap::Args)]
pub struct Source {
    /// Compute the view offline from manifests (file or directory).
    #[arg(short = 'f', long = "filename")]
    pub path: Option<PathBuf>,
    /// Admin API of a running `portcullis serve`.
    #[arg(long, default_value = "127.0.0.1:19000")]
    pub admin: String,
    /// File holding the admin API's bearer token (`serve
    /// --admin-token-file`), sent as `Authorization: Bearer`.
    #[arg(long, env = "PORTCULLIS_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// Offline (`-f`): the flags of `serve` that change a translation
    /// (`--config`, `--route-replacement-mode`, `--httpproxy-gateway`,
    /// `--root-namespaces`, `--refuse-loopback-endpoints`,
    /// `--controller-name`), read as `serve` reads them.
    #[command(flatten)]
    pub offline: super::offline::OfflineArgs,
}

#[derive(clap::Args)]
pub struct GetArgs {
    pub kind: Kind,
    /// Routes only: those asking for a default Gateway
    /// (`useDefaultGateways: All`), with the Gateways that claimed them.
    #[arg(long)]
    pub defaulted: bool,
    #[command(flatten)]
    pub source: Source,
}

#[derive(clap::Args)]
pub struct DescribeArgs {
    pub kind: Kind,
    /// NAME or NAMESPACE/NAME.
    pub name: String,
    #[command(flatten)]
    pub source: Source,
}

fn load(source: &Source) -> anyhow::Result<Views> {
    match &source.path {
        Some(p) => {
            let t = super::offline::translate(p, &source.offline)?;
            Ok(views::build(&t.inputs, &t.output))
        }
        None => {
            let token = match &source.admin_token_file {
                Some(p) => Some(
                    std::fs::read_to_string(p)
                        .with_context(|| format!("cannot read the admin token file {}", p.display()))?
                        .trim()
                        .to_string(),
                ),
                None => None,
            };
            let body = http_get(&source.admin, "/api/views", token.as_deref()).with_context(|| {
                format!(
                    "cannot reach the admin API at {} (is `portcullis serve` running? or use -f)",
                    source.admin
                )
            })?;
            Ok(serde_json::from_str(&body)?)
        }
    }
}

/// A minimal HTTP/1.0 GET for our own admin API.
fn http_get(addr: &str, path: &str, token: Option<&str>) -> anyhow::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    if head.starts_with("HTTP/1.1 401") || head.starts_with("HTTP/1.0 401") {
        bail!(
            "{addr} answered 401: its admin API needs a token (--admin-token-file or $PORTCULLIS_ADMIN_TOKEN_FILE){}",
            if token.is_some() {
                "; the one given was refused"
            } else {
                ""
            }
        );
    }
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("{} answered: {}", addr, head.lines().next().unwrap_or(""));
    }
    Ok(body.to_string())
}

fn table(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{:<w$}", c, w = widths[i]))
            .collect();
        out.push_str(s.join("   ").trim_end());
        out.push('\n');
    };
    line(headers.to_vec(), &mut out);
    for r in &rows {
        line(r.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

pub fn get(args: GetArgs) -> anyhow::Result<ExitCode> {
    let v = load(&args.source)?;
    if args.defaulted {
        if !matches!(args.kind, Kind::Routes) {
            bail!("--defaulted applies to routes");
        }
        print!("{}", defaulted_routes(&v));
        return Ok(ExitCode::SUCCESS);
    }
    let text = match args.kind {
        Kind::Gateways => table(
            &[
                "NAMESPACE",
                "NAME",
                "CLASS",
                "ADDRESS",
                "DEFAULT",
                "ACCEPTED",
                "PROGRAMMED",
                "ATTACHED ROUTES",
            ],
            v.gateways
                .iter()
                .map(|g| {
                    vec![
                        g.namespace.clone(),
                        g.name.clone(),
                        g.class.clone(),
                        g.address.clone(),
                        if g.default { "yes".into() } else { "-".into() },
                        g.accepted.clone(),
                        g.programmed.clone(),
                        g.attached_routes.to_string(),
                    ]
                })
                .collect(),
        ),
        Kind::Routes => table(
            &[
                "KIND",
                "NAMESPACE",
                "NAME",
                "HOSTNAMES",
                "PARENTS",
                "ACCEPTED",
                "RESOLVED REFS",
                "REPLACED RULES",
            ],
            v.routes
                .iter()
                .map(|r| {
                    let status_of = |t: &str| {
                        r.parents
                            .iter()
                            .map(|p| {
                                p.conditions
                                    .iter()
                                    .find(|c| c.type_ == t)
                                    .map(|c| c.status.clone())
                                    .unwrap_or("-".into())
                            })
                            .collect::<Vec<_>>()
                            .join(",")
                    };
                    let replaced = r
                        .diagnostics
                        .iter()
                        .filter(|d| d.contains("Replaced Rule"))
                        .count();
                    vec![
                        r.kind.clone(),
                        r.namespace.clone(),
                        r.name.clone(),
                        if r.hostnames.is_empty() {
                            "*".into()
                        } else {
                            r.hostnames.join(",")
                        },
                        r.parents
                            .iter()
                            .map(|p| p.gateway.clone())
                            .collect::<Vec<_>>()
                            .join(","),
                        status_of("Accepted"),
                        status_of("ResolvedRefs"),
                        replaced.to_string(),
                    ]
                })
                .collect(),
        ),
        Kind::Policies => table(
            &[
                "KIND",
                "NAMESPACE",
                "NAME",
                "TARGETS",
                "ANCESTORS",
                "ACCEPTED",
                "REASON",
            ],
            v.policies
                .iter()
                .map(|p| {
                    let list = |v: &[String]| {
                        if v.is_empty() {
                            "-".to_string()
                        } else {
                            v.join(",")
                        }
                    };
                    vec![
                        p.kind.clone(),
                        p.namespace.clone(),
                        p.name.clone(),
                        list(&p.targets),
                        list(&p.ancestors),
                        p.accepted.clone(),
                        p.reason.clone(),
                    ]
                })
                .collect(),
        ),
        Kind::Httpproxies => table(
            &[
                "NAMESPACE",
                "NAME",
                "FQDN",
                "ROLE",
                "STATUS",
                "STATUS DESCRIPTION",
            ],
            v.httpproxies
                .iter()
                .map(|p| {
                    vec![
                        p.namespace.clone(),
                        p.name.clone(),
                        p.fqdn.clone().unwrap_or_else(|| "-".into()),
                        p.role.clone(),
                        p.current_status.clone(),
                        p.description.clone(),
                    ]
                })
                .collect(),
        ),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn accepted(p: &views::ParentRow) -> Option<&ConditionRow> {
    p.conditions.iter().find(|c| c.type_ == "Accepted")
}

/// Routes asking for a default Gateway and which Gateways claimed them.
fn defaulted_routes(v: &Views) -> String {
    let gateways = |r: &views::RouteRow, ok: bool| {
        let list: Vec<String> = r
            .parents
            .iter()
            .filter(|p| p.by_default && accepted(p).is_some_and(|c| (c.status == "True") == ok))
            .map(|p| p.gateway.clone())
            .collect();
        if list.is_empty() {
            "-".into()
        } else {
            list.join(",")
        }
    };
    table(
        &["KIND", "NAMESPACE", "NAME", "CLAIMED BY", "REFUSED BY"],
        v.routes
            .iter()
            .filter(|r| r.use_default_gateways)
            .map(|r| {
                vec![
                    r.kind.clone(),
                    r.namespace.clone(),
                    r.name.clone(),
                    gateways(r, true),
                    gateways(r, false),
                ]
            })
            .collect(),
    )
}

/// For each default Gateway: did it claim the route, and if not, why.
fn default_gateway_lines(v: &Views, r: &views::RouteRow) -> String {
    let defaults: Vec<&views::GatewayRow> = v.gateways.iter().filter(|g| g.default).collect();
    let mut out = String::from("  Default Gateways:\n");
    if !r.use_default_gateways {
        out.push_str("    not requested (spec.useDefaultGateways is not All)\n");
        return out;
    }
    if defaults.is_empty() {
        out.push_str("    requested, but no Gateway has defaultScope All\n");
        return out;
    }
    for g in defaults {
        let key = format!("{}/{}", g.namespace, g.name);
        let line = match r.parents.iter().find(|p| p.gateway == key) {
            Some(p) if !p.by_default => {
                "referenced in spec.parentRefs (that entry is the route's one entry for it)".to_string()
            }
            Some(p) => match accepted(p) {
                Some(c) if c.status == "True" => format!("claimed: {}", c.message),
                Some(c) => format!("refused: {}: {}", c.reason, c.message),
                None => "claimed, no Accepted condition".to_string(),
            },
            None => "did not claim (its GatewayClass is not accepted)".to_string(),
        };
        out.push_str(&format!("    {key}: {line}\n"));
    }
    out
}

fn conditions(out: &mut String, indent: &str, conds: &[ConditionRow]) {
    for c in conds {
        out.push_str(&format!(
            "{indent}{:<18} {:<6} {:<28} {}\n",
            c.type_, c.status, c.reason, c.message
        ));
    }
}

fn matches_name(ns: &str, name: &str, wanted: &str) -> bool {
    match wanted.split_once('/') {
        Some((n, m)) => n == ns && m == name,
        None => name == wanted,
    }
}

pub fn describe(args: DescribeArgs) -> anyhow::Result<ExitCode> {
    let v = load(&args.source)?;
    let mut out = String::new();
    match args.kind {
        Kind::Policies => {
            let found: Vec<_> = v
                .policies
                .iter()
                .filter(|p| matches_name(&p.namespace, &p.name, &args.name))
                .collect();
            if found.is_empty() {
                bail!("no TrafficPolicy or GatewayExtension {}", args.name);
            }
            for p in found {
                out.push_str(&format!(
                    "{} {}/{}\n  Targets: {}\n  Ancestors: {}\n  Accepted: {} ({})\n  Problems:\n",
                    p.kind,
                    p.namespace,
                    p.name,
                    p.targets.join(", "),
                    p.ancestors.join(", "),
                    p.accepted,
                    p.reason
                ));
                if p.diagnostics.is_empty() {
                    out.push_str("    none\n");
                }
                for d in &p.diagnostics {
                    out.push_str(&format!("    {d}\n"));
                }
            }
        }
        Kind::Gateways => {
            let found: Vec<_> = v
                .gateways
                .iter()
                .filter(|g| matches_name(&g.namespace, &g.name, &args.name))
                .collect();
            if found.is_empty() {
                bail!("no Gateway {}", args.name);
            }
            for g in found {
                out.push_str(&format!(
                    "Gateway {}/{}\n  Class: {}\n  Address: {}\n  Conditions:\n",
                    g.namespace, g.name, g.class, g.address
                ));
                conditions(&mut out, "    ", &g.conditions);
                for l in &g.listeners {
                    out.push_str(&format!(
                        "  Listener {} (attached routes: {})\n",
                        l.name, l.attached_routes
                    ));
                    conditions(&mut out, "    ", &l.conditions);
                }
                if !g.replaced_scopes.is_empty() {
                    out.push_str("  Replaced scopes (answer HTTP 500):\n");
                    for r in &g.replaced_scopes {
                        out.push_str(&format!("    {r}\n"));
                    }
                }
            }
        }
        Kind::Routes => {
            let found: Vec<_> = v
                .routes
                .iter()
                .filter(|r| matches_name(&r.namespace, &r.name, &args.name))
                .collect();
            if found.is_empty() {
                bail!("no route {}", args.name);
            }
            for r in found {
                out.push_str(&format!(
                    "{} {}/{}\n  Hostnames: {}\n",
                    r.kind,
                    r.namespace,
                    r.name,
                    if r.hostnames.is_empty() {
                        "*".into()
                    } else {
                        r.hostnames.join(", ")
                    }
                ));
                for p in &r.parents {
                    out.push_str(&format!(
                        "  Parent Gateway {}{}{}\n",
                        p.gateway,
                        if p.by_default { " (default)" } else { "" },
                        p.section
                            .as_deref()
                            .map(|s| format!(" section {s}"))
                            .unwrap_or_default()
                    ));
                    conditions(&mut out, "    ", &p.conditions);
                }
                out.push_str(&default_gateway_lines(&v, r));
                if !r.policies.is_empty() {
                    out.push_str("  Policies in force:\n");
                    for l in &r.policies {
                        out.push_str(&format!("    {l}\n"));
                    }
                }
                if !r.replaced.is_empty() {
                    out.push_str("  Replaced rules (answer HTTP 500):\n");
                    for x in &r.replaced {
                        out.push_str(&format!(
                            "    Rule ({}) [{}] {} (on {})\n",
                            x.rule,
                            x.error_class,
                            x.message,
                            x.gateways.join(", ")
                        ));
                    }
                }
                if !r.diagnostics.is_empty() {
                    out.push_str("  Diagnostics (replaced rules and input problems):\n");
                    for d in &r.diagnostics {
                        out.push_str(&format!("    {d}\n"));
                    }
                }
            }
        }
        Kind::Httpproxies => {
            let found: Vec<_> = v
                .httpproxies
                .iter()
                .filter(|p| matches_name(&p.namespace, &p.name, &args.name))
                .collect();
            if found.is_empty() {
                bail!("no HTTPProxy {}", args.name);
            }
            for p in found {
                describe_proxy(&mut out, p);
            }
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// One HTTPProxy: where it sits in the include trees, its routes with
/// their merged conditions (duplicates with the route that won), and its
/// errors and warnings.
fn describe_proxy(out: &mut String, p: &translate::httpproxy::ProxyReport) {
    out.push_str(&format!(
        "HTTPProxy {}/{}\n  Role: {}\n  FQDN: {}\n  Status: {} ({})\n",
        p.namespace,
        p.name,
        p.role,
        p.fqdn.as_deref().unwrap_or("-"),
        p.current_status,
        p.description
    ));
    out.push_str("  Include paths:\n");
    if p.include_paths.is_empty() {
        out.push_str("    none (no served root reaches it)\n");
    }
    for path in &p.include_paths {
        out.push_str(&format!("    {path}\n"));
    }
    out.push_str("  Routes (merged conditions):\n");
    if p.routes.is_empty() {
        out.push_str("    none\n");
    }
    for r in &p.routes {
        let state = match (&r.duplicate_of, r.programmed) {
            (Some(w), _) => format!("DUPLICATE, not programmed; {w} wins"),
            (None, true) => "programmed".to_string(),
            (None, false) => "not programmed (a route with these conditions serves them)".to_string(),
        };
        out.push_str(&format!(
            "    [{}] {} -> {}: {state}\n",
            r.root, r.conditions, r.action
        ));
    }
    for (title, list) in [("Errors", &p.errors), ("Warnings", &p.warnings)] {
        out.push_str(&format!("  {title}:\n"));
        if list.is_empty() {
            out.push_str("    none\n");
        }
        for e in list {
            out.push_str(&format!("    {e}\n"));
        }
    }
}
