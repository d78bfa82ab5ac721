//! Plans: store-writing work as data that can be previewed, saved and applied.
//!
//! Ten commands plan before they write (spec 09, "Plans"). A [`Plan`] holds the
//! [`Action`]s the command would perform, the typed [`Precondition`]s it saw,
//! the `context` apply needs (the selected `keys`, the bookmark, ...), notes for
//! the reader, the tether version that made it, and a `digest` binding all of it.
//!
//! - `--dry-run` prints [`Plan::render`] (or `--json`: [`Plan::to_value`]);
//! - `--plan FILE` is [`Plan::save`]; `--from-plan FILE` is [`Plan::load`],
//!   which refuses another tether version's plan and an edited one;
//! - apply runs [`Plan::check_all`] against the engine's
//!   [`PreconditionChecker`] before its first action, so a stale plan does
//!   nothing at all.
//!
//! The wire shape is the spec's (09, "JSON output", row `plan`):
//! `{"format": 3, "tether_version", "command", "created_at", "context": {...},
//! "notes": [str], "preconditions": [{"kind", "expected", "key", "params",
//! "detail"}], "actions": [{"op", "key", "kind", "target", "detail", "params"}],
//! "digest"}`, where `digest` is the SHA-256 (64 hex) of the canonical JSON of
//! everything else.

mod error;
mod precondition;

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::model::{canonical, fsutil};

pub use error::{PlanError, StalePlanError};
pub(crate) use precondition::same as same_json;
pub use precondition::{
    Failed, PRECONDITION_KINDS, Precondition, PreconditionChecker, Store, kind,
};

/// The plan file format this tether reads and writes.
pub const PLAN_FORMAT: u64 = 3;

/// The version a plan records, and the only one whose plans this binary applies.
pub const TETHER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Action verbs (the `op` of an action), by command (spec 09, "Plans"). The set
/// is open: an action's verb is a string, and these are the ones tether writes.
pub mod verb {
    // commit, pull
    pub const PIN: &str = "pin";
    pub const RECORD: &str = "record";
    /// `commit`: an Observed object's state, recorded unrecoverably.
    pub const UNRECOVERABLE: &str = "unrecoverable";
    /// `commit`: an object whose state equals its manifest's; nothing to do.
    pub const UNCHANGED: &str = "unchanged";
    pub const VCS_COMMIT: &str = "vcs-commit";
    // new, restore, promote
    pub const FORK: &str = "fork";
    pub const DEFER_FORK: &str = "defer-fork";
    pub const REUSE: &str = "reuse";
    pub const ADOPT: &str = "adopt";
    pub const SHARE: &str = "share";
    pub const TRUNK: &str = "trunk";
    pub const REFUSE: &str = "refuse";
    pub const FAST_FORWARD: &str = "fast-forward";
    pub const MERGE: &str = "merge";
    pub const HOLD: &str = "hold";
    // gc
    pub const UNPIN: &str = "unpin";
    pub const KEEP_PIN: &str = "keep-pin";
    pub const DELETE_BRANCH: &str = "delete-branch";
    pub const KEEP_BRANCH: &str = "keep-branch";
    pub const FORGET_WORKING_REF: &str = "forget-working-ref";
    pub const DELETE_LISTING: &str = "delete-listing";
    pub const DELETE_STORE: &str = "delete-store";
    pub const KEEP_STORE: &str = "keep-store";
    pub const FORGET_STORE: &str = "forget-store";
    pub const FORGET_TOUCHED: &str = "forget-touched";
    // drop
    pub const LEAVE_BOOKMARK: &str = "leave-bookmark";
    pub const ABANDON_COMMIT: &str = "abandon-commit";
    pub const DELETE_BOOKMARK: &str = "delete-bookmark";
    // forget-workspace
    pub const DELETE_FILE: &str = "delete-file";
    pub const FORGET_VCS_WORKSPACE: &str = "forget-vcs-workspace";
    // import, publish
    pub const ADD: &str = "add";
    pub const UPDATE: &str = "update";
    pub const REMOVE: &str = "remove";
    pub const UPSERT: &str = "upsert";
    // repair
    pub const REPIN: &str = "repin";
    pub const REFORK: &str = "refork";
    // upgrade
    pub const RENAME_PIN: &str = "rename-pin";
    pub const RENAME_BRANCH: &str = "rename-branch";
    pub const REWRITE_HISTORY: &str = "rewrite-history";
    pub const REWRITE_MANIFEST: &str = "rewrite-manifest";
    pub const REFINGERPRINT: &str = "refingerprint";
    pub const RENAME_MANIFEST: &str = "rename-manifest";
    pub const REWRITE_LOCATOR: &str = "rewrite-locator";
    pub const REWRITE_INDEX: &str = "rewrite-index";
    pub const COPY_LISTING: &str = "copy-listing";
    pub const REWRITE_STATE: &str = "rewrite-state";

    /// Verbs that write nothing: a plan holding only these is empty.
    pub const NON_WRITING: &[&str] = &[
        UNCHANGED,
        TRUNK,
        DEFER_FORK,
        REUSE,
        ADOPT,
        SHARE,
        HOLD,
        REFUSE,
        KEEP_BRANCH,
        KEEP_PIN,
        KEEP_STORE,
    ];
}

/// One step of a plan. `verb` is the spec's `op`; `target` is what it writes
/// (a ref name, a file, a commit); `detail` is the human half of its line;
/// `params` holds what apply needs that the other fields do not say (a state,
/// an expected head, a locator).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Action {
    #[serde(rename = "op")]
    pub verb: String,
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub target: String,
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub params: Map<String, Value>,
}

impl Action {
    pub fn new(verb: impl Into<String>, key: impl Into<String>) -> Self {
        Action {
            verb: verb.into(),
            key: key.into(),
            ..Action::default()
        }
    }

    /// The backend kind of the object (`icechunk`, `git`, ...).
    pub fn with_kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = kind.into();
        self
    }

    pub fn with_target(mut self, target: impl Into<String>) -> Self {
        self.target = target.into();
        self
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    pub fn with_param(mut self, name: impl Into<String>, value: Value) -> Self {
        self.params.insert(name.into(), value);
        self
    }

    /// Whether this action writes to a store, the VCS or the working tree.
    pub fn writes(&self) -> bool {
        !verb::NON_WRITING.contains(&self.verb.as_str())
    }

    /// The action's line: `verb key [kind] target detail`, empty parts left out.
    pub fn render(&self) -> String {
        let mut parts: Vec<String> = vec![self.verb.clone()];
        if !self.key.is_empty() {
            parts.push(self.key.clone());
        }
        if !self.kind.is_empty() {
            parts.push(format!("[{}]", self.kind));
        }
        if !self.target.is_empty() {
            parts.push(self.target.clone());
        }
        if !self.detail.is_empty() {
            parts.push(self.detail.clone());
        }
        parts.join(" ")
    }
}

/// The preconditions each command's plan must carry (spec 07, "What a plan
/// checks before it applies"). A plan lacking one is refused as stale.
pub fn required_preconditions(command: &str) -> &'static [&'static str] {
    use kind::*;
    match command {
        "commit" => &[WORKSPACE_ID, WORKSPACE_BOOKMARK, MANIFEST_HASH],
        "new" => &[WORKSPACE_ID, MANIFEST_HASH],
        "restore" => &[WORKSPACE_ID, WORKSPACE_BOOKMARK, MANIFEST_HASH],
        "promote" => &[
            WORKSPACE_ID,
            WORKSPACE_BOOKMARK,
            BOOKMARK_HEAD,
            MANIFEST_HASH,
        ],
        "drop" => &[
            WORKSPACE_ID,
            WORKSPACE_BOOKMARK,
            BOOKMARK_HEAD,
            NO_NEW_HOLDERS,
            VCS_HEAD,
            HISTORY_DIGEST,
        ],
        "gc" | "repair" => &[WORKSPACE_ID, HISTORY_DIGEST],
        "import" => &[MANIFEST_HASH],
        "upgrade" => &[DATASET_VERSION],
        _ => &[],
    }
}

/// Per-action requirements: for `command`'s action `verb`, each inner list is
/// one requirement satisfied by any of its kinds, for the action's key.
fn required_for_action(command: &str, verb: &str) -> &'static [&'static [&'static str]] {
    use kind::*;
    match (command, verb) {
        ("new" | "restore", verb::FORK) => &[&[REF_HEAD, REF_ABSENT]],
        ("new", verb::REUSE) => &[&[REF_HEAD]],
        ("new", verb::ADOPT) => &[&[REF_PRESENT]],
        ("promote", verb::FAST_FORWARD | verb::MERGE) => &[&[BASE_STATE], &[REF_HEAD, PIN_STATE]],
        _ => &[],
    }
}

/// What a store-writing command would do, and what it saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub command: String,
    pub actions: Vec<Action>,
    pub preconditions: Vec<Precondition>,
    /// What apply needs besides the actions: `keys` (the selection), the
    /// bookmark, a message. A JSON object, covered by the digest.
    pub context: Map<String, Value>,
    pub notes: Vec<String>,
    /// When the plan was made (UTC, ISO 8601).
    pub created_at: String,
    pub tether_version: String,
}

impl Plan {
    /// An empty plan for `command`, made now by this tether.
    pub fn new(command: impl Into<String>) -> Self {
        Plan {
            command: command.into(),
            actions: Vec::new(),
            preconditions: Vec::new(),
            context: Map::new(),
            notes: Vec::new(),
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tether_version: TETHER_VERSION.to_string(),
        }
    }

    pub fn push(&mut self, action: Action) {
        self.actions.push(action);
    }

    /// Record something that must still hold at apply.
    pub fn require(&mut self, precondition: Precondition) {
        if !self.preconditions.contains(&precondition) {
            self.preconditions.push(precondition);
        }
    }

    /// [`require`](Plan::require) for a precondition the caller knows the
    /// plan does not hold yet (one per object of a loop over distinct
    /// objects): no search through the others, which made a plan of 10,000
    /// objects quadratic.
    pub fn require_new(&mut self, precondition: Precondition) {
        debug_assert!(!self.preconditions.contains(&precondition));
        self.preconditions.push(precondition);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    /// The actions that write (everything but `keep-*`, `refuse`, `share`, ...).
    pub fn writes(&self) -> impl Iterator<Item = &Action> {
        self.actions.iter().filter(|a| a.writes())
    }

    /// Whether applying this plan would write nothing.
    pub fn is_empty(&self) -> bool {
        self.writes().next().is_none()
    }

    /// The selection the plan was made for (`context.keys`); `None` when it
    /// covers every object.
    pub fn keys(&self) -> Option<Vec<String>> {
        let keys = self.context.get("keys")?.as_array()?;
        Some(
            keys.iter()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect(),
        )
    }

    /// Record the selection (`context.keys`), sorted and deduplicated.
    pub fn set_keys<S: AsRef<str>>(&mut self, keys: &[S]) {
        let set: BTreeSet<&str> = keys.iter().map(|k| k.as_ref()).collect();
        self.context.insert("keys".into(), json!(set));
    }

    /// `KEY...` given with `--from-plan` must be the plan's own selection
    /// (spec 09, "Selecting objects"); giving none accepts the plan's.
    pub fn check_selection<S: AsRef<str>>(&self, given: &[S]) -> Result<(), PlanError> {
        if given.is_empty() {
            return Ok(());
        }
        let given: BTreeSet<&str> = given.iter().map(|k| k.as_ref()).collect();
        let planned = self.keys().unwrap_or_default();
        let planned_set: BTreeSet<&str> = planned.iter().map(String::as_str).collect();
        if given == planned_set {
            return Ok(());
        }
        let show = |s: &BTreeSet<&str>| {
            if s.is_empty() {
                "every object".to_string()
            } else {
                s.iter().copied().collect::<Vec<_>>().join(" ")
            }
        };
        Err(PlanError::SelectionMismatch {
            planned: show(&planned_set),
            given: show(&given),
        })
    }

    /// What this plan lacks of its command's required preconditions, as
    /// `kind` or `kind for key` entries (one of `a` or `b` reads `a or b`).
    pub fn missing_preconditions(&self) -> Vec<String> {
        let kinds: BTreeSet<&str> = self.preconditions.iter().map(|p| p.kind()).collect();
        let mut missing: Vec<String> = required_preconditions(&self.command)
            .iter()
            .filter(|k| !kinds.contains(*k))
            .map(|k| k.to_string())
            .collect();
        for action in &self.actions {
            for any_of in required_for_action(&self.command, &action.verb) {
                let met = self
                    .preconditions
                    .iter()
                    .any(|p| any_of.contains(&p.kind()) && p.key() == Some(action.key.as_str()));
                if !met {
                    let entry = format!("{} for {}", any_of.join(" or "), action.key);
                    if !missing.contains(&entry) {
                        missing.push(entry);
                    }
                }
            }
        }
        missing
    }

    /// Check every precondition against the world before the first action.
    /// Refuses a plan lacking a required kind, then asks `checker` about every
    /// precondition (not only up to the first mismatch) so the refusal names
    /// all that moved. Nothing is applied here; on `Ok` the caller applies.
    pub fn check_all(&self, checker: &mut dyn PreconditionChecker) -> Result<(), PlanError> {
        let missing = self.missing_preconditions();
        if !missing.is_empty() {
            return Err(PlanError::MissingPreconditions {
                command: self.command.clone(),
                missing,
            });
        }
        self.check_listed(checker)
    }

    /// [`Plan::check_all`] without requiring any kind: only the preconditions
    /// the plan lists. For a plan that finishes an interrupted operation,
    /// where one the command requires (a bookmark's head) no longer exists.
    pub fn check_listed(&self, checker: &mut dyn PreconditionChecker) -> Result<(), PlanError> {
        let failed: Vec<Failed> = self
            .preconditions
            .iter()
            .filter_map(|p| p.check(checker))
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(PlanError::Stale(StalePlanError {
                command: self.command.clone(),
                failed,
            }))
        }
    }

    /// Everything but the digest, in the wire shape.
    fn body(&self) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("format".into(), json!(PLAN_FORMAT));
        body.insert("tether_version".into(), json!(self.tether_version));
        body.insert("command".into(), json!(self.command));
        body.insert("created_at".into(), json!(self.created_at));
        body.insert("context".into(), Value::Object(self.context.clone()));
        body.insert("notes".into(), json!(self.notes));
        body.insert(
            "preconditions".into(),
            Value::Array(
                self.preconditions
                    .iter()
                    .map(Precondition::to_value)
                    .collect(),
            ),
        );
        body.insert(
            "actions".into(),
            Value::Array(
                self.actions
                    .iter()
                    .map(|a| serde_json::to_value(a).unwrap_or(Value::Null))
                    .collect(),
            ),
        );
        body
    }

    /// SHA-256 (64 hex) of the canonical JSON of everything but the digest:
    /// version, command, context, notes, preconditions and actions. It detects
    /// edits; it does not authenticate (whoever can write the file can
    /// recompute it).
    pub fn digest(&self) -> String {
        digest_of(&self.body())
    }

    /// The wire form, digest included: what `--json` prints for a dry run and
    /// what `--plan FILE` writes.
    pub fn to_value(&self) -> Value {
        let mut body = self.body();
        let digest = digest_of(&body);
        body.insert("digest".into(), Value::String(digest));
        Value::Object(body)
    }

    /// The wire form as indented JSON, for a file someone reviews.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(&self.to_value()).unwrap_or_default()
    }

    /// Read a saved plan: refuses another tether version's (or one recording
    /// none), another format, and one whose content no longer matches its
    /// digest, in that order.
    pub fn from_value(value: &Value) -> Result<Self, PlanError> {
        let invalid = |why: String| PlanError::Invalid {
            what: "this JSON".into(),
            why,
        };
        let obj = value
            .as_object()
            .ok_or_else(|| invalid("it is not a JSON object".into()))?;
        match obj.get("tether_version").and_then(Value::as_str) {
            None => {
                return Err(PlanError::NoVersion {
                    this: TETHER_VERSION.into(),
                });
            }
            Some(v) if v != TETHER_VERSION => {
                return Err(PlanError::OtherVersion {
                    made_by: v.into(),
                    this: TETHER_VERSION.into(),
                });
            }
            Some(_) => {}
        }
        match obj.get("format") {
            Some(f) if f.as_u64() == Some(PLAN_FORMAT) => {}
            other => {
                return Err(PlanError::Format {
                    found: other.map(|f| f.to_string()).unwrap_or("(none)".into()),
                });
            }
        }
        let mut body = obj.clone();
        let saved = match body.remove("digest") {
            Some(Value::String(d)) => d,
            _ => return Err(invalid("it records no digest".into())),
        };
        let actual = digest_of(&body);
        if saved != actual {
            return Err(PlanError::Edited { saved, actual });
        }

        let string = |name: &str| -> Result<String, PlanError> {
            obj.get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| invalid(format!("`{name}` is missing or not a string")))
        };
        let list = |name: &str| -> Result<&Vec<Value>, PlanError> {
            obj.get(name)
                .and_then(Value::as_array)
                .ok_or_else(|| invalid(format!("`{name}` is missing or not a list")))
        };
        let notes = list("notes")?
            .iter()
            .map(|n| {
                n.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid("a note is not a string".into()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let preconditions = list("preconditions")?
            .iter()
            .map(|p| Precondition::from_value(p).map_err(invalid))
            .collect::<Result<Vec<_>, _>>()?;
        let actions = list("actions")?
            .iter()
            .map(|a| {
                serde_json::from_value::<Action>(a.clone())
                    .map_err(|e| invalid(format!("an action does not read: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let context = match obj.get("context") {
            Some(Value::Object(m)) => m.clone(),
            _ => return Err(invalid("`context` is missing or not an object".into())),
        };
        Ok(Plan {
            command: string("command")?,
            actions,
            preconditions,
            context,
            notes,
            created_at: string("created_at")?,
            tether_version: string("tether_version")?,
        })
    }

    /// [`Plan::from_value`] from JSON text.
    pub fn from_json(text: &str) -> Result<Self, PlanError> {
        let value: Value = serde_json::from_str(text).map_err(|e| PlanError::Invalid {
            what: "this text".into(),
            why: format!("it is not JSON ({e})"),
        })?;
        Self::from_value(&value)
    }

    /// Write the plan to `path` (`--plan FILE`), atomically: a reader never
    /// sees half a plan, and a failed write leaves any earlier file intact.
    pub fn save(&self, path: &Path) -> Result<(), PlanError> {
        let io = |source: std::io::Error| PlanError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut text = self.to_json_pretty();
        text.push('\n');
        fsutil::replace_file(path, fsutil::TEMP_PREFIX, text.as_bytes()).map_err(io)
    }

    /// Read a plan `--from-plan FILE` names (see [`Plan::from_value`]).
    pub fn load(path: &Path) -> Result<Self, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json(&text).map_err(|e| match e {
            PlanError::Invalid { why, .. } => PlanError::Invalid {
                what: path.display().to_string(),
                why,
            },
            other => other,
        })
    }

    /// Read and check the plan `tether COMMAND --from-plan FILE` names: the
    /// one place a saved plan is vetted before it is applied. Its tether
    /// version, format and digest are checked by [`Plan::load`]; here, that it
    /// was made for `command`, and that `keys` (the `KEY...` given with it, if
    /// any) are its own selection.
    pub fn load_for<S: AsRef<str>>(
        path: &Path,
        command: &str,
        keys: &[S],
    ) -> Result<Self, PlanError> {
        let plan = Self::load(path)?;
        if plan.command != command {
            return Err(PlanError::OtherCommand {
                path: path.to_path_buf(),
                made_for: plan.command,
                command: command.into(),
            });
        }
        plan.check_selection(keys)?;
        Ok(plan)
    }

    /// The dry-run text: a header, one line per action (`verb key [kind]
    /// target detail`), then the notes. Returned, never printed.
    pub fn render(&self) -> String {
        let writes = self.writes().count();
        let mut out = format!("plan: {} ({writes} write(s))\n", self.command);
        for action in &self.actions {
            out.push_str("  ");
            out.push_str(&action.render());
            out.push('\n');
        }
        for note in &self.notes {
            out.push_str("  ");
            out.push_str(note);
            out.push('\n');
        }
        out
    }

    /// [`Plan::render`], then what the plan binds to: one line per
    /// precondition (`kind: description`).
    pub fn render_full(&self) -> String {
        let mut out = self.render();
        if !self.preconditions.is_empty() {
            out.push_str("preconditions:\n");
            for p in &self.preconditions {
                out.push_str(&format!("  {}: {}\n", p.kind(), p.describe()));
            }
        }
        out
    }
}

fn digest_of(body: &Map<String, Value>) -> String {
    // Not through a `Value`: that cloned the whole plan (a commit of 10,000
    // objects journals a plan of 10,000 actions and as many preconditions).
    let text = canonical::map_to_string(body);
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests;
