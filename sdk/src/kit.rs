//! The protocol kit: what every backend with refs needs, written once.
//!
//! A backend knows its format; the protocol around it is the same everywhere.
//! These helpers are that protocol, so a backend's code is only how its system
//! reads and writes a head, a tag or a branch:
//!
//! - [`move_ref`]: a conditional ref move with the spec's `expected` check and
//!   a retry loop for unconditional moves that lose a race ([`CasRef`]);
//! - [`pin_slot`], [`live_generation`], [`live_tag`], [`pin_id_of_ref`]: pins
//!   and their generations (`tether.<pin-id>`, `.2` … `.1000`) in stores that
//!   never reuse a deleted ref name;
//! - [`Heads`], [`resolve_target`], [`base_head`]: what a [`Target`] names
//!   (the base, a working ref, a pin's live tag, a recorded state);
//! - [`PinCheck`]: `verify`'s decision table (ok, drifted, missing, unknown);
//! - [`guard_delete`]: the owner and emptiness re-check before `delete_store`;
//! - [`refuse_base`]: `fork` and `delete_working_ref` never touch the base;
//! - [`rfc3339`], [`now_rfc3339`]: timestamps for `history` (chrono);
//! - [`random_hex`], [`scratch_name`]: unique names (wasi:random).
//!
//! Harness helpers (scratch directories) are in [`crate::harness`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Display;
use std::time::{SystemTime, UNIX_EPOCH};

pub use chrono::SecondsFormat;
use serde_json::Value;
use tether_contract::names;

use crate::backend::{Expected, PinRef, Target, VerifyReport, VerifyStatus};
use crate::error::{Error, Result};
use crate::expected::check_expected;

// ---------------------------------------------------------------------------
// Conditional ref moves

/// How often [`move_ref`] tries an unconditional move that keeps losing races.
pub const MOVE_ATTEMPTS: usize = 16;

/// What one compare-and-swap attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swap {
    /// The ref now points at the target.
    Moved,
    /// Someone else moved (or created) the ref since it was read; why.
    Lost(String),
}

/// One native ref that can be read and compare-and-swapped: what
/// [`move_ref`] needs from a backend.
pub trait CasRef {
    /// What a ref points at (a snapshot id, a commit).
    type Head: Clone + PartialEq;
    /// What a swap compares against (an etag, the old head).
    type Token;

    /// The ref as messages name it (`branch main`).
    fn name(&self) -> String;

    /// The current head and its swap token; `None` when the ref does not exist.
    fn read(&self) -> Result<Option<(Self::Head, Self::Token)>>;

    /// The state (as `fingerprint` reports it) of a head, for `expected`.
    fn state(&self, head: &Self::Head) -> Value;

    /// Point the ref at `target` if it is still at `token` (`None`: create it,
    /// only if it does not exist).
    fn swap(&self, token: Option<Self::Token>, target: &Self::Head) -> Result<Swap>;
}

/// Move `cas`'s ref to what `next` computes from its current head (`None`: stay),
/// after checking the head against `expected` (content keys only, per
/// `volatile_keys`). Returns the ref's resulting head.
///
/// A conditional move that loses a race returns `ref-moved` (the head it was
/// checked against is gone); an unconditional one reads again and retries,
/// up to [`MOVE_ATTEMPTS`] times.
pub fn move_ref<R: CasRef>(
    cas: &R,
    expected: &Expected,
    volatile_keys: &[String],
    mut next: impl FnMut(Option<&R::Head>) -> Result<Option<R::Head>>,
) -> Result<R::Head> {
    let what = cas.name();
    for _ in 0..MOVE_ATTEMPTS {
        let (head, token) = match cas.read()? {
            Some((head, token)) => (Some(head), Some(token)),
            None => (None, None),
        };
        let state = head.as_ref().map(|h| cas.state(h));
        check_expected(&what, state.as_ref(), expected, volatile_keys)?;
        let target = match next(head.as_ref())? {
            Some(target) if Some(&target) != head.as_ref() => target,
            // Already there: leave it alone.
            _ => return head.ok_or_else(|| Error::not_found(format!("{what} does not exist"))),
        };
        match cas.swap(token, &target)? {
            Swap::Moved => return Ok(target),
            // Unconditional: read the new head and try again.
            Swap::Lost(_) if matches!(expected, Expected::Unconditional) => {}
            Swap::Lost(why) => {
                return Err(Error::ref_moved(format!(
                    "{what} moved concurrently ({why}); nothing was written"
                )));
            }
        }
    }
    Err(Error::backend(format!(
        "{what} kept moving; gave up after {MOVE_ATTEMPTS} attempts"
    )))
}

/// Refuse to let `what` (`fork`, `delete_working_ref`) touch the base branch.
pub fn refuse_base(base: &str, name: &str, what: &str) -> Result<()> {
    if name == base {
        return Err(Error::backend(format!(
            "{what} refuses the base branch {name}"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Pins and generations

/// The ref of a pin at `generation` (1: `tether.<pin_id>`, N: `tether.<pin_id>.N`).
pub fn pin_ref_name(pin_id: &str, generation: u32) -> String {
    names::with_generation(&names::ref_for_pin(pin_id), generation)
}

/// Which generation of `pin_id`'s ref `name` is; `None` for another name.
pub fn pin_generation_of(pin_id: &str, name: &str) -> Option<u32> {
    names::generation_of(&names::ref_for_pin(pin_id), name)
}

/// The pin id a `tether.` ref name carries, its generation suffix removed;
/// `None` for working refs and foreign names.
pub fn pin_id_of_ref(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(names::REF_PREFIX)?;
    if name.starts_with(names::WORKING_REF_PREFIX) {
        return None;
    }
    // A pin id is `<dataset>.<hash>`: a third part is a generation.
    match names::split_generation(rest) {
        (id, n) if n > 1 && id.contains('.') => Some(id),
        _ => Some(rest),
    }
}

/// The live generation of a pin among the ref names that exist: the ref the
/// pin names when it exists, else the highest generation of its id.
pub fn live_generation<'a>(
    pin: &PinRef,
    existing: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let mut best: Option<(u32, &str)> = None;
    for name in existing {
        if name == pin.ref_ {
            return Some(name);
        }
        if let Some(g) = pin_generation_of(&pin.id, name)
            && best.is_none_or(|(b, _)| g > b)
        {
            best = Some((g, name));
        }
    }
    best.map(|(_, name)| name)
}

/// One listing of ref names, indexed to resolve many pins against it
/// ([`Backend::verify_many`](crate::Backend::verify_many)): each name is
/// filed once under the pin ref it is a generation of, so resolving a pin
/// looks up its own names instead of passing over every name, as
/// [`live_generation`] does (quadratic over a history's pins).
#[derive(Debug, Default)]
pub struct PinTags<'a> {
    names: HashSet<&'a str>,
    by_base: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> PinTags<'a> {
    pub fn new(existing: impl IntoIterator<Item = &'a str>) -> Self {
        let mut tags = PinTags::default();
        for name in existing {
            if tags.names.insert(name) {
                let (base, _) = names::split_generation(name);
                tags.by_base.entry(base).or_default().push(name);
            }
        }
        tags
    }

    /// What [`live_generation`] answers for `pin` over the same names.
    pub fn live(&self, pin: &PinRef) -> Option<&'a str> {
        if let Some(name) = self.names.get(pin.ref_.as_str()) {
            return Some(name);
        }
        let base = names::ref_for_pin(&pin.id);
        let generations = self.by_base.get(base.as_str())?;
        live_generation(pin, generations.iter().copied())
    }
}

/// [`live_generation`] over a store's tags by name: the pin's live tag and
/// what it holds.
pub fn live_tag<S: Clone>(tags: &BTreeMap<String, S>, pin: &PinRef) -> Option<(String, S)> {
    let tag = live_generation(pin, tags.keys().map(String::as_str))?;
    Some((tag.to_owned(), tags[tag].clone()))
}

/// The not-found error of a pin none of whose generations exists.
pub fn pin_gone(pin: &PinRef) -> Error {
    Error::not_found(format!("pin {} has no tag ({} is gone)", pin.id, pin.ref_))
}

// ---------------------------------------------------------------------------
// Targets

/// How a backend with branches and tags finds a head: [`resolve_target`]
/// and [`base_head`] are the dispatch over a [`Target`] every such backend
/// writes the same way.
pub trait Heads {
    /// What a target resolves to (a snapshot id, a version; with the tag it
    /// came through where the backend needs that).
    type Head;
    /// A revision as a locator's `at` (and `history --at`) names it.
    fn rev(&self, rev: &str) -> Result<Self::Head>;
    /// The head of branch `name`, which must exist.
    fn branch(&self, name: &str) -> Result<Self::Head>;
    /// A pin's live tag and what it holds; `None` when every generation of
    /// it is gone.
    fn live_pin(&self, pin: &PinRef) -> Result<Option<(String, Self::Head)>>;
    /// A recorded state, which must still be in the store.
    fn recorded(&self, state: &Value) -> Result<Self::Head>;
}

/// The base head: the locator's `at` when set, else its branch's head.
pub fn base_head<H: Heads + ?Sized>(heads: &H, at: Option<&str>, branch: &str) -> Result<H::Head> {
    match at {
        Some(at) => heads.rev(at),
        None => heads.branch(branch),
    }
}

/// What `target` names, for a locator at `at` on `branch`; a pin none of
/// whose generations exists is not found ([`pin_gone`]).
pub fn resolve_target<H: Heads + ?Sized>(
    heads: &H,
    at: Option<&str>,
    branch: &str,
    target: &Target,
) -> Result<H::Head> {
    match target {
        Target::Base => base_head(heads, at, branch),
        Target::WorkingRef(name) => heads.branch(name),
        Target::Pinned(pin) => Ok(heads.live_pin(pin)?.ok_or_else(|| pin_gone(pin))?.1),
        Target::Recorded(state) => heads.recorded(state),
    }
}

/// Where `pin` puts a state: reuse a ref that holds it, or create one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinSlot {
    /// This ref already holds the state: the pin exists (`created: false`).
    Reuse(String),
    /// Create this ref at the state (`created: true`).
    Create(String),
}

impl PinSlot {
    /// The [`PinRef`] `pin` returns once the slot is taken.
    pub fn pin_ref(self, pin_id: &str) -> PinRef {
        let (ref_, created) = match self {
            PinSlot::Reuse(r) => (r, false),
            PinSlot::Create(r) => (r, true),
        };
        PinRef {
            id: pin_id.to_owned(),
            ref_,
            created,
        }
    }
}

/// Decide where `pin(state, pin_id)` goes: the first generation of
/// `tether.<pin_id>` whose name the store has not `retired` (a tombstone: a
/// store like Icechunk never reuses a deleted tag's name). When that ref
/// `holds` `want`, reuse it (pin is idempotent); when it holds another state,
/// refuse (a pin never moves); when it does not exist, create it. Every
/// generation up to `.1000` retired is a backend error.
pub fn pin_slot<S: PartialEq + Display>(
    pin_id: &str,
    want: &S,
    mut retired: impl FnMut(&str) -> Result<bool>,
    mut holds: impl FnMut(&str) -> Result<Option<S>>,
) -> Result<PinSlot> {
    for name in names::generations(&names::ref_for_pin(pin_id)) {
        if retired(&name)? {
            continue;
        }
        return match holds(&name)? {
            Some(at) if at == *want => Ok(PinSlot::Reuse(name)),
            Some(at) => Err(Error::backend(format!(
                "tag {name} exists at {at} instead of {want}; a pin never moves"
            ))),
            None => Ok(PinSlot::Create(name)),
        };
    }
    Err(Error::backend(format!(
        "every generation of {} up to .{} was deleted; this pin id cannot be pinned again in \
         this store",
        names::ref_for_pin(pin_id),
        names::MAX_GENERATION
    )))
}

// ---------------------------------------------------------------------------
// verify

/// `verify`'s decision table. `state` is what the pin should hold, `noun`
/// what a state is called (`snapshot`, `commit`).
#[derive(Debug, Clone)]
pub struct PinCheck<'a, S> {
    pub pin: Option<&'a PinRef>,
    pub state: S,
    pub noun: &'a str,
    pub deep: bool,
}

impl<S: PartialEq + Display> PinCheck<'_, S> {
    /// The report, given the pin's live ref and what it holds (`None`: every
    /// generation is gone; ignored without a pin) and whether a state's data
    /// is still readable (asked only for `deep`, and without a pin).
    ///
    /// | pin | live ref | readable | status |
    /// | --- | --- | --- | --- |
    /// | yes | none | | missing |
    /// | yes | at another state | | drifted |
    /// | yes | at the state | no (deep) | missing |
    /// | yes | at the state | yes, or not deep | ok (`pinned as <ref>` when a later generation holds it) |
    /// | no | | not deep | unknown |
    /// | no | | yes / no | ok / missing |
    pub fn report(
        self,
        live: Option<(String, S)>,
        readable: impl FnOnce(&S) -> Result<bool>,
    ) -> Result<VerifyReport> {
        let report = |status, message: String| Ok(VerifyReport { status, message });
        let (want, noun) = (&self.state, self.noun);
        if let Some(pin) = self.pin {
            return match live {
                None => report(VerifyStatus::Missing, format!("tag {} is gone", pin.ref_)),
                Some((tag, at)) if at != *want => report(
                    VerifyStatus::Drifted,
                    format!("tag {tag} points at {noun} {at} instead of {want}"),
                ),
                Some((tag, _)) if self.deep && !readable(want)? => report(
                    VerifyStatus::Missing,
                    format!("{noun} {want} is gone; tag {tag} remains"),
                ),
                // A later generation carries the pin: say which (`tether
                // verify` prints an ok line's message only then).
                Some((tag, _)) if tag != pin.ref_ => {
                    report(VerifyStatus::Ok, format!("pinned as {tag}"))
                }
                Some((tag, _)) => {
                    report(VerifyStatus::Ok, format!("tag {tag} holds {noun} {want}"))
                }
            };
        }
        if !self.deep {
            return report(VerifyStatus::Unknown, "no pin to check".into());
        }
        if readable(want)? {
            report(VerifyStatus::Ok, format!("{noun} {want} is readable"))
        } else {
            report(VerifyStatus::Missing, format!("{noun} {want} is gone"))
        }
    }
}

// ---------------------------------------------------------------------------
// delete_store

/// The re-check right before `delete_store`'s irreversible step: the store's
/// owner marker (`marker`, `None` when it has none) must name `owner`, and the
/// store must be `empty` (asked only then). `store` names it in the refusal.
pub fn guard_delete(
    store: &str,
    marker: Option<&str>,
    owner: &str,
    empty: impl FnOnce() -> Result<bool>,
) -> Result<()> {
    match marker {
        Some(o) if o == owner => {}
        Some(o) => {
            return Err(Error::backend(format!(
                "{store} is owned by {o}, not {owner}; not deleting"
            )));
        }
        None => {
            return Err(Error::backend(format!(
                "{store} has no owner marker; tether did not create it, not deleting"
            )));
        }
    }
    if !empty()? {
        return Err(Error::backend(format!(
            "{store} holds data beyond what create made; not deleting"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Store locations

/// A store URI as the `storage` capability takes it: `file://` (and
/// `file://localhost`) folded to the path, trailing slashes gone (`/` stays).
pub fn storage_uri(uri: &str) -> String {
    let uri = match uri.strip_prefix("file://") {
        Some(rest) => rest.strip_prefix("localhost").unwrap_or(rest),
        None => uri,
    };
    let trimmed = uri.trim_end_matches('/');
    if trimmed.is_empty() { "/" } else { trimmed }.to_owned()
}

/// The `uri` rule of a backend whose store is a local directory or an
/// `s3://bucket/prefix`: set, an absolute path or an `s3://` URI naming a
/// bucket (`memory://` is the host's in-process bucket, for tests and the
/// conformance suite). `uri` is the locator's, as the user wrote it.
pub fn check_bucket_uri(kind: &str, uri: &str) -> Result<()> {
    if uri.is_empty() {
        return Err(Error::invalid(format!(
            "the {kind} locator needs `uri`: a local path or s3://bucket/prefix"
        )));
    }
    let storage = storage_uri(uri);
    if let Some((scheme, rest)) = storage.split_once("://") {
        if scheme != "s3" && scheme != "memory" {
            return Err(Error::invalid(format!(
                "{uri}: the {kind} backend takes a local path or s3://bucket/prefix, not \
                 {scheme}://"
            )));
        }
        if rest.split('/').next().is_none_or(str::is_empty) {
            return Err(Error::invalid(format!(
                "{uri}: a {scheme}:// uri needs a bucket ({scheme}://bucket/prefix)"
            )));
        }
    } else if !storage.starts_with('/') {
        return Err(Error::invalid(format!(
            "{uri}: a local {kind} uri must be an absolute path"
        )));
    }
    Ok(())
}

/// A store's identity, `{"uri": ...}`: [`storage_uri`] of `uri`, a local
/// path resolved by the host (symlinks followed, `..` gone), so every
/// spelling of one store is one identity to pin ids, listings and `gc`.
pub fn uri_identity(uri: &str) -> Result<Value> {
    let uri = storage_uri(uri);
    let uri = if uri.starts_with('/') {
        crate::tree::realpath(&uri)?
    } else {
        uri
    };
    Ok(serde_json::json!({ "uri": uri }))
}

/// What `effective-capabilities` starts from: the declared capabilities,
/// less `PIN` for an object whose policy is `pin = "record"` (the spec's
/// lever 1: the state is recorded, no native ref made).
pub fn policy_capabilities(declared: Vec<String>, policy: &Value) -> Vec<String> {
    let mut caps = declared;
    if policy.get("pin").and_then(Value::as_str) == Some("record") {
        caps.retain(|c| c != crate::cap::PIN.as_str());
    }
    caps
}

/// The committed `[backends.<kind>]` settings a backend on object storage
/// accepts (`storage_options.region`, ...): the host's allowlist of storage
/// options a clone may set; everything else belongs in secrets.toml.
pub fn storage_option_keys() -> Vec<String> {
    [
        "region",
        "allow_http",
        "virtual_hosted_style_request",
        "conditional_put",
    ]
    .iter()
    .map(|k| format!("storage_options.{k}"))
    .collect()
}

// ---------------------------------------------------------------------------
// Time and names

/// RFC 3339 in UTC (`2026-01-31T12:00:00Z`) for a time since the Unix epoch,
/// with the fraction `precision` asks for; empty for a time out of range.
pub fn rfc3339(secs: i64, nanos: u32, precision: SecondsFormat) -> String {
    chrono::DateTime::from_timestamp(secs, nanos)
        .map(|t| t.to_rfc3339_opts(precision, true))
        .unwrap_or_default()
}

/// Now (wasi:clocks) as [`rfc3339`]; `None` without a clock.
pub fn now_rfc3339(precision: SecondsFormat) -> Option<String> {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    Some(rfc3339(
        i64::try_from(d.as_secs()).ok()?,
        d.subsec_nanos(),
        precision,
    ))
}

/// `bytes` random bytes (wasi:random) as lowercase hex.
pub fn random_hex(bytes: usize) -> Result<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| Error::Other(format!("no randomness: {e}")))?;
    Ok(hex::encode(buf))
}

/// `<prefix>-<16 random hex>`: a scratch ref, file or directory name no
/// concurrent call shares.
pub fn scratch_name(prefix: &str) -> Result<String> {
    Ok(format!("{prefix}-{}", random_hex(8)?))
}

#[cfg(test)]
mod tests {

    #[test]
    fn storage_uri_folds_file_urls_and_trailing_slashes() {
        assert_eq!(storage_uri("file:///data/t/"), "/data/t");
        assert_eq!(storage_uri("file://localhost/data/t"), "/data/t");
        assert_eq!(storage_uri("/data/t//"), "/data/t");
        assert_eq!(storage_uri("file:///"), "/");
        assert_eq!(storage_uri("s3://bucket/prefix/"), "s3://bucket/prefix");
        assert_eq!(storage_option_keys()[0], "storage_options.region");
    }

    use super::*;
    use serde_json::json;
    use std::cell::RefCell;

    /// A ref in memory whose swap can be made to lose `losses` races.
    struct Fake {
        head: RefCell<Option<u32>>,
        losses: RefCell<usize>,
    }

    impl CasRef for Fake {
        type Head = u32;
        type Token = Option<u32>;
        fn name(&self) -> String {
            "branch x".into()
        }
        fn read(&self) -> Result<Option<(u32, Option<u32>)>> {
            let h = *self.head.borrow();
            Ok(h.map(|h| (h, Some(h))))
        }
        fn state(&self, head: &u32) -> Value {
            json!({ "n": head })
        }
        fn swap(&self, token: Option<Option<u32>>, target: &u32) -> Result<Swap> {
            if *self.losses.borrow() > 0 {
                *self.losses.borrow_mut() -= 1;
                *self.head.borrow_mut() = Some(99);
                return Ok(Swap::Lost("raced".into()));
            }
            assert_eq!(token.flatten(), *self.head.borrow());
            *self.head.borrow_mut() = Some(*target);
            Ok(Swap::Moved)
        }
    }

    /// A store of branches and tags by name, revisions `@N`.
    struct Refs {
        branches: BTreeMap<String, u32>,
        tags: BTreeMap<String, u32>,
    }

    impl Heads for Refs {
        type Head = u32;
        fn rev(&self, rev: &str) -> Result<u32> {
            rev.strip_prefix('@')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| Error::not_found(rev.to_owned()))
        }
        fn branch(&self, name: &str) -> Result<u32> {
            self.branches
                .get(name)
                .copied()
                .ok_or_else(|| Error::not_found(name.to_owned()))
        }
        fn live_pin(&self, pin: &PinRef) -> Result<Option<(String, u32)>> {
            Ok(live_tag(&self.tags, pin))
        }
        fn recorded(&self, state: &Value) -> Result<u32> {
            Ok(state["n"].as_u64().unwrap() as u32)
        }
    }

    #[test]
    fn resolve_target_dispatches_and_names_a_gone_pin() {
        let id = "ds.abc";
        let refs = Refs {
            branches: [("main".to_owned(), 1), ("ws".to_owned(), 2)].into(),
            tags: [(pin_ref_name(id, 2), 7), ("other".to_owned(), 8)].into(),
        };
        let pin = PinRef {
            id: id.into(),
            ref_: pin_ref_name(id, 1),
            created: false,
        };
        let r = |at: Option<&str>, t: &Target| resolve_target(&refs, at, "main", t);
        assert_eq!(r(None, &Target::Base).unwrap(), 1);
        assert_eq!(r(Some("@5"), &Target::Base).unwrap(), 5);
        assert_eq!(base_head(&refs, Some("@6"), "main").unwrap(), 6);
        assert_eq!(r(None, &Target::WorkingRef("ws".into())).unwrap(), 2);
        assert!(r(None, &Target::WorkingRef("nope".into())).is_err());
        // The pin's own tag is gone; its live generation `.2` holds 7.
        assert_eq!(r(None, &Target::Pinned(pin.clone())).unwrap(), 7);
        assert_eq!(r(None, &Target::Recorded(json!({"n": 3}))).unwrap(), 3);
        let gone = PinRef {
            id: "ds.zzz".into(),
            ref_: pin_ref_name("ds.zzz", 1),
            created: false,
        };
        let err = r(None, &Target::Pinned(gone)).unwrap_err();
        assert!(matches!(err, Error::NotFound(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            pin_gone(&PinRef {
                id: "ds.zzz".into(),
                ref_: pin_ref_name("ds.zzz", 1),
                created: false
            })
            .to_string()
        );
        assert!(err.to_string().contains("tether.ds.zzz"), "{err}");
    }

    fn fake(head: Option<u32>, losses: usize) -> Fake {
        Fake {
            head: RefCell::new(head),
            losses: RefCell::new(losses),
        }
    }

    #[test]
    fn move_ref_checks_expected_and_retries_only_unconditional_moves() {
        let f = fake(Some(1), 2);
        assert_eq!(
            move_ref(&f, &Expected::Unconditional, &[], |_| Ok(Some(5))).unwrap(),
            5
        );
        let f = fake(Some(1), 1);
        let err = move_ref(&f, &Expected::At(json!({"n": 1})), &[], |_| Ok(Some(5)));
        assert!(matches!(err, Err(Error::RefMoved(m)) if m.contains("concurrently")));
        let f = fake(Some(1), 0);
        let err = move_ref(&f, &Expected::Absent, &[], |_| Ok(Some(5)));
        assert!(matches!(err, Err(Error::RefMoved(_))));
        assert_eq!(*f.head.borrow(), Some(1), "nothing moved");
        let f = fake(Some(3), 0);
        assert_eq!(
            move_ref(&f, &Expected::Unconditional, &[], |_| Ok(None)).unwrap(),
            3
        );
        let f = fake(None, 0);
        assert!(matches!(
            move_ref(&f, &Expected::Unconditional, &[], |_| Ok(None)),
            Err(Error::NotFound(_))
        ));
        let f = fake(Some(1), MOVE_ATTEMPTS);
        let err = move_ref(&f, &Expected::Unconditional, &[], |_| Ok(Some(5))).unwrap_err();
        assert!(err.to_string().contains("kept moving"), "{err}");
    }

    #[test]
    fn pin_generations() {
        let id = "0a1b2c3d.0123456789abcdef";
        assert_eq!(pin_ref_name(id, 1), format!("tether.{id}"));
        assert_eq!(pin_ref_name(id, 3), format!("tether.{id}.3"));
        assert_eq!(pin_generation_of(id, &format!("tether.{id}.7")), Some(7));
        assert_eq!(pin_id_of_ref(&format!("tether.{id}.7")), Some(id));
        assert_eq!(pin_id_of_ref(&format!("tether.{id}")), Some(id));
        assert_eq!(pin_id_of_ref("tether.ws.0a1b2c3d.main"), None);
        assert_eq!(pin_id_of_ref("v1.0"), None);
        let pin = PinRef {
            id: id.into(),
            ref_: format!("tether.{id}"),
            created: true,
        };
        let names = [
            format!("tether.{id}.2"),
            format!("tether.{id}.10"),
            "x".into(),
        ];
        assert_eq!(
            live_generation(&pin, names.iter().map(String::as_str)),
            Some(format!("tether.{id}.10").as_str())
        );
        assert_eq!(live_generation(&pin, ["y"]), None);
    }

    #[test]
    fn pin_slot_skips_retired_names_and_never_moves_a_pin() {
        let id = "0a1b2c3d.0123456789abcdef";
        let first = pin_ref_name(id, 1);
        let slot = pin_slot(id, &"s1", |n| Ok(n == first), |_| Ok(None)).unwrap();
        assert_eq!(slot, PinSlot::Create(pin_ref_name(id, 2)));
        assert!(slot.pin_ref(id).created);
        let slot = pin_slot(id, &"s1", |_| Ok(false), |_| Ok(Some("s1"))).unwrap();
        assert_eq!(slot, PinSlot::Reuse(first.clone()));
        let err = pin_slot(id, &"s1", |_| Ok(false), |_| Ok(Some("s2"))).unwrap_err();
        assert!(err.to_string().contains("never moves"), "{err}");
        let err = pin_slot(id, &"s1", |_| Ok(true), |_| Ok(None)).unwrap_err();
        assert!(err.to_string().contains(".1000"), "{err}");
    }

    #[test]
    fn verify_table() {
        let pin = PinRef {
            id: "d.h".into(),
            ref_: "tether.d.h".into(),
            created: true,
        };
        let check = |pin, deep| PinCheck {
            pin,
            state: "s1".to_string(),
            noun: "snapshot",
            deep,
        };
        let status = |r: Result<VerifyReport>| r.unwrap().status;
        let live = |at: &str| Some(("tether.d.h".to_string(), at.to_string()));
        let yes = |_: &String| Ok(true);
        let no = |_: &String| Ok(false);
        assert_eq!(
            status(check(Some(&pin), false).report(None, yes)),
            VerifyStatus::Missing
        );
        assert_eq!(
            status(check(Some(&pin), false).report(live("s2"), yes)),
            VerifyStatus::Drifted
        );
        assert_eq!(
            status(check(Some(&pin), true).report(live("s1"), no)),
            VerifyStatus::Missing
        );
        assert_eq!(
            status(check(Some(&pin), false).report(live("s1"), no)),
            VerifyStatus::Ok
        );
        assert_eq!(
            status(check(None, false).report(None, yes)),
            VerifyStatus::Unknown
        );
        assert_eq!(
            status(check(None, true).report(None, yes)),
            VerifyStatus::Ok
        );
        assert_eq!(
            status(check(None, true).report(None, no)),
            VerifyStatus::Missing
        );
        let later = Some(("tether.d.h.2".to_string(), "s1".to_string()));
        let r = check(Some(&pin), true).report(later, yes).unwrap();
        assert_eq!(r.message, "pinned as tether.d.h.2");
    }

    #[test]
    fn delete_guard() {
        assert!(guard_delete("s", Some("ds1"), "ds1", || Ok(true)).is_ok());
        let e = guard_delete("s", Some("ds2"), "ds1", || Ok(true)).unwrap_err();
        assert!(e.to_string().contains("owned by ds2"), "{e}");
        let e = guard_delete("s", None, "ds1", || Ok(true)).unwrap_err();
        assert!(e.to_string().contains("no owner marker"), "{e}");
        let e = guard_delete("s", Some("ds1"), "ds1", || Ok(false)).unwrap_err();
        assert!(e.to_string().contains("not deleting"), "{e}");
        assert!(refuse_base("main", "main", "fork").is_err());
        assert!(refuse_base("main", "tether.ws.x.y", "fork").is_ok());
    }

    #[test]
    fn times_and_names() {
        assert_eq!(rfc3339(0, 0, SecondsFormat::Secs), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(951_782_400, 500_000_000, SecondsFormat::Micros),
            "2000-02-29T00:00:00.500000Z"
        );
        assert!(now_rfc3339(SecondsFormat::Secs).is_some());
        let a = scratch_name("obj").unwrap();
        assert!(a.starts_with("obj-") && a.len() == 20, "{a}");
        assert_ne!(a, scratch_name("obj").unwrap());
    }

    #[test]
    fn pin_tags_answer_as_live_generation_does() {
        let names = [
            "tether.ds.aaaa",
            "tether.ds.aaaa.2",
            "tether.ds.aaaa.3",
            "tether.ds.bbbb.2",
            "tether.ds.cccc.1",
            "tether.ds.cccc.0",
            "tether.ds.dddd.1001",
            "main",
        ];
        let tags = PinTags::new(names);
        let pin = |id: &str, r: &str| PinRef {
            id: id.into(),
            ref_: r.into(),
            created: false,
        };
        for p in [
            pin("ds.aaaa", "tether.ds.aaaa"),
            pin("ds.aaaa", "tether.ds.aaaa.2"),
            pin("ds.aaaa", "tether.ds.aaaa.9"),
            pin("ds.bbbb", "tether.ds.bbbb"),
            pin("ds.cccc", "tether.ds.cccc"),
            pin("ds.dddd", "tether.ds.dddd"),
            pin("ds.eeee", "tether.ds.eeee"),
            pin("ds.eeee", "main"),
        ] {
            assert_eq!(tags.live(&p), live_generation(&p, names), "{p:?}");
        }
    }
}
