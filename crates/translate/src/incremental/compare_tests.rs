//! The comparisons of a call's inputs with the last call's take the
//! pointer first: inputs are shared between snapshots (`api::Sourced`),
//! so an unchanged object is the same allocation and is never compared
//! field by field.

use std::sync::Arc;

use api::{Source, Sourced};

use super::{same_kind, same_route};

/// Never equal, not even to itself: only a pointer compare can find two
/// entries of it the same.
#[derive(Debug)]
struct Never;

impl PartialEq for Never {
    fn eq(&self, _: &Self) -> bool {
        false
    }
}

#[test]
fn an_unchanged_route_is_found_by_pointer() {
    let old = Sourced::new(Source::new("r.yaml", 1), Never);
    // Another snapshot of the same object, moved down a line by an edit
    // above it: still the same route.
    let new = Sourced {
        source: Source::new("r.yaml", 7),
        ..old.clone()
    };
    assert!(same_route(&old, &new));
    let copy = Sourced::new(Source::new("r.yaml", 1), Never);
    assert!(
        !same_route(&old, &copy),
        "another allocation is compared by value"
    );
    let mut unreadable = old.clone();
    unreadable.unreadable.push(api::Unreadable {
        rule: 0,
        path: Vec::new(),
        message: "x".into(),
    });
    assert!(!same_route(&old, &unreadable), "unreadable values still count");
}

#[test]
fn an_unchanged_context_kind_is_found_by_pointer() {
    let objects: Vec<Sourced<Never>> = (1..4)
        .map(|line| Sourced::new(Source::new("c.yaml", line), Never))
        .collect();
    assert!(same_kind(&objects, &objects.clone()));
    let mut moved = objects.clone();
    moved[2].source.line = 9;
    assert!(!same_kind(&objects, &moved), "a context kind's sources count");
    let mut replaced = objects.clone();
    replaced[1].object = Arc::new(Never);
    assert!(
        !same_kind(&objects, &replaced),
        "another allocation is compared by value"
    );
    assert!(!same_kind(&objects, &objects[..2]));
}
