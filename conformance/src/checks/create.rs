//! `CREATE` (experimental in the engine): the store lifecycle at a locator
//! where nothing exists yet: create with an owner marker, emptiness as the
//! engine's gc judges it, refusal to adopt, and deletion that re-checks.

use serde_json::Value;
use tether_contract::Capability;

use super::fork::BRANCH;
use super::{Group, check};
use crate::context::{Ctx, Outcome, Problem, Step, Sys, ensure, expect_refused, show};

const CAPABILITY: &str = Capability::Create.as_str();

/// An owner that is not the suite's dataset.
const STRANGER: &str = "conformance-stranger";

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("create.initial-state", initial_state),
            check!("create.is-ref-empty", is_ref_empty),
            check!("create.second-refused", second_refused),
            check!("create.delete-and-recreate", delete_and_recreate),
            check!("create.delete-rechecks", delete_rechecks),
        ],
    }
}

/// A store created at a fresh locator: (system, initial state).
async fn created(ctx: &Ctx) -> Result<(Sys, Value), Problem> {
    let sys = ctx.fresh_locator().await?;
    let state = sys
        .create(ctx.dataset())
        .await
        .step("create at a fresh locator")?;
    Ok((sys, state))
}

async fn expect_owner(sys: &Sys, want: Option<&str>, when: &str) -> Outcome {
    let got = sys.owner().await.step(&format!("owner {when}"))?;
    ensure!(
        got.as_deref() == want,
        "owner {when} returned {got:?}; expected {want:?}"
    );
    Ok(())
}

async fn expect_empty(sys: &Sys, ignoring: &[String], want: bool, when: &str) -> Outcome {
    let got = sys
        .is_ref_empty(ignoring)
        .await
        .step(&format!("is-ref-empty {when}"))?;
    ensure!(
        got == Some(want),
        "is-ref-empty(ignoring {ignoring:?}) {when} returned {got:?}; expected Some({want})"
    );
    Ok(())
}

async fn initial_state(ctx: Ctx) -> Outcome {
    let (sys, state) = created(&ctx).await?;
    expect_owner(&sys, Some(ctx.dataset()), "after create").await?;
    let base = sys.state(None).await?;
    ensure!(
        ctx.same(&base, &state),
        "create returned {} but the base fingerprints to {}; expected the initial state",
        show(&ctx.content(&state)),
        show(&ctx.content(&base))
    );
    Ok(())
}

/// Empty until a ref appears; a ref the caller is about to delete does not
/// count (`ignoring`).
async fn is_ref_empty(ctx: Ctx) -> Outcome {
    let (sys, state) = created(&ctx).await?;
    expect_empty(&sys, &[], true, "right after create").await?;
    let mut ignoring = Vec::new();
    if ctx.has(Capability::Pin.as_str()) {
        let pin = sys.pin_state(&state).await?;
        expect_empty(&sys, &[], false, "after a pin").await?;
        ignoring.push(pin.ref_name);
        expect_empty(&sys, &ignoring, true, "after a pin").await?;
    }
    if ctx.has(Capability::Fork.as_str()) {
        let (wr, _) = sys.fork_from(&state, BRANCH).await?;
        expect_empty(&sys, &ignoring, false, "after a fork").await?;
        ignoring.push(wr);
        expect_empty(&sys, &ignoring, true, "after a fork").await?;
    }
    Ok(())
}

async fn second_refused(ctx: Ctx) -> Outcome {
    let (sys, state) = created(&ctx).await?;
    expect_refused(
        sys.create(STRANGER).await,
        "a second create at the same locator",
    )?;
    expect_owner(&sys, Some(ctx.dataset()), "after a refused second create").await?;
    let base = sys.state(None).await?;
    ensure!(
        ctx.same(&base, &state),
        "a refused second create changed the store to {}",
        show(&ctx.content(&base))
    );
    Ok(())
}

async fn delete_and_recreate(ctx: Ctx) -> Outcome {
    let (sys, _) = created(&ctx).await?;
    sys.delete_store(ctx.dataset())
        .await
        .step("delete-store of an empty store")?;
    expect_owner(&sys, None, "after delete-store").await?;
    sys.create(ctx.dataset())
        .await
        .step("create after delete-store")?;
    expect_owner(&sys, Some(ctx.dataset()), "after create again").await?;
    Ok(())
}

/// `delete-store` checks the owner marker and emptiness itself, right before
/// deleting: the engine's earlier checks may be stale.
async fn delete_rechecks(ctx: Ctx) -> Outcome {
    let (sys, state) = created(&ctx).await?;
    expect_refused(
        sys.delete_store(STRANGER).await,
        "delete-store naming another owner",
    )?;
    expect_owner(&sys, Some(ctx.dataset()), "after a refused delete-store").await?;
    if ctx.has(Capability::Fork.as_str()) {
        sys.fork_from(&state, BRANCH).await?;
        expect_refused(
            sys.delete_store(ctx.dataset()).await,
            "delete-store of a store with a working branch",
        )?;
        expect_owner(
            &sys,
            Some(ctx.dataset()),
            "after a refused delete-store of a non-empty store",
        )
        .await?;
    }
    Ok(())
}
