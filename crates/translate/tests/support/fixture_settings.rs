//! Settings a fixture asks for in comment lines of its input, for what
//! `translate::Settings::default()` leaves off:
//!
//! ```yaml
//! # settings.httpProxy.gatewayRef: infra/edge
//! # settings.httpProxy.rootNamespaces: platform,team
//! ```

pub fn settings_for(input: &str) -> translate::Settings {
    let mut settings = translate::Settings::default();
    for line in input.lines() {
        let Some(rest) = line.strip_prefix("# settings.") else {
            continue;
        };
        let Some((key, value)) = rest.split_once(':') else {
            panic!("fixture settings line without a value: {line}");
        };
        let value = value.trim();
        match key.trim() {
            "httpProxy.gatewayRef" => {
                let (ns, name) = value
                    .split_once('/')
                    .unwrap_or_else(|| panic!("gatewayRef must be NS/NAME: {line}"));
                settings.http_proxy.gateway = Some((ns.to_string(), name.to_string()));
            }
            "httpProxy.rootNamespaces" => {
                settings.http_proxy.root_namespaces =
                    value.split(',').map(|s| s.trim().to_string()).collect();
            }
            other => panic!("unknown fixture setting {other:?}"),
        }
    }
    settings
}
