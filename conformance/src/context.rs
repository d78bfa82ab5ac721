//! What a check works with: [`Ctx`] (the plugin, the scratch area, the
//! capabilities under test), [`Sys`] (one system the harness made), and the
//! small vocabulary checks use to say what went wrong ([`Problem`], [`Step`],
//! `fail!`, `ensure!`).

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tether::model::canonical;
use tether::plugin::{BackendError, HarnessClient, ObjectClient, PinRef, Plugin, Target};

/// Why a check did not pass: a one-line reason saying what was expected and
/// what happened.
#[derive(Debug)]
pub(crate) struct Problem(pub(crate) String);

/// What a check returns.
pub(crate) type Outcome = Result<(), Problem>;

/// Fail the check with a formatted reason.
macro_rules! fail {
    ($($arg:tt)*) => {
        return Err($crate::context::Problem(format!($($arg)*)))
    };
}

/// Fail the check with a formatted reason unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::context::fail!($($arg)*);
        }
    };
}

pub(crate) use {ensure, fail};

/// Turn a failed plugin call into a failed check naming the step.
pub(crate) trait Step<T> {
    fn step(self, what: &str) -> Result<T, Problem>;
}

impl<T> Step<T> for Result<T, BackendError> {
    fn step(self, what: &str) -> Result<T, Problem> {
        self.map_err(|e| Problem(format!("{what} failed: {}", describe_error(&e))))
    }
}

/// An error with its class, so a reason says `RefMovedError: ...` rather than
/// leaving the reader to guess which variant a message came from.
pub(crate) fn describe_error(e: &BackendError) -> String {
    match e {
        BackendError::Deadline { .. }
        | BackendError::MemoryLimit { .. }
        | BackendError::Crashed { .. }
        | BackendError::Runtime { .. } => e.to_string(),
        _ => format!("{} ({})", e, variant_name(e)),
    }
}

fn variant_name(e: &BackendError) -> &'static str {
    match e {
        BackendError::Backend(_) => "backend",
        BackendError::Capability(_) => "capability",
        BackendError::RefMoved(_) => "ref-moved",
        BackendError::MergeConflict(_) => "merge-conflict",
        BackendError::PinDrift(_) => "pin-drift",
        BackendError::ImmutableModified(_) => "immutable-modified",
        BackendError::NotFound(_) => "not-found",
        BackendError::Denied(_) => "denied",
        BackendError::Invalid(_) => "invalid",
        BackendError::Other(_) => "other",
        BackendError::Deadline { .. } => "deadline",
        BackendError::MemoryLimit { .. } => "memory-limit",
        BackendError::Crashed { .. } => "crashed",
        BackendError::Runtime { .. } => "runtime",
    }
}

/// Whether an error is the plugin's own refusal, as opposed to the host
/// stopping it or the operation being unsupported: only a refusal satisfies
/// "is refused".
fn is_refusal(e: &BackendError) -> bool {
    !e.is_contained_fault()
        && !matches!(
            e,
            BackendError::Runtime { .. } | BackendError::Capability(_)
        )
}

/// Expect `result` to be a refusal (any error the plugin returned, other than
/// "not supported"); `what` names the call in the reason.
pub(crate) fn expect_refused<T>(
    result: Result<T, BackendError>,
    what: &str,
) -> Result<BackendError, Problem> {
    match result {
        Ok(_) => fail!("{what} succeeded; expected it to be refused"),
        Err(e) if is_refusal(&e) => Ok(e),
        Err(e) => fail!(
            "{what} failed with {}; expected a refusal",
            describe_error(&e)
        ),
    }
}

/// Expect `result` to be `ref-moved` (RefMovedError).
pub(crate) fn expect_ref_moved<T>(result: Result<T, BackendError>, what: &str) -> Outcome {
    match result {
        Err(BackendError::RefMoved(_)) => Ok(()),
        Ok(_) => fail!("{what} succeeded; expected RefMovedError"),
        Err(e) => fail!(
            "{what} failed with {}; expected RefMovedError",
            describe_error(&e)
        ),
    }
}

/// The run-wide part of a context.
#[derive(Clone)]
pub(crate) struct Shared {
    pub(crate) plugin: Arc<Plugin>,
    /// Every check works under `<scratch_root>/<check name>/<n>`.
    pub(crate) scratch_root: String,
    /// The SQL scratch granted to the harness and its objects.
    pub(crate) sql_scratch: Option<String>,
    pub(crate) config: Value,
    pub(crate) dataset: String,
    /// The capabilities under test.
    pub(crate) capabilities: Vec<String>,
}

/// What one check works with.
#[derive(Clone)]
pub(crate) struct Ctx {
    shared: Arc<Shared>,
    check: &'static str,
    /// Numbers the systems this check makes, each under its own scratch URI:
    /// plugins are stateless, so a harness cannot count objects itself.
    next: Arc<AtomicUsize>,
}

impl Ctx {
    pub(crate) fn new(shared: Arc<Shared>, check: &'static str) -> Ctx {
        Ctx {
            shared,
            check,
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The plugin under test.
    pub(crate) fn plugin(&self) -> &Arc<Plugin> {
        &self.shared.plugin
    }

    pub(crate) fn has(&self, capability: &str) -> bool {
        self.shared.capabilities.iter().any(|c| c == capability)
    }

    pub(crate) fn dataset(&self) -> &str {
        &self.shared.dataset
    }

    fn harness(&self) -> Result<HarnessClient, Problem> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let uri = format!("{}/{}/{n}", self.shared.scratch_root, self.check);
        let harness = self
            .shared
            .plugin
            .harness(&uri, &self.shared.config)
            .step("opening the harness")?;
        Ok(match &self.shared.sql_scratch {
            Some(address) => harness.with_sql_scratch(address),
            None => harness,
        })
    }

    /// A fresh system with a `main` branch (`harness.new-object`).
    pub(crate) async fn new_object(&self) -> Result<Sys, Problem> {
        let harness = self.harness()?;
        let locator = harness.new_object().await.step("harness new-object")?;
        Ok(self.sys(harness, locator))
    }

    /// A locator where no store exists yet (`harness.fresh-locator`).
    pub(crate) async fn fresh_locator(&self) -> Result<Sys, Problem> {
        let harness = self.harness()?;
        let locator = harness
            .fresh_locator()
            .await
            .step("harness fresh-locator")?;
        Ok(self.sys(harness, locator))
    }

    fn sys(&self, harness: HarnessClient, locator: Value) -> Sys {
        let client = harness.object(&locator);
        Sys {
            ctx: self.clone(),
            harness,
            locator,
            client,
        }
    }

    /// `state` without the descriptor's volatile keys: what equality and pin
    /// ids are about.
    pub(crate) fn content(&self, state: &Value) -> Value {
        content_state(state, &self.shared.plugin.descriptor().volatile_keys)
    }

    /// Whether two states name the same content.
    pub(crate) fn same(&self, a: &Value, b: &Value) -> bool {
        self.content(a) == self.content(b)
    }

    /// The engine's pin id for a state of the object with `identity`.
    pub(crate) fn pin_id(&self, identity: &Value, state: &Value) -> String {
        pin_id(
            &self.shared.dataset,
            self.shared.plugin.kind(),
            identity,
            &self.content(state),
        )
    }
}

/// The engine's pin id (`tether_contract::ids::pin_id`, which the host uses).
pub(crate) fn pin_id(dataset: &str, kind: &str, identity: &Value, content_state: &Value) -> String {
    tether_contract::ids::pin_id(dataset, kind, identity, content_state)
}

/// `state` without `volatile_keys` and `null` members: the host's content
/// state (`tether_contract::state`).
pub(crate) fn content_state(state: &Value, volatile_keys: &[String]) -> Value {
    tether_contract::state::content_state(state, volatile_keys)
}

/// A state or locator for a reason: canonical JSON, shortened.
pub(crate) fn show(value: &Value) -> String {
    const MAX: usize = 120;
    let text = canonical::to_string(value);
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// One system the harness made, with a client for it (derefs to
/// [`ObjectClient`], so `sys.fingerprint(None)` is the plugin call).
pub(crate) struct Sys {
    ctx: Ctx,
    harness: HarnessClient,
    pub(crate) locator: Value,
    client: ObjectClient,
}

impl Deref for Sys {
    type Target = ObjectClient;
    fn deref(&self) -> &ObjectClient {
        &self.client
    }
}

impl Sys {
    /// The client, for moving into a spawned task.
    pub(crate) fn client(&self) -> ObjectClient {
        self.client.clone()
    }

    /// Write something new at `working_ref` (the base when none).
    pub(crate) async fn mutate(&self, working_ref: Option<&str>) -> Result<(), Problem> {
        let what = match working_ref {
            Some(r) => format!("harness mutate of {r}"),
            None => "harness mutate of the base".to_string(),
        };
        self.harness
            .mutate(&self.locator, working_ref)
            .await
            .step(&what)
    }

    /// The state at `working_ref` (the base when none).
    pub(crate) async fn state(&self, working_ref: Option<&str>) -> Result<Value, Problem> {
        let what = match working_ref {
            Some(r) => format!("fingerprint of {r}"),
            None => "fingerprint of the base".to_string(),
        };
        self.client.fingerprint(working_ref).await.step(&what)
    }

    /// A client for this object's locator with `at` set (a history entry id).
    pub(crate) fn at(&self, id: &str) -> Result<ObjectClient, Problem> {
        let mut locator = self.locator.clone();
        match locator.as_object_mut() {
            Some(map) => {
                map.insert("at".to_string(), Value::String(id.to_string()));
            }
            None => fail!(
                "the harness's locator {} is not a JSON object, so it cannot take `at`",
                show(&locator)
            ),
        }
        Ok(self.harness.object(&locator))
    }

    /// The engine's pin id for `state` of this object.
    pub(crate) async fn pin_id(&self, state: &Value) -> Result<String, Problem> {
        let identity = self.client.identity().await.step("identity")?;
        Ok(self.ctx.pin_id(&identity, state))
    }

    /// Pin `state` under the engine's pin id for it.
    pub(crate) async fn pin_state(&self, state: &Value) -> Result<PinRef, Problem> {
        let id = self.pin_id(state).await?;
        self.client.pin(state, &id).await.step(&format!("pin {id}"))
    }

    /// What the engine forks from: a pin of `state` where the object has
    /// `PIN`, the recorded state itself otherwise (`pin = "record"`).
    pub(crate) async fn source(&self, state: &Value) -> Result<(Target, Option<PinRef>), Problem> {
        if self.ctx.has(tether_contract::Capability::Pin.as_str()) {
            let pin = self.pin_state(state).await?;
            Ok((Target::Pinned(pin.clone()), Some(pin)))
        } else {
            Ok((Target::Recorded(state.clone()), None))
        }
    }

    /// Fork `name` from `state` (pinning it first where the object has
    /// `PIN`), expecting the branch to be absent; the working ref.
    pub(crate) async fn fork_from(
        &self,
        state: &Value,
        name: &str,
    ) -> Result<(String, Target), Problem> {
        let (source, _) = self.source(state).await?;
        let wr = self
            .client
            .fork(&source, name, &tether::plugin::Expected::Absent)
            .await
            .step(&format!("fork of {name} (expected absent)"))?;
        Ok((wr, source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sha2::{Digest, Sha256};

    #[test]
    fn pin_id_hashes_canonical_json_of_kind_identity_and_content() {
        let identity = json!({"uri": "memory://x", "b": 1});
        let state = json!({"head": "abc"});
        let id = pin_id("ds", "memory", &identity, &state);
        let expected = hex::encode(Sha256::digest(
            br#"["memory",{"b":1,"uri":"memory://x"},{"head":"abc"}]"#,
        ));
        assert_eq!(id, format!("ds.{}", &expected[..16]));
    }

    #[test]
    fn content_state_drops_volatile_keys_and_nulls() {
        let state = json!({"head": "abc", "lsn": 7});
        assert_eq!(
            content_state(&state, &["lsn".to_string()]),
            json!({"head": "abc"})
        );
        assert_eq!(content_state(&state, &[]), state);
        // A null member is an absent one, as the host reads states back.
        assert_eq!(
            content_state(&json!({"head": "abc", "x": null}), &[]),
            json!({"head": "abc"})
        );
    }

    #[test]
    fn show_shortens_long_values() {
        let long = json!({"k": "x".repeat(500)});
        assert!(show(&long).len() < 130);
        assert_eq!(show(&json!({"a": 1})), r#"{"a":1}"#);
    }
}
