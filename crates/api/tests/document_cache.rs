//! `load_str_cached`: a file loaded again decodes only the documents whose
//! text changed (`DocumentCache::decoded` counts the decodes), and every
//! load equals a full load of the same text (objects, lines, diagnostics).

use api::loader::{DocumentCache, Options, load_str_cached, load_str_with};

fn route(i: usize, path: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: r{i}\n  namespace: ns\nspec:\n  parentRefs:\n  - name: gw\n  rules:\n  - matches:\n    - path: {{type: PathPrefix, value: {path}}}\n    backendRefs:\n    - {{name: s{i}, port: 80}}\n"
    )
}

fn service(i: usize) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: s{i}\n  namespace: ns\nspec:\n  ports:\n  - port: 80\n"
    )
}

fn stream(documents: &[String]) -> String {
    documents.join("---\n")
}

/// Loads `text` through `cache` and checks it against a full load.
fn load(cache: &mut DocumentCache, file: &str, text: &str) -> (usize, usize) {
    let options = Options::default();
    let cached = load_str_cached(file, text, &options, cache);
    assert_eq!(
        cached,
        load_str_with(file, text, &options),
        "{file}: cached load differs:\n{text}"
    );
    (cache.decoded(), cache.reused())
}

#[test]
fn only_changed_documents_are_decoded_again() {
    let mut documents: Vec<String> = (0..10).flat_map(|i| [route(i, "/a"), service(i)]).collect();
    let mut cache = DocumentCache::default();
    let file = "routes.yaml";

    assert_eq!(load(&mut cache, file, &stream(&documents)), (20, 0), "first load");
    assert_eq!(cache.len(), 20);
    assert_eq!(load(&mut cache, file, &stream(&documents)), (0, 20), "same text");

    // One route's path edited: that document alone.
    documents[6] = route(3, "/edited");
    assert_eq!(load(&mut cache, file, &stream(&documents)), (1, 19), "one edit");

    // A document grows by a line: it is decoded, every later document
    // moves down a line and is re-stamped, not decoded.
    documents[0] = route(0, "/a").replace("spec:\n", "spec:\n  hostnames: [a.example.com]\n");
    assert_eq!(
        load(&mut cache, file, &stream(&documents)),
        (1, 19),
        "lines moved"
    );

    // A comment on top moves every document; it is part of the first
    // document's text, which alone is decoded.
    let commented = format!("# moved\n\n{}", stream(&documents));
    assert_eq!(load(&mut cache, file, &commented), (1, 19), "all moved");

    // A broken document is decoded on every load (its diagnostics are the
    // spanned path's); the others are not.
    documents
        .push("apiVersion: v1\nkind: Service\nmetadata:\n  name: Bad_Name\n  namespace: ns\n".to_string());
    documents.push(route(0, "/dup")); // a duplicate object: the first wins
    let text = stream(&documents);
    // Decoded: the first document (its comment gone again), the broken
    // one and the duplicate.
    assert_eq!(
        load(&mut cache, file, &text),
        (3, 19),
        "broken and duplicate added"
    );
    assert_eq!(load(&mut cache, file, &text), (1, 21), "broken decoded again");

    // Removed documents leave the cache.
    documents.truncate(4);
    assert_eq!(load(&mut cache, file, &stream(&documents)), (0, 4), "truncated");
    assert_eq!(cache.len(), 4);

    // Another file name: nothing is reused (sources name the file).
    assert_eq!(
        load(&mut cache, "other.yaml", &stream(&documents)),
        (4, 0),
        "renamed"
    );
}

#[test]
fn json_files_and_options_are_keyed() {
    let mut cache = DocumentCache::default();
    let json = r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}"#;
    assert_eq!(load(&mut cache, "ns.json", json), (1, 0));
    assert_eq!(load(&mut cache, "ns.json", json), (0, 1));
    let edited = json.replace("\"a\"", "\"b\"");
    assert_eq!(load(&mut cache, "ns.json", &edited), (1, 0));

    // Other options (an extension kind registered): decoded again.
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n";
    let plain = Options::default();
    let mut extended = Options::default();
    extended
        .extension_kinds
        .insert(("example.com".to_string(), "Widget".to_string()));
    let mut cache = DocumentCache::default();
    let first = load_str_cached("w.yaml", widget, &extended, &mut cache);
    assert_eq!(first.inputs.extension_resources.len(), 1);
    let second = load_str_cached("w.yaml", widget, &plain, &mut cache);
    assert_eq!(second, load_str_with("w.yaml", widget, &plain));
    assert_eq!(cache.decoded(), 1);
}

/// The cache and the loads share each object (one allocation, see
/// `api::Sourced`): a load of unchanged text hands out the very `Arc`s of
/// the load before; an edited document gets a new one and its neighbours,
/// moved down a line or not, keep theirs; the cache keeps no copy of its
/// own (an object lives exactly as long as a load or the cache points at
/// it) and lets go of what the last load no longer has.
#[test]
fn loads_share_each_object_with_the_cache() {
    use std::sync::{Arc, Weak};

    let mut documents: Vec<String> = (0..5).flat_map(|i| [route(i, "/a"), service(i)]).collect();
    let mut cache = DocumentCache::default();
    let options = Options::default();
    let file = "routes.yaml";
    let first = load_str_cached(file, &stream(&documents), &options, &mut cache);
    let again = load_str_cached(file, &stream(&documents), &options, &mut cache);
    assert_eq!(first.inputs.http_routes.len(), 5);
    for (a, b) in first.inputs.http_routes.iter().zip(&again.inputs.http_routes) {
        assert!(Arc::ptr_eq(&a.object, &b.object), "unchanged text, same object");
    }
    for (a, b) in first.inputs.services.iter().zip(&again.inputs.services) {
        assert!(Arc::ptr_eq(&a.object, &b.object), "unchanged text, same object");
    }

    // Route 1 edited and one line longer: routes 2.. move down a line.
    documents[2] = route(1, "/edited").replace("spec:\n", "spec:\n  hostnames: [a.example.com]\n");
    let edited = load_str_cached(file, &stream(&documents), &options, &mut cache);
    let (old, new) = (&first.inputs.http_routes, &edited.inputs.http_routes);
    assert!(
        !Arc::ptr_eq(&old[1].object, &new[1].object),
        "the edited route is new"
    );
    assert_ne!(old[1].object, new[1].object);
    for i in [0, 2, 3, 4] {
        assert!(
            Arc::ptr_eq(&old[i].object, &new[i].object),
            "route {i} kept its object"
        );
    }
    assert_eq!(
        new[2].source.line,
        old[2].source.line + 1,
        "re-stamped, not copied"
    );
    for (a, b) in first.inputs.services.iter().zip(&edited.inputs.services) {
        assert!(Arc::ptr_eq(&a.object, &b.object), "services kept their objects");
    }

    // No copy of its own: besides `edited`, the cache is the one holder.
    let replaced = Arc::downgrade(&old[1].object);
    drop((first, again));
    assert!(
        replaced.upgrade().is_none(),
        "the replaced route is gone from the cache"
    );
    let route0 = &edited.inputs.http_routes[0].object;
    assert_eq!(
        Arc::strong_count(route0),
        2,
        "held by this load and the cache only"
    );
    let kept: Vec<Weak<_>> = edited
        .inputs
        .http_routes
        .iter()
        .map(|r| Arc::downgrade(&r.object))
        .collect();
    drop(edited);
    assert!(
        kept.iter().all(|w| w.upgrade().is_some()),
        "the cache holds the same objects"
    );
    drop(cache);
    assert!(
        kept.iter().all(|w| w.upgrade().is_none()),
        "and nothing else does"
    );
}
