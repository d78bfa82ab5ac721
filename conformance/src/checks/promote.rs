//! `PROMOTE`: fast-forward the base to a fork, conditional on the base head
//! the plan reviewed; refuse when the base moved; `ancestor_of` in the right
//! direction.

use tether::plugin::{Expected, Target};
use tether_contract::Capability;

use super::fork::BRANCH;
use super::{Group, check};
use crate::context::{
    Ctx, Outcome, Problem, Step, Sys, ensure, expect_ref_moved, expect_refused, show,
};

const CAPABILITY: &str = Capability::Promote.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("promote.base-follows-fork", base_follows_fork),
            check!("promote.second-is-noop", second_is_noop),
            check!("promote.moved-base-refused", moved_base_refused),
            check!("promote.stale-expected-refused", stale_expected_refused),
            check!("promote.ancestor-of", ancestor_of),
        ],
    }
}

/// A system whose fork has one write the base does not: (system, base state,
/// working ref, fork head).
async fn advanced_fork(
    ctx: &Ctx,
) -> Result<(Sys, serde_json::Value, String, serde_json::Value), Problem> {
    let sys = ctx.new_object().await?;
    let base = sys.state(None).await?;
    let (wr, _) = sys.fork_from(&base, BRANCH).await?;
    sys.mutate(Some(&wr)).await?;
    let head = sys.state(Some(&wr)).await?;
    Ok((sys, base, wr, head))
}

async fn base_follows_fork(ctx: Ctx) -> Outcome {
    let (sys, base, wr, head) = advanced_fork(&ctx).await?;
    let returned = sys
        .promote(&Target::WorkingRef(wr.clone()), &Expected::At(base))
        .await
        .step("promote")?;
    ensure!(
        ctx.same(&returned, &head),
        "promote returned {}; expected the fork's head {}",
        show(&ctx.content(&returned)),
        show(&ctx.content(&head))
    );
    let now = sys.state(None).await?;
    ensure!(
        ctx.same(&now, &head),
        "after promote the base is at {}; expected the fork's head {}",
        show(&ctx.content(&now)),
        show(&ctx.content(&head))
    );
    Ok(())
}

async fn second_is_noop(ctx: Ctx) -> Outcome {
    let (sys, base, wr, head) = advanced_fork(&ctx).await?;
    let source = Target::WorkingRef(wr.clone());
    sys.promote(&source, &Expected::At(base))
        .await
        .step("promote")?;
    let again = sys
        .promote(&source, &Expected::At(head.clone()))
        .await
        .step("a second promote of the same fork")?;
    ensure!(
        ctx.same(&again, &head),
        "a second promote returned {}; expected the base unchanged at {}",
        show(&ctx.content(&again)),
        show(&ctx.content(&head))
    );
    let now = sys.state(None).await?;
    ensure!(
        ctx.same(&now, &head),
        "a second promote moved the base to {}",
        show(&ctx.content(&now))
    );
    Ok(())
}

/// The base moved after the fork: it is no ancestor of the fork's head, so a
/// fast-forward is impossible (even though `expected` is current).
async fn moved_base_refused(ctx: Ctx) -> Outcome {
    let (sys, _, wr, _) = advanced_fork(&ctx).await?;
    sys.mutate(None).await?;
    let moved = sys.state(None).await?;
    expect_refused(
        sys.promote(
            &Target::WorkingRef(wr.clone()),
            &Expected::At(moved.clone()),
        )
        .await,
        "promote onto a base that moved since the fork",
    )?;
    let now = sys.state(None).await?;
    ensure!(
        ctx.same(&now, &moved),
        "a refused promote moved the base from {} to {}",
        show(&ctx.content(&moved)),
        show(&ctx.content(&now))
    );
    Ok(())
}

/// The base did not move, but the plan reviewed another head: refused as
/// ref-moved, though the fast-forward itself would be fine.
async fn stale_expected_refused(ctx: Ctx) -> Outcome {
    let (sys, base, wr, head) = advanced_fork(&ctx).await?;
    expect_ref_moved(
        sys.promote(&Target::WorkingRef(wr.clone()), &Expected::At(head))
            .await,
        "promote with a stale expected base head",
    )?;
    let now = sys.state(None).await?;
    ensure!(
        ctx.same(&now, &base),
        "a refused promote moved the base from {} to {}",
        show(&ctx.content(&base)),
        show(&ctx.content(&now))
    );
    Ok(())
}

async fn ancestor_of(ctx: Ctx) -> Outcome {
    let (sys, base, _, head) = advanced_fork(&ctx).await?;
    let forward = sys
        .ancestor_of(&base, &head)
        .await
        .step("ancestor-of(base, fork head)")?;
    ensure!(
        forward != Some(false),
        "ancestor-of(base, fork head) returned false; expected true (the fork was made from the base) or none"
    );
    let backward = sys
        .ancestor_of(&head, &base)
        .await
        .step("ancestor-of(fork head, base)")?;
    ensure!(
        backward != Some(true),
        "ancestor-of(fork head, base) returned true; expected false (the base predates the fork's write) or none"
    );
    Ok(())
}
