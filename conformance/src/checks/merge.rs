//! `MERGE`: a three-way merge of a fork into a base that moved too,
//! conditional on the base head the plan reviewed.

use tether::plugin::{BackendError, Expected, Target};
use tether_contract::Capability;

use super::fork::BRANCH;
use super::{Group, check};
use crate::context::{
    Ctx, Outcome, Problem, Sys, describe_error, ensure, expect_ref_moved, fail, show,
};

const CAPABILITY: &str = Capability::Merge.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("merge.diverged-sides", diverged_sides),
            check!("merge.stale-expected-refused", stale_expected_refused),
        ],
    }
}

/// A base and a fork with one write each since the fork point: (system, fork
/// point, base head, fork head).
async fn diverged(
    ctx: &Ctx,
) -> Result<(Sys, serde_json::Value, serde_json::Value, serde_json::Value), Problem> {
    let sys = ctx.new_object().await?;
    let start = sys.state(None).await?;
    let (wr, _) = sys.fork_from(&start, BRANCH).await?;
    sys.mutate(None).await?;
    sys.mutate(Some(&wr)).await?;
    let base = sys.state(None).await?;
    let fork = sys.state(Some(&wr)).await?;
    Ok((sys, start, base, fork))
}

/// The engine merges the state its plan reviewed, not the branch head (spec:
/// "merge that commit"), so the source is the fork's recorded head.
async fn diverged_sides(ctx: Ctx) -> Outcome {
    let (sys, _, base, fork) = diverged(&ctx).await?;
    let merged = match sys
        .merge(
            &Target::Recorded(fork.clone()),
            "conformance merge",
            &Expected::At(base.clone()),
        )
        .await
    {
        Ok(state) => state,
        Err(BackendError::MergeConflict(units)) => fail!(
            "merging two sides with different writes conflicted on {units:?}; expected a clean merge \
             (or the harness's writes collide)"
        ),
        Err(e) => fail!("merge of two diverged sides failed: {}", describe_error(&e)),
    };
    let now = sys.state(None).await?;
    ensure!(
        ctx.same(&now, &merged),
        "merge returned {} but the base is at {}",
        show(&ctx.content(&merged)),
        show(&ctx.content(&now))
    );
    ensure!(
        !ctx.same(&now, &base),
        "after the merge the base is still at its old head; expected a merge result"
    );
    ensure!(
        !ctx.same(&now, &fork),
        "after the merge the base equals the fork's head; expected both sides' writes"
    );
    Ok(())
}

async fn stale_expected_refused(ctx: Ctx) -> Outcome {
    let (sys, start, base, fork) = diverged(&ctx).await?;
    // The plan reviewed the fork point; the base has moved on since.
    expect_ref_moved(
        sys.merge(
            &Target::Recorded(fork),
            "conformance merge",
            &Expected::At(start),
        )
        .await,
        "merge with a stale expected base head",
    )?;
    let now = sys.state(None).await?;
    ensure!(
        ctx.same(&now, &base),
        "a refused merge moved the base from {} to {}",
        show(&ctx.content(&base)),
        show(&ctx.content(&now))
    );
    Ok(())
}
