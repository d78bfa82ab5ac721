//! The bridge from the generated `Guest` traits to [`Backend`] and [`Harness`].
//!
//! Not public API: [`crate::export!`] names [`Exported`], which implements the
//! generated `Guest` traits by delegating to a [`Backend`] and a [`Harness`].

use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;

use serde_json::Value;

use crate::backend::{
    Backend, DescribeExt, DescribeFs, DescribeNet, Expected, Handle, HttpGrant, Target, VerifyItem,
};
use crate::bindings::exports::tether::backend::backend::Guest as BackendGuest;
use crate::bindings::tether::backend::types as wit;
use crate::error::Result;
use crate::harness::Harness;
use crate::json::{canonical_json, parse};

/// The type the generated export macros export: a backend `B` and, in the
/// harness form, a harness `H`.
pub struct Exported<B, H = NoHarness>(PhantomData<fn() -> (B, H)>);

/// The harness of plugins that export none (never instantiated).
#[derive(Default)]
pub struct NoHarness;

thread_local! {
    // The configured backend of this component instance. Instances are
    // single-threaded and never re-entered, and the host makes a fresh one per
    // call, so `configure` followed by the real call sees one value.
    static INSTANCE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

fn with_backend<B: Backend, R>(f: impl FnOnce(&B) -> R) -> R {
    INSTANCE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if !slot.as_ref().is_some_and(|b| b.is::<B>()) {
            *slot = Some(Box::new(B::default()));
        }
        let backend = slot
            .as_ref()
            .and_then(|b| b.downcast_ref::<B>())
            .expect("instance set above");
        f(backend)
    })
}

fn configure<B: Backend>(config: &str) -> Result<()> {
    let mut backend = B::default();
    backend.configure(parse("config", config)?)?;
    INSTANCE.with(|cell| *cell.borrow_mut() = Some(Box::new(backend)));
    Ok(())
}

/// Runs `f` on the instance with the locator parsed into the backend's
/// `Locator` type, and maps the error. A locator that is not JSON or does not
/// fit the type is the contract's `invalid` error, raised before `f` runs.
fn call<B: Backend, R>(
    locator: &str,
    f: impl FnOnce(&B, &B::Locator) -> Result<R>,
) -> Result<R, wit::Error> {
    let locator: B::Locator = typed_locator(locator)?;
    with_backend(|b: &B| f(b, &locator)).map_err(wit::Error::from)
}

/// A locator's text as `L`, naming what was wrong.
fn typed_locator<L: serde::de::DeserializeOwned>(text: &str) -> Result<L> {
    crate::json::locator(&parse("locator", text)?)
}

fn json_out(value: Result<Value>) -> Result<String> {
    value.map(|v| canonical_json(&v))
}

fn target(t: wit::Target) -> Result<Target> {
    Ok(match t {
        wit::Target::Base => Target::Base,
        wit::Target::WorkingRef(r) => Target::WorkingRef(r),
        wit::Target::Pinned(p) => Target::Pinned(p),
        wit::Target::Recorded(s) => Target::Recorded(parse("state", &s)?),
    })
}

fn expected(e: wit::Expected) -> Result<Expected> {
    Ok(match e {
        wit::Expected::Unconditional => Expected::Unconditional,
        wit::Expected::Absent => Expected::Absent,
        wit::Expected::At(s) => Expected::At(parse("expected state", &s)?),
    })
}

fn handle(h: Handle) -> wit::Handle {
    wit::Handle {
        type_name: h.type_name,
        address: h.address,
        read_only: h.read_only,
        fields: canonical_json(&h.fields),
    }
}

/// Every `backend` member delegates to [`Backend`], converting JSON at the edge.
impl<B: Backend, H: 'static> BackendGuest for Exported<B, H> {
    fn describe() -> wit::Descriptor {
        with_backend(|b: &B| b.describe())
    }

    fn configure(config: String) -> Result<(), wit::Error> {
        configure::<B>(&config).map_err(Into::into)
    }

    fn validate_locator(locator: String) -> Result<(), wit::Error> {
        call(&locator, |b: &B, l| b.validate_locator(l))
    }

    fn identity(locator: String) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| json_out(b.identity(l)))
    }

    fn effective_capabilities(locator: String, policy: String) -> Result<Vec<String>, wit::Error> {
        call(&locator, |b: &B, l| {
            b.effective_capabilities(l, &parse("policy", &policy)?)
        })
    }

    fn fingerprint(locator: String, working_ref: Option<String>) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| {
            json_out(b.fingerprint(l, working_ref.as_deref()))
        })
    }

    fn pin(locator: String, state: String, pin_id: String) -> Result<wit::PinRef, wit::Error> {
        call(&locator, |b: &B, l| {
            b.pin(l, &parse("state", &state)?, &pin_id)
        })
    }

    fn unpin(locator: String, pin: wit::PinRef) -> Result<(), wit::Error> {
        call(&locator, |b: &B, l| b.unpin(l, &pin))
    }

    fn list_pins(locator: String) -> Result<Vec<String>, wit::Error> {
        call(&locator, |b: &B, l| b.list_pins(l))
    }

    fn verify(
        locator: String,
        state: String,
        pin: Option<wit::PinRef>,
        deep: bool,
    ) -> Result<wit::VerifyReport, wit::Error> {
        call(&locator, |b: &B, l| {
            b.verify(l, &parse("state", &state)?, pin.as_ref(), deep)
        })
    }

    fn fork(
        locator: String,
        source: wit::Target,
        name: String,
        exp: wit::Expected,
    ) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| {
            b.fork(l, &target(source)?, &name, &expected(exp)?)
        })
    }

    fn delete_working_ref(locator: String, working_ref: String) -> Result<(), wit::Error> {
        call(&locator, |b: &B, l| b.delete_working_ref(l, &working_ref))
    }

    fn working_ref_blockers(
        locator: String,
        working_ref: String,
    ) -> Result<Option<String>, wit::Error> {
        call(&locator, |b: &B, l| b.working_ref_blockers(l, &working_ref))
    }

    fn list_working_refs(locator: String) -> Result<Vec<String>, wit::Error> {
        call(&locator, |b: &B, l| b.list_working_refs(l))
    }

    fn rename_pin(
        locator: String,
        old: wit::PinRef,
        state: String,
        new_id: String,
    ) -> Result<wit::PinRef, wit::Error> {
        call(&locator, |b: &B, l| {
            b.rename_pin(l, &old, &parse("state", &state)?, &new_id)
        })
    }

    fn rename_working_ref(locator: String, old: String, new: String) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| b.rename_working_ref(l, &old, &new))
    }

    fn promote(
        locator: String,
        source: wit::Target,
        exp: wit::Expected,
    ) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| {
            json_out(b.promote(l, &target(source)?, &expected(exp)?))
        })
    }

    fn merge(
        locator: String,
        source: wit::Target,
        message: String,
        exp: wit::Expected,
    ) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| {
            json_out(b.merge(l, &target(source)?, &message, &expected(exp)?))
        })
    }

    fn ancestor_of(
        locator: String,
        ancestor: String,
        descendant: String,
    ) -> Result<Option<bool>, wit::Error> {
        call(&locator, |b: &B, l| {
            b.ancestor_of(
                l,
                &parse("state", &ancestor)?,
                &parse("state", &descendant)?,
            )
        })
    }

    fn open(locator: String, t: wit::Target, read_only: bool) -> Result<wit::Handle, wit::Error> {
        call(&locator, |b: &B, l| {
            b.open(l, &target(t)?, read_only).map(handle)
        })
    }

    fn history(
        locator: String,
        from_ref: Option<String>,
        limit: u32,
    ) -> Result<Vec<wit::HistoryEntry>, wit::Error> {
        call(&locator, |b: &B, l| {
            b.history(l, from_ref.as_deref(), limit)
        })
    }

    fn diff(
        locator: String,
        a: String,
        b_state: String,
        listing_a: Option<String>,
        listing_b: Option<String>,
    ) -> Result<wit::ObjectDiff, wit::Error> {
        call(&locator, |b: &B, l| {
            let (a, bs) = (parse("state", &a)?, parse("state", &b_state)?);
            b.diff(l, &a, &bs, listing_a.as_deref(), listing_b.as_deref())
                .map(Into::into)
        })
    }

    fn listing(locator: String, state: String) -> Result<Option<String>, wit::Error> {
        call(&locator, |b: &B, l| b.listing(l, &parse("state", &state)?))
    }

    fn create(locator: String, owner: String) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| json_out(b.create(l, &owner)))
    }

    fn owner(locator: String) -> Result<Option<String>, wit::Error> {
        call(&locator, |b: &B, l| b.owner(l))
    }

    fn is_ref_empty(locator: String, ignoring: Vec<String>) -> Result<Option<bool>, wit::Error> {
        call(&locator, |b: &B, l| b.is_ref_empty(l, &ignoring))
    }

    fn delete_store(locator: String, owner: String) -> Result<(), wit::Error> {
        call(&locator, |b: &B, l| b.delete_store(l, &owner))
    }

    fn check_quiescence(locator: String, working_ref: Option<String>) -> Result<(), wit::Error> {
        call(&locator, |b: &B, l| {
            b.check_quiescence(l, working_ref.as_deref())
        })
    }

    fn branch_scope(locator: String) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| b.branch_scope(l))
    }

    fn ref_namespace(locator: String) -> Result<String, wit::Error> {
        call(&locator, |b: &B, l| b.ref_namespace(l))
    }

    fn state_addressable(locator: String, state: String) -> Result<bool, wit::Error> {
        call(&locator, |b: &B, l| {
            b.state_addressable(l, &parse("state", &state)?)
        })
    }
}

impl<B: 'static, H: Harness> crate::harness_bindings::exports::tether::backend::harness::Guest
    for Exported<B, H>
{
    fn new_object(scratch_uri: String) -> Result<String, wit::Error> {
        json_out(H::default().new_object(&scratch_uri)).map_err(Into::into)
    }

    fn mutate(locator: String, working_ref: Option<String>) -> Result<(), wit::Error> {
        let locator: H::Locator = typed_locator(&locator)?;
        H::default()
            .mutate(&locator, working_ref.as_deref())
            .map_err(Into::into)
    }

    fn fresh_locator(scratch_uri: String) -> Result<String, wit::Error> {
        json_out(H::default().fresh_locator(&scratch_uri)).map_err(Into::into)
    }
}

impl<B: Backend, H: 'static>
    crate::verify_many_bindings::exports::tether::backend::verify_many::Guest for Exported<B, H>
{
    fn verify_many(
        locator: String,
        items: Vec<crate::verify_many_bindings::exports::tether::backend::verify_many::VerifyItem>,
        deep: bool,
    ) -> Result<Vec<Result<wit::VerifyReport, wit::Error>>, wit::Error> {
        // A state that is not JSON answers its own item, as `verify` would;
        // the others go to the backend together.
        let asked = items.len();
        let mut answers: Vec<Option<Result<wit::VerifyReport, wit::Error>>> = Vec::new();
        let mut parsed = Vec::with_capacity(asked);
        for item in items {
            match parse("state", &item.state) {
                Ok(state) => {
                    parsed.push(VerifyItem {
                        state,
                        pin: item.pin,
                    });
                    answers.push(None);
                }
                Err(e) => answers.push(Some(Err(e.into()))),
            }
        }
        let reports = call(&locator, |b: &B, l| b.verify_many(l, &parsed, deep))?;
        if reports.len() != parsed.len() {
            return Err(crate::Error::backend(format!(
                "verify_many answered {} of {} items",
                reports.len(),
                parsed.len()
            ))
            .into());
        }
        let mut reports = reports.into_iter();
        Ok(answers
            .into_iter()
            .map(|a| match a {
                Some(answer) => answer,
                None => reports
                    .next()
                    .expect("one report per parsed item")
                    .map_err(Into::into),
            })
            .collect())
    }
}

impl<B: DescribeExt, H: 'static>
    crate::describe_ext_bindings::exports::tether::backend::describe_ext::Guest for Exported<B, H>
{
    fn config_keys() -> Vec<String> {
        with_backend(|b: &B| b.config_keys())
    }
}

impl<B: DescribeFs, H: 'static>
    crate::describe_fs_bindings::exports::tether::backend::describe_fs::Guest for Exported<B, H>
{
    fn filesystem_keys() -> Vec<String> {
        with_backend(|b: &B| b.filesystem_keys())
    }
}

impl<B: DescribeNet, H: 'static>
    crate::describe_net_bindings::exports::tether::backend::describe_net::Guest for Exported<B, H>
{
    fn http_grants() -> Vec<HttpGrant> {
        with_backend(|b: &B| b.http_grants())
    }

    fn sql_keys() -> Vec<String> {
        with_backend(|b: &B| b.sql_keys())
    }
}
