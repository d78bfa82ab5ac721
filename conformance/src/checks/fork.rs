//! `FORK`: writable branches from a pin (or a recorded state), the reset
//! contract, conditional moves (`expected`), deletion and listing.

use serde_json::Value;
use tether::plugin::{BackendError, Expected};
use tether_contract::Capability;

use super::{Group, check};
use crate::context::{Ctx, Outcome, Step, describe_error, ensure, expect_ref_moved, fail, show};

const CAPABILITY: &str = Capability::Fork.as_str();

/// Branch names live under `tether.ws.` (`WORKING_REF_PREFIX`), the namespace
/// `list-working-refs` reports.
pub(crate) const BRANCH: &str = "tether.ws.conformance.a";
const OTHER_BRANCH: &str = "tether.ws.conformance.b";

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("fork.fresh-equals-pin", fresh_equals_pin),
            check!("fork.writes-leave-base-alone", writes_leave_base_alone),
            check!("fork.reset-moves-back", reset_moves_back),
            check!("fork.reset-leaves-alone", reset_leaves_alone),
            check!("fork.stale-expected-refused", stale_expected_refused),
            check!(
                "fork.absent-onto-existing-refused",
                absent_onto_existing_refused
            ),
            check!("fork.delete-working-ref", delete_working_ref),
            check!("fork.list-working-refs", list_working_refs),
        ],
    }
}

async fn fresh_equals_pin(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    sys.mutate(None).await?;
    let state = sys.state(None).await?;
    let (wr, _) = sys.fork_from(&state, BRANCH).await?;
    let head = sys.state(Some(&wr)).await?;
    ensure!(
        ctx.same(&head, &state),
        "a fresh fork is at {}; expected the source state {}",
        show(&ctx.content(&head)),
        show(&ctx.content(&state))
    );
    Ok(())
}

async fn writes_leave_base_alone(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let (wr, _) = sys.fork_from(&state, BRANCH).await?;
    sys.mutate(Some(&wr)).await?;
    let head = sys.state(Some(&wr)).await?;
    ensure!(
        !ctx.same(&head, &state),
        "a write to working ref {wr} did not change its fingerprint"
    );
    let base = sys.state(None).await?;
    ensure!(
        ctx.same(&base, &state),
        "a write to working ref {wr} moved the base from {} to {}; expected the base left alone",
        show(&ctx.content(&state)),
        show(&ctx.content(&base))
    );
    Ok(())
}

/// Forking onto an existing branch that has moved on resets it to the source.
async fn reset_moves_back(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let (wr, source) = sys.fork_from(&state, BRANCH).await?;
    sys.mutate(Some(&wr)).await?;
    let again = sys
        .fork(&source, BRANCH, &Expected::Unconditional)
        .await
        .step("a second fork onto the advanced branch")?;
    let head = sys.state(Some(&again)).await?;
    ensure!(
        ctx.same(&head, &state),
        "forking onto advanced branch {wr} left it at {}; expected it reset to the source {}",
        show(&ctx.content(&head)),
        show(&ctx.content(&state))
    );
    Ok(())
}

/// Forking onto a branch already at the source leaves it there.
async fn reset_leaves_alone(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let (wr, source) = sys.fork_from(&state, BRANCH).await?;
    let again = sys
        .fork(&source, BRANCH, &Expected::At(state.clone()))
        .await
        .step("a second fork onto a branch already at the source")?;
    // A backend may hand back a sibling ref (spec: "may pick a sibling if
    // name is taken"), so both the branch and what was returned must hold the
    // source.
    for r in [&wr, &again] {
        let head = sys.state(Some(r)).await?;
        ensure!(
            ctx.same(&head, &state),
            "a second fork onto a branch already at the source left {r} at {}; expected {}",
            show(&ctx.content(&head)),
            show(&ctx.content(&state))
        );
    }
    Ok(())
}

/// `expected` names a head the branch no longer has: refused, nothing moved.
async fn stale_expected_refused(ctx: Ctx) -> Outcome {
    // The branch has moved past `state`; the caller reviewed `state`. A reset
    // would move it back to `state`, so "nothing moved" is visible.
    refused_fork_moves_nothing(ctx, Expected::At, "a fork with a stale expected head").await
}

/// `expected` says the branch is absent, but it exists: refused, nothing moved.
async fn absent_onto_existing_refused(ctx: Ctx) -> Outcome {
    refused_fork_moves_nothing(
        ctx,
        |_| Expected::Absent,
        "a fork expecting absent onto an existing branch",
    )
    .await
}

/// Fork a branch and write to it, then fork again from the same source with
/// the `expected` that `expected_for(fork source state)` gives: the store must
/// refuse with `ref-moved` and leave the branch at its head.
async fn refused_fork_moves_nothing(
    ctx: Ctx,
    expected_for: impl FnOnce(Value) -> Expected,
    what: &str,
) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let (wr, source) = sys.fork_from(&state, BRANCH).await?;
    sys.mutate(Some(&wr)).await?;
    let head = sys.state(Some(&wr)).await?;
    expect_ref_moved(sys.fork(&source, BRANCH, &expected_for(state)).await, what)?;
    let after = sys.state(Some(&wr)).await?;
    ensure!(
        ctx.same(&after, &head),
        "a refused fork moved {wr} from {} to {}; expected nothing moved",
        show(&ctx.content(&head)),
        show(&ctx.content(&after))
    );
    Ok(())
}

async fn delete_working_ref(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let (wr, _) = sys.fork_from(&state, BRANCH).await?;
    sys.delete_working_ref(&wr)
        .await
        .step("delete-working-ref")?;
    match sys.fingerprint(Some(&wr)).await {
        Ok(s) => fail!(
            "fingerprint of deleted working ref {wr} returned {}; expected an error",
            show(&s)
        ),
        Err(e) if e.is_contained_fault() => {
            fail!(
                "fingerprint of deleted working ref {wr} failed with {}",
                describe_error(&e)
            )
        }
        Err(_) => {}
    }
    let refs = sys
        .list_working_refs()
        .await
        .step("list-working-refs after delete")?;
    ensure!(
        !refs.contains(&wr),
        "list-working-refs still returns {wr} after delete-working-ref: {refs:?}"
    );
    sys.delete_working_ref(&wr)
        .await
        .step("a second delete-working-ref (already gone is success)")?;
    let base = sys.state(None).await?;
    ensure!(ctx.same(&base, &state), "delete-working-ref moved the base");
    Ok(())
}

async fn list_working_refs(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let (a, _) = sys.fork_from(&state, BRANCH).await?;
    let (b, _) = sys.fork_from(&state, OTHER_BRANCH).await?;
    let refs = sys.list_working_refs().await.step("list-working-refs")?;
    for wr in [&a, &b] {
        ensure!(
            refs.contains(wr),
            "list-working-refs returned {refs:?}; expected it to include {wr}"
        );
    }
    let stray: Vec<&String> = refs
        .iter()
        .filter(|r| !r.starts_with("tether.ws."))
        .collect();
    ensure!(
        stray.is_empty(),
        "list-working-refs returned {stray:?}; expected only tether.ws.* branches"
    );
    Ok(())
}

/// Whether an error is `ref-moved`, for checks counting outcomes.
pub(crate) fn is_ref_moved(e: &BackendError) -> bool {
    matches!(e, BackendError::RefMoved(_))
}
