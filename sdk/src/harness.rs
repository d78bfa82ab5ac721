//! The [`Harness`] trait: the optional `harness` interface the conformance
//! suite drives. Export it with `tether_sdk::export!(MyBackend, harness: MyHarness)`.
//!
//! Every URI given is a scratch storage URI the host granted for the call,
//! together with everything under it.

use serde_json::Value;

use crate::error::Result;

/// Make fresh systems and write to them, for `tether-conformance`.
pub trait Harness: Default + 'static {
    /// Create an empty system with a `main` branch under `scratch_uri`; its locator.
    fn new_object(&self, scratch_uri: &str) -> Result<Value>;

    /// Write something new at `working_ref` (the base branch when none).
    fn mutate(&self, locator: &Value, working_ref: Option<&str>) -> Result<()>;

    /// A locator under `scratch_uri` where no store exists yet (CREATE).
    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value>;
}

/// Joins a scratch URI and a child name with exactly one `/`.
pub fn child_uri(base: &str, name: &str) -> String {
    format!("{}/{name}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn child_uri_joins_once() {
        assert_eq!(super::child_uri("memory://s/", "a"), "memory://s/a");
        assert_eq!(super::child_uri("/tmp/x", "a"), "/tmp/x/a");
    }
}
