//! What a panic inside an incremental call becomes: that call is made again
//! as a full translation from no memo, and its output carries a warning
//! saying so (ARCHITECTURE.md §7, "Recovery").
//!
//! The incremental path's soundness rests on its invalidation rules (the
//! module doc of [`super`]); a flaw in one of them could leave a memo that
//! does not fit this call's inputs (a reused binding naming a listener
//! that is gone, say) and index out of range. The property test looks for
//! such flaws; this is the backstop for one it missed: the control plane
//! keeps translating and serving correct output, and the failure is
//! reported (the diagnostic, [`super::Full::Recovered`] in the stats, and
//! `serve`'s `portcullis_incremental_recoveries` counter) instead of
//! taking the process down. A panic in a full translation is not caught
//! here: there is no simpler path to fall back to.

use std::any::Any;

/// The warning a recovered call's output carries.
pub(super) fn diagnostic(payload: &(dyn Any + Send)) -> api::Diagnostic {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    api::Diagnostic::warning(
        None,
        None,
        format!(
            "internal error in the incremental translator ({what}); this translation was made in full \
             from no memo, so its output is complete and correct. Please report it"
        ),
    )
}

#[cfg(test)]
thread_local! {
    /// Tests: the next incremental call on this thread panics where the
    /// pipeline starts using its memo.
    static PANIC_NEXT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Tests: make the next incremental call on this thread panic.
#[cfg(test)]
pub(crate) fn panic_next_incremental_call() {
    PANIC_NEXT.with(|p| p.set(true));
}

/// Called where an incremental call starts using its memo; panics once
/// after [`panic_next_incremental_call`] (tests only; nothing in a build).
#[inline]
pub(crate) fn fault_point() {
    #[cfg(test)]
    if PANIC_NEXT.with(|p| p.replace(false)) {
        panic!("injected by recovery::panic_next_incremental_call");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use testkit::generate::{Shape, manifests, set_first_path};

    use crate::incremental::{Full, Translator};
    use crate::{Seams, Settings};

    #[test]
    fn a_panicking_incremental_call_is_made_again_in_full_and_says_so() {
        let mut inputs = api::loader::load_str("scale.yaml", &manifests(Shape::with_routes(40))).inputs;
        let settings = Settings {
            parallelism: Some(1),
            ..Default::default()
        };
        let mut translator = Translator::new();
        translator.translate(Arc::new(inputs.clone()), &settings, Seams::default());
        assert_eq!(translator.stats().full, Some(Full::First));

        set_first_path(&mut inputs, 3, "/edited");
        super::panic_next_incremental_call();
        let recovered = translator.translate(Arc::new(inputs.clone()), &settings, Seams::default());
        assert_eq!(translator.stats().full, Some(Full::Recovered));
        let full = crate::translate(&inputs, &settings);
        // The same output as a full translation, plus the warning.
        let (warning, rest) = recovered.diagnostics.split_last().expect("a diagnostic");
        assert_eq!(rest, full.diagnostics.as_slice());
        assert_eq!(warning.severity, api::Severity::Warning);
        assert!(
            warning
                .message
                .contains("injected by recovery::panic_next_incremental_call"),
            "{}",
            warning.message
        );
        assert!(recovered.gateways == full.gateways && recovered.status == full.status);

        // The recovered call left a memo of its own: the next edit is
        // incremental again, and correct.
        set_first_path(&mut inputs, 5, "/edited-again");
        let next = translator.translate(Arc::new(inputs.clone()), &settings, Seams::default());
        let stats = translator.stats();
        assert_eq!((stats.full, stats.routes_built), (None, 1), "{stats:?}");
        assert!(next == crate::translate(&inputs, &settings));
    }
}
