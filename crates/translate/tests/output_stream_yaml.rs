//! `portcullis translate -o yaml` streams (`output::stream::write_output_yaml`):
//! byte for byte the whole document's YAML (`output::output_to_yaml`) on
//! every golden fixture and on a generated workload, and the memory it
//! holds while writing does not grow with the size of the text.
//!
//! The memory is measured with jemalloc's exact per-thread counters
//! (`thread.allocated` minus `thread.deallocated`, the rendering runs on
//! the test's thread), sampled by the writer every KiB written: what is
//! held while the text goes out, above what was held when writing
//! started. Tests of this file take one lock, so one rendering runs at a
//! time.

#[path = "support/fixture_files.rs"]
mod fixture_files;
#[path = "support/fixture_settings.rs"]
mod fixture_settings;

use std::io::{self, Write};

use std::sync::Mutex;

use translate::output::{self, stream};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes this thread has allocated and not freed (wrapping: frees of
/// memory other threads allocated count here too; only differences are
/// used).
fn held() -> u64 {
    let allocated = tikv_jemalloc_ctl::thread::allocatedp::read().expect("thread.allocatedp");
    let deallocated = tikv_jemalloc_ctl::thread::deallocatedp::read().expect("thread.deallocatedp");
    allocated.get().wrapping_sub(deallocated.get())
}

/// Counts what is written, keeps nothing, and samples the memory held
/// every KiB written.
struct Sink {
    written: usize,
    sampled_at: usize,
    base: u64,
    peak: u64,
}

impl Sink {
    fn new() -> Self {
        Self {
            written: 0,
            sampled_at: 0,
            base: held(),
            peak: 0,
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written += buf.len();
        if self.written - self.sampled_at >= 1024 {
            self.sampled_at = self.written;
            self.peak = self.peak.max(held().wrapping_sub(self.base));
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Loads and translates as `tests/fixtures.rs` does (with a fixture's
/// own settings), so that the golden's text can be compared too.
fn translated(name: &str, input: &str) -> translate::Output {
    let loaded = api::loader::load_str(name, input);
    let mut out = translate::translate(&loaded.inputs, &fixture_settings::settings_for(input));
    let mut d = loaded.diagnostics;
    d.append(&mut out.diagnostics);
    out.diagnostics = d;
    out
}

fn generated(routes: usize) -> translate::Output {
    let text = testkit::generate::manifests(testkit::generate::Shape::with_routes(routes));
    translated("generated.yaml", &text)
}

fn streamed(out: &translate::Output) -> String {
    let mut buf = Vec::new();
    stream::write_output_yaml(out, &mut buf).expect("written");
    String::from_utf8(buf).expect("UTF-8")
}

fn assert_same(name: &str, out: &translate::Output) {
    let whole = output::output_to_yaml(out);
    let streamed = streamed(out);
    if streamed != whole {
        let at = whole
            .bytes()
            .zip(streamed.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        panic!(
            "{name}: streamed YAML differs at byte {at} (lengths {} and {}):\nwhole:    {:?}\nstreamed: {:?}",
            whole.len(),
            streamed.len(),
            &whole[at.saturating_sub(120)..(at + 80).min(whole.len())],
            &streamed[at.saturating_sub(120)..(at + 80).min(streamed.len())]
        );
    }
}

#[test]
fn streamed_yaml_is_the_whole_documents_yaml_for_every_fixture() {
    let _one = lock();
    let files = fixture_files::all();
    assert!(files.len() > 20, "fixtures not found");
    for fixture in files {
        // Named as `tests/fixtures.rs` names them (diagnostics carry it).
        let name = format!("fixtures/{}", fixture.file_name());
        let out = translated(&name, fixture.input());
        assert_same(&name, &out);
        // The golden's own expected section is this YAML (checked here
        // too, so that the streamed text is the reviewed one).
        if let Some(expected) = fixture.expected() {
            assert_eq!(streamed(&out), expected, "{name}: not the golden's text");
        }
    }
}

#[test]
fn streamed_yaml_is_the_whole_documents_yaml_for_a_generated_workload() {
    let _one = lock();
    let out = generated(1_000);
    let routes: usize = out.gateways.values().map(|g| g.routes.len()).sum();
    assert!(routes >= 4, "the workload has route configurations");
    assert_same("1,000 generated routes", &out);
}

#[test]
fn streamed_yaml_keeps_awkward_strings_and_render_errors_as_the_whole_document() {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::route::v3::{Route, RouteConfiguration, VirtualHost};
    use envoy_types::pb::google::protobuf::Any;
    let _one = lock();
    let unknown = || Any {
        type_url: "type.googleapis.com/not.a.Known".into(),
        value: vec![],
    };
    let mut out = translate::Output::default();
    out.push_status(translate::ObjectStatus::new(
        "v1",
        "Thing",
        None,
        "true",
        serde_json::json!({
            "a": "10", "b": "null", "c": "yes", "d": "", "e": "- x", "f": "a: b", "g": "x".repeat(300),
            "h": format!("{} {}", "word ".repeat(40), "end"), "i": "two\nlines\n", "j": " lead", "k": "#c",
            "l": [], "m": {}, "n": [[1, 2], [[]], {"x": [{}]}], "o": 1.5, "p": -3, "q": null, "r": "'q'\"\\"
        }),
    ));
    // A cluster that cannot be rendered: `{"name", "@error"}` and a
    // diagnostic after the translator's own, as in the whole document.
    let cluster = Cluster {
        name: "odd".into(),
        typed_extension_protocol_options: [("x".to_string(), unknown())].into_iter().collect(),
        ..Default::default()
    };
    let rc = RouteConfiguration {
        name: "rc".into(),
        virtual_hosts: vec![
            VirtualHost {
                name: "vh".into(),
                domains: vec!["*".into(), "a.example".into()],
                routes: vec![Route {
                    name: "good".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
            VirtualHost {
                name: "empty".into(),
                ..Default::default()
            },
        ],
        validate_clusters: Some(envoy_types::pb::google::protobuf::BoolValue { value: false }),
        ..Default::default()
    };
    out.gateways.insert(
        "infra/gw".into(),
        std::sync::Arc::new(translate::GatewayXds {
            clusters: vec![cluster.into()],
            routes: vec![(&rc).into(), (&RouteConfiguration::default()).into()],
            ..Default::default()
        }),
    );
    out.diagnostics.push(api::Diagnostic::warning(
        Some("HTTPRoute default/r".into()),
        None,
        "look: here\n- x",
    ));
    assert_same("awkward", &out);
    let yaml = streamed(&out);
    assert!(yaml.contains("@error"), "{yaml}");
    assert!(yaml.contains(r#"Cluster \"odd\" cannot be rendered"#), "{yaml}");
}

#[test]
fn memory_held_while_streaming_yaml_does_not_grow_with_the_output() {
    let _one = lock();
    let small = generated(200);
    let large = generated(1_600);
    // Warm what is allocated once per process (the descriptor pool).
    stream::write_output_yaml(&small, &mut Sink::new()).expect("written");
    let measure = |out: &translate::Output| {
        let mut sink = Sink::new();
        stream::write_output_yaml(out, &mut sink).expect("written");
        (sink.peak as usize, sink.written)
    };
    let (small_peak, small_len) = measure(&small);
    let (large_peak, large_len) = measure(&large);
    eprintln!("streamed YAML: {small_len} bytes held {small_peak}; {large_len} bytes held {large_peak}");
    assert!(
        large_len > 6 * small_len,
        "the large output is several times the small one: {small_len} and {large_len} bytes"
    );
    // Flat: the large output's peak is the small one's, within one
    // resource's worth, and a small fraction of its text.
    assert!(
        large_peak <= small_peak + 64 * 1024 && large_peak < large_len / 16,
        "peak memory while writing {small_len} bytes: {small_peak}; {large_len} bytes: {large_peak}"
    );
}

/// The same for `-o json` (`write_output_json`), whose route
/// configurations are walked on their bytes too (it held every virtual
/// host's rendered head at once before).
#[test]
fn memory_held_while_streaming_json_does_not_grow_with_the_output() {
    let _one = lock();
    let small = generated(200);
    let large = generated(1_600);
    stream::write_output_json(&small, &mut Sink::new()).expect("written");
    let measure = |out: &translate::Output| {
        let mut sink = Sink::new();
        stream::write_output_json(out, &mut sink).expect("written");
        (sink.peak as usize, sink.written)
    };
    let (small_peak, small_len) = measure(&small);
    let (large_peak, large_len) = measure(&large);
    eprintln!("streamed JSON: {small_len} bytes held {small_peak}; {large_len} bytes held {large_peak}");
    assert!(large_len > 6 * small_len, "{small_len} and {large_len} bytes");
    assert!(
        large_peak <= small_peak + 64 * 1024 && large_peak < large_len / 16,
        "peak memory while writing {small_len} bytes: {small_peak}; {large_len} bytes: {large_peak}"
    );
}
