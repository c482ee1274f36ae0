//! Fenced means fenced, over the golden fixtures: every replaced rule and
//! guard of every fixture is asked for through the real Envoy at its path
//! and at its normalization variants, and must answer the 500 (see
//! `support/fence.rs` for how requests are built and judged).

#[path = "support/fence.rs"]
mod fence;

#[path = "support/fixture_files.rs"]
mod fixture_files;
#[path = "support/fixture_settings.rs"]
mod fixture_settings;

use fence::{Tally, check_gateway, normalize, responder, variants};

#[test]
fn every_fenced_route_answers_500_at_every_path_variant() {
    let backend = responder();
    let dir = std::env::temp_dir().join(format!("portcullis-fenced-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut t = Tally::default();
    let mut fixtures_with_fences = 0;
    for fixture in fixture_files::all() {
        let input = fixture.input();
        let name = fixture.file_name();
        let loaded = api::loader::load_str(&name, input);
        let out = translate::translate(&loaded.inputs, &fixture_settings::settings_for(input));
        let before = t.asserted;
        for (key, gw) in &out.gateways {
            check_gateway(&name, key, gw, backend, &dir, &mut t);
        }
        if t.asserted > before {
            fixtures_with_fences += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "fenced: {} fenced routes in {fixtures_with_fences} fixtures asserted at their path and {} variants; skipped: {:?}",
        t.asserted, t.variants, t.skipped
    );
    assert!(
        t.failures.is_empty(),
        "{} requests escaped the fence:\n{}",
        t.failures.len(),
        t.failures.join("\n")
    );
    // The fixtures hold replaced rules and guards of several kinds; if the
    // model above stopped reaching them this test would prove nothing.
    assert!(
        t.asserted >= 10,
        "only {} fenced routes could be asserted",
        t.asserted
    );
}

#[test]
fn every_variant_normalizes_back_to_its_path() {
    for p in ["/admin", "/api/v1", "/api/", "/a", "/x/y/z"] {
        let vs = variants(p);
        assert!(vs.len() >= 5, "{p}: {vs:?}");
        for v in vs {
            assert_ne!(v, p);
            assert_eq!(normalize(&v), p, "variant {v} of {p}");
        }
    }
}
