//! The [`Harness`] trait: the optional `harness` interface the conformance
//! suite drives. Export it with `tether_sdk::export!(MyBackend, harness: MyHarness)`.
//!
//! Every URI given is a scratch storage URI the host granted for the call,
//! together with everything under it.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};

/// Make fresh systems and write to them, for `tether-conformance`.
pub trait Harness: Default + 'static {
    /// The locator type `mutate` receives (normally the backend's).
    type Locator: DeserializeOwned;

    /// Create an empty system with a `main` branch under `scratch_uri`; its locator.
    fn new_object(&self, scratch_uri: &str) -> Result<Value>;

    /// Write something new at `working_ref` (the base branch when none).
    fn mutate(&self, locator: &Self::Locator, working_ref: Option<&str>) -> Result<()>;

    /// A locator under `scratch_uri` where no store exists yet (CREATE).
    fn fresh_locator(&self, scratch_uri: &str) -> Result<Value>;
}

/// Joins a scratch URI and a child name with exactly one `/`.
pub fn child_uri(base: &str, name: &str) -> String {
    format!("{}/{name}", base.trim_end_matches('/'))
}

/// A fresh child of `scratch_uri` no concurrent run shares:
/// `<scratch_uri>/<prefix>-<16 random hex>`.
pub fn scratch_child(scratch_uri: &str, prefix: &str) -> Result<String> {
    Ok(child_uri(scratch_uri, &crate::kit::scratch_name(prefix)?))
}

/// The scratch URI as a local directory (`file://` folded, no trailing `/`),
/// for a backend (`kind`) that works only on local paths; a capability error
/// for anything else (an object store the suite was pointed at).
pub fn scratch_dir(scratch_uri: &str, kind: &str) -> Result<String> {
    let path = scratch_uri.strip_prefix("file://").unwrap_or(scratch_uri);
    let path = path.strip_prefix("localhost").unwrap_or(path);
    if !path.starts_with('/') {
        return Err(Error::Capability(format!(
            "the {kind} harness needs a local scratch directory, not {scratch_uri}"
        )));
    }
    let trimmed = path.trim_end_matches('/');
    Ok(if trimmed.is_empty() { "/" } else { trimmed }.to_owned())
}

/// A fresh local directory under the scratch URI ([`scratch_dir`] joined
/// with a [`crate::kit::scratch_name`]).
pub fn scratch_child_dir(scratch_uri: &str, kind: &str, prefix: &str) -> Result<String> {
    scratch_child(&scratch_dir(scratch_uri, kind)?, prefix)
}

#[cfg(test)]
mod tests {
    #[test]
    fn child_uri_joins_once() {
        assert_eq!(super::child_uri("memory://s/", "a"), "memory://s/a");
        assert_eq!(super::child_uri("/tmp/x", "a"), "/tmp/x/a");
    }

    #[test]
    fn scratch_dirs_are_local_paths() {
        assert_eq!(
            super::scratch_dir("file:///tmp/x/", "git").unwrap(),
            "/tmp/x"
        );
        assert_eq!(super::scratch_dir("/tmp/x", "git").unwrap(), "/tmp/x");
        let err = super::scratch_dir("memory://s", "git").unwrap_err();
        assert!(matches!(&err, crate::Error::Capability(m) if m.contains("git harness")));
    }
}
