//! The checks, one module per capability (spec/13, "Conformance suite").
//!
//! Every check is an `async fn(Ctx) -> Outcome` that makes its own systems, so
//! checks share nothing and can run in any order, concurrently.

use futures::future::BoxFuture;

use crate::context::{Ctx, Outcome};

mod addressable;
mod always;
mod conditional_ref;
mod create;
mod diff;
mod fork;
mod history;
mod merge;
mod pin;
mod promote;
mod quiescence;

/// One check.
pub(crate) struct Check {
    /// `capability.what-it-checks`, lowercase.
    pub(crate) name: &'static str,
    /// The capability (spec spelling) whose contract it checks.
    pub(crate) capability: &'static str,
    pub(crate) run: fn(Ctx) -> BoxFuture<'static, Outcome>,
}

/// The checks of one capability, run when the plugin's objects have it.
pub(crate) struct Group {
    pub(crate) capability: &'static str,
    pub(crate) checks: Vec<Check>,
}

/// `check!("fork.fresh-equals-pin", fresh_equals_pin)`: a [`Check`] of the
/// enclosing module's `CAPABILITY` running the async fn.
macro_rules! check {
    ($name:literal, $f:path) => {
        $crate::checks::Check {
            name: $name,
            capability: CAPABILITY,
            run: |ctx| ::std::boxed::Box::pin($f(ctx)),
        }
    };
}
pub(crate) use check;

/// Every group, in report order. `FINGERPRINT` holds the checks every plugin
/// gets (every backend must declare it).
pub(crate) fn groups() -> Vec<Group> {
    vec![
        always::group(),
        diff::group(),
        history::group(),
        addressable::group(),
        pin::group(),
        fork::group(),
        conditional_ref::group(),
        promote::group(),
        merge::group(),
        create::group(),
        quiescence::group(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prefixed_by_their_capability() {
        let mut seen = std::collections::HashSet::new();
        for group in groups() {
            assert!(tether::plugin::KNOWN_CAPABILITIES.contains(&group.capability));
            assert!(!group.checks.is_empty());
            for check in &group.checks {
                assert_eq!(check.capability, group.capability);
                let prefix = format!("{}.", group.capability.to_ascii_lowercase());
                assert!(
                    check.name.starts_with(&prefix),
                    "{} should start with {prefix}",
                    check.name
                );
                assert!(seen.insert(check.name), "duplicate check {}", check.name);
            }
        }
    }
}
