//! `DIFF`: a state diffed with itself is empty; a write shows up.

use serde_json::Value;
use tether::plugin::{BackendError, ObjectDiff};
use tether_contract::Capability;

use super::{Group, check};
use crate::context::{Ctx, Outcome, Problem, Step, Sys, ensure};

const CAPABILITY: &str = Capability::Diff.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("diff.self-empty", self_empty),
            check!("diff.non-empty-after-mutate", non_empty_after_mutate),
        ],
    }
}

/// The listing the engine would have stored for `state`. `listing` is
/// optional (a backend whose states diff on their own has none), so "not
/// supported" is no listing, as the engine treats it.
async fn listing(sys: &Sys, state: &Value) -> Result<Option<String>, Problem> {
    match sys.listing(state).await {
        Err(BackendError::Capability(_)) => Ok(None),
        other => other.step("listing"),
    }
}

/// Diff two states as the engine does: with both stored listings.
async fn diff(sys: &Sys, a: &Value, b: &Value) -> Result<ObjectDiff, Problem> {
    let la = listing(sys, a).await?;
    let lb = listing(sys, b).await?;
    sys.diff(a, b, la.as_deref(), lb.as_deref())
        .await
        .step("diff")
}

fn counts(d: &ObjectDiff) -> String {
    format!(
        "{} added, {} removed, {} modified {}",
        d.added, d.removed, d.modified, d.unit
    )
}

async fn self_empty(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    sys.mutate(None).await?;
    let state = sys.state(None).await?;
    let d = diff(&sys, &state, &state).await?;
    ensure!(
        d.is_empty(),
        "diff of a state with itself reports {}; expected nothing",
        counts(&d)
    );
    Ok(())
}

async fn non_empty_after_mutate(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let before = sys.state(None).await?;
    sys.mutate(None).await?;
    let after = sys.state(None).await?;
    let d = diff(&sys, &before, &after).await?;
    ensure!(
        !d.is_empty(),
        "diff across a write reports no change ({}); expected at least one",
        counts(&d)
    );
    Ok(())
}
