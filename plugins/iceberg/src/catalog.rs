//! What this backend needs from an Iceberg catalog, and the ref operations
//! built on it.
//!
//! A [`Catalog`] loads a table's current metadata and commits requirements
//! plus updates, the REST catalog's `CommitTableRequest`: the SQL catalog
//! ([`crate::sql`]) applies them itself and moves the pointer with a
//! compare-and-swap; the REST catalog ([`crate::rest`]) sends them. Both
//! re-check the requirements against the metadata current when the commit
//! lands, so a ref moves only from the head a caller saw: `CONDITIONAL_REF`.

use serde_json::{Value, json};
use tether_sdk::kit::{self, CasRef, Swap};
use tether_sdk::{Error, Expected, Result};

use crate::metadata::{MAIN, Metadata, NO_SNAPSHOT, RefKind, Requirement, Update};

/// How often an operation re-reads and tries again after losing a race
/// that its own requirements did not decide (another writer's commit).
pub const ATTEMPTS: usize = 16;

/// A table's metadata and where it was read from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub location: String,
    pub metadata: Metadata,
}

/// What a commit did.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The updates are in the table (or changed nothing); its metadata now.
    Committed(Metadata),
    /// A requirement failed against the current metadata: why.
    Rejected(String),
}

/// One table in one catalog.
pub trait Catalog {
    /// The table's current metadata.
    fn load(&self) -> Result<Loaded>;

    /// Apply `updates` if every requirement holds on the metadata current
    /// at the time the commit lands.
    fn commit(&self, requirements: &[Requirement], updates: &[Update]) -> Result<Outcome>;
}

/// A backend state: `{"snapshot_id": <i64>}`.
pub fn state_json(snapshot_id: i64) -> Value {
    json!({ "snapshot_id": snapshot_id })
}

/// A ref of one table, moved through its catalog's commits ([`kit::move_ref`]).
pub struct RefCas<'a> {
    pub catalog: &'a dyn Catalog,
    pub name: &'a str,
    pub kind: RefKind,
}

impl CasRef for RefCas<'_> {
    type Head = i64;
    /// The ref's snapshot id as read (`None`: absent), asserted by the commit.
    type Token = Option<i64>;

    fn name(&self) -> String {
        format!("{} {}", self.kind.as_str(), self.name)
    }

    fn read(&self) -> Result<Option<(i64, Option<i64>)>> {
        let meta = self.catalog.load()?.metadata;
        Ok(match meta.ref_(self.name) {
            Some(r) if r.kind == self.kind => Some((r.snapshot_id, Some(r.snapshot_id))),
            Some(r) => {
                return Err(Error::backend(format!(
                    "{} is a {}, not a {}",
                    self.name,
                    r.kind.as_str(),
                    self.kind.as_str()
                )));
            }
            // `main` of a table never written: the empty state, no ref.
            None if self.name == MAIN && meta.current_snapshot_id() == NO_SNAPSHOT => {
                Some((NO_SNAPSHOT, None))
            }
            None => None,
        })
    }

    fn state(&self, head: &i64) -> Value {
        state_json(*head)
    }

    fn swap(&self, token: Option<Option<i64>>, target: &i64) -> Result<Swap> {
        let requirement = Requirement::RefSnapshotId {
            ref_name: self.name.to_owned(),
            snapshot_id: token.flatten(),
        };
        let update = Update::SetRef {
            ref_name: self.name.to_owned(),
            kind: self.kind,
            snapshot_id: *target,
        };
        Ok(match self.catalog.commit(&[requirement], &[update])? {
            Outcome::Committed(_) => Swap::Moved,
            Outcome::Rejected(why) => Swap::Lost(why),
        })
    }
}

/// Move (or create) `name` to what `next` decides from its head, checked
/// against `expected`; its resulting head.
pub fn move_ref(
    catalog: &dyn Catalog,
    name: &str,
    kind: RefKind,
    expected: &Expected,
    next: impl FnMut(Option<&i64>) -> Result<Option<i64>>,
) -> Result<i64> {
    let cas = RefCas {
        catalog,
        name,
        kind,
    };
    kit::move_ref(&cas, expected, &[], next)
}

/// Remove ref `name` (of `kind`) wherever it points; already gone is
/// success. Another writer moving it in between is retried.
pub fn remove_ref(catalog: &dyn Catalog, name: &str, kind: RefKind) -> Result<()> {
    for _ in 0..ATTEMPTS {
        let meta = catalog.load()?.metadata;
        let Some(r) = meta.ref_(name) else {
            return Ok(());
        };
        if r.kind != kind {
            return Err(Error::backend(format!(
                "{name} is a {}, not a {}; not removing it",
                r.kind.as_str(),
                kind.as_str()
            )));
        }
        let requirement = Requirement::RefSnapshotId {
            ref_name: name.to_owned(),
            snapshot_id: Some(r.snapshot_id),
        };
        let update = Update::RemoveRef {
            ref_name: name.to_owned(),
        };
        match catalog.commit(&[requirement], &[update])? {
            Outcome::Committed(after) if after.ref_(name).is_none() => return Ok(()),
            Outcome::Committed(_) => {
                return Err(Error::backend(format!(
                    "{} {name} is still there after removing it",
                    kind.as_str()
                )));
            }
            Outcome::Rejected(_) => {}
        }
    }
    Err(Error::backend(format!(
        "{} {name} kept moving; gave up removing it after {ATTEMPTS} attempts",
        kind.as_str()
    )))
}

/// Create tag `name` at `snapshot_id` unless it exists; `Ok(false)` when
/// another writer created it first (the caller reads it again).
pub fn create_tag(catalog: &dyn Catalog, name: &str, snapshot_id: i64) -> Result<bool> {
    let requirement = Requirement::RefSnapshotId {
        ref_name: name.to_owned(),
        snapshot_id: None,
    };
    let update = Update::SetRef {
        ref_name: name.to_owned(),
        kind: RefKind::Tag,
        snapshot_id,
    };
    Ok(matches!(
        catalog.commit(&[requirement], &[update])?,
        Outcome::Committed(_)
    ))
}

#[cfg(test)]
pub(crate) mod fake {
    //! A catalog in memory that applies commits with the same metadata
    //! logic as the SQL catalog, and can be made to lose races.

    use std::cell::RefCell;

    use super::*;

    pub struct FakeCatalog {
        pub meta: RefCell<Metadata>,
        /// Commits that will find another writer's change first.
        pub interference: RefCell<Vec<Update>>,
        pub commits: RefCell<usize>,
    }

    impl FakeCatalog {
        pub fn new(meta: Metadata) -> Self {
            FakeCatalog {
                meta: RefCell::new(meta),
                interference: RefCell::new(Vec::new()),
                commits: RefCell::new(0),
            }
        }
    }

    impl Catalog for std::rc::Rc<FakeCatalog> {
        fn load(&self) -> Result<Loaded> {
            self.as_ref().load()
        }

        fn commit(&self, requirements: &[Requirement], updates: &[Update]) -> Result<Outcome> {
            self.as_ref().commit(requirements, updates)
        }
    }

    impl Catalog for FakeCatalog {
        fn load(&self) -> Result<Loaded> {
            Ok(Loaded {
                location: "mem".into(),
                metadata: self.meta.borrow().clone(),
            })
        }

        fn commit(&self, requirements: &[Requirement], updates: &[Update]) -> Result<Outcome> {
            if let Some(other) = self.interference.borrow_mut().pop() {
                let next = self.meta.borrow().updated("mem", &[other], 1)?;
                if let Some(next) = next {
                    *self.meta.borrow_mut() = next;
                }
            }
            let meta = self.meta.borrow().clone();
            if let Some(why) = requirements.iter().find_map(|r| meta.violation(r)) {
                return Ok(Outcome::Rejected(why));
            }
            *self.commits.borrow_mut() += 1;
            if let Some(next) = meta.updated("mem", updates, 2)? {
                *self.meta.borrow_mut() = next;
            }
            Ok(Outcome::Committed(self.meta.borrow().clone()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeCatalog;
    use super::*;
    use crate::metadata::tests_support::two_appends;

    #[test]
    fn conditional_moves_follow_the_catalogs_requirements() {
        let (meta, s1, s2) = two_appends();
        let cat = FakeCatalog::new(meta);
        // Create a branch where none is, only if absent.
        let head = move_ref(&cat, "b", RefKind::Branch, &Expected::Absent, |_| {
            Ok(Some(s1))
        })
        .unwrap();
        assert_eq!(head, s1);
        let err = move_ref(&cat, "b", RefKind::Branch, &Expected::Absent, |_| {
            Ok(Some(s2))
        });
        assert!(matches!(err, Err(Error::RefMoved(_))), "{err:?}");
        // Another writer moves it between our read and our commit: refused.
        cat.interference.borrow_mut().push(Update::SetRef {
            ref_name: "b".into(),
            kind: RefKind::Branch,
            snapshot_id: s2,
        });
        let err = move_ref(
            &cat,
            "b",
            RefKind::Branch,
            &Expected::At(state_json(s1)),
            |_| Ok(Some(s1)),
        );
        // (moving to where it already is reads first: no commit at all)
        assert_eq!(err.unwrap(), s1);
        let err = move_ref(
            &cat,
            "b",
            RefKind::Branch,
            &Expected::At(state_json(s1)),
            |_| Ok(Some(s2)),
        );
        assert!(matches!(err, Err(Error::RefMoved(m)) if m.contains("concurrently")));
        assert_eq!(cat.meta.borrow().branch_head("b"), Some(s2));
    }

    #[test]
    fn tags_and_removal() {
        let (meta, s1, _) = two_appends();
        let cat = FakeCatalog::new(meta);
        assert!(create_tag(&cat, "tether.d.h", s1).unwrap());
        assert!(!create_tag(&cat, "tether.d.h", s1).unwrap());
        let err = remove_ref(&cat, "tether.d.h", RefKind::Branch).unwrap_err();
        assert!(err.to_string().contains("is a tag"), "{err}");
        remove_ref(&cat, "tether.d.h", RefKind::Tag).unwrap();
        assert!(cat.meta.borrow().ref_("tether.d.h").is_none());
        // Gone already: success, and no commit.
        let before = *cat.commits.borrow();
        remove_ref(&cat, "tether.d.h", RefKind::Tag).unwrap();
        assert_eq!(*cat.commits.borrow(), before);
    }
}
