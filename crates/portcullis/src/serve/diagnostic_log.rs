//! Which diagnostics a translation logs: those that were not there after
//! the previous one (and a count of those that went away).
//!
//! Every translation returns every diagnostic of its inputs. Logging them
//! all on every edit repeated each standing problem once per translation:
//! a 10-minute soak at 10,000 routes wrote ~200,000 identical warnings for
//! a few dozen invalid policies, burying the one an edit just introduced.
//! What stands is in the admin API and the CLI (`get`/`describe`), in
//! status, and counted by `portcullis_input_errors`; the log says what
//! changed. A diagnostic is its whole value (severity, object, `file:line`,
//! message): one that moves to another line is logged again at its new
//! place.

use std::collections::HashSet;

use api::Diagnostic;

/// The diagnostics of the last translation, to tell which are new.
#[derive(Debug, Default)]
pub struct DiagnosticLog {
    last: HashSet<Diagnostic>,
}

impl DiagnosticLog {
    /// This translation's diagnostics that the last one did not have (in
    /// their order, each once), and how many of the last one's are gone.
    pub fn changes<'d>(&mut self, now: &'d [Diagnostic]) -> (Vec<&'d Diagnostic>, usize) {
        let mut next: HashSet<Diagnostic> = HashSet::with_capacity(now.len());
        let mut new = Vec::new();
        for d in now {
            if next.contains(d) {
                continue;
            }
            if !self.last.contains(d) {
                new.push(d);
            }
            next.insert(d.clone());
        }
        let resolved = self.last.iter().filter(|d| !next.contains(*d)).count();
        self.last = next;
        (new, resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(object: &str, message: &str) -> Diagnostic {
        Diagnostic {
            severity: api::Severity::Error,
            object: Some(object.into()),
            file: Some("routes.yaml:3".into()),
            message: message.into(),
        }
    }

    #[test]
    fn a_standing_diagnostic_is_logged_once_and_its_end_counted() {
        let mut log = DiagnosticLog::default();
        let a = error("TrafficPolicy app/a", "spec.cors: unknown field");
        let b = error("HTTPRoute app/b", "spec.rules[0]: invalid");
        let first = [a.clone(), b.clone(), a.clone()];
        let (new, resolved) = log.changes(&first);
        assert_eq!(new, [&a, &b], "each new one once, in order");
        assert_eq!(resolved, 0);

        // The same problems again: nothing to log.
        let (new, resolved) = log.changes(&first);
        assert!(new.is_empty(), "{new:?}");
        assert_eq!(resolved, 0);

        // `b` fixed, `a` moved to another line, `c` new.
        let mut moved = a.clone();
        moved.file = Some("routes.yaml:9".into());
        let c = error("HTTPRoute app/c", "spec.hostnames[0]: invalid");
        let second = [moved.clone(), c.clone()];
        let (new, resolved) = log.changes(&second);
        assert_eq!(new, [&moved, &c]);
        assert_eq!(resolved, 2, "`b` and `a` at its old line");

        let (new, resolved) = log.changes(&[]);
        assert!(new.is_empty());
        assert_eq!(resolved, 2);
    }
}
