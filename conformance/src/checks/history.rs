//! `HISTORY`: native history, newest first, whose ids work as the locator's
//! `at` (so users can register an object at any listed state).

use tether::plugin::HistoryEntry;
use tether_contract::Capability;

use super::{Group, check};
use crate::context::{Ctx, Outcome, Problem, Step, Sys, ensure, fail, show};

const CAPABILITY: &str = Capability::History.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("history.newest-is-current", newest_is_current),
            check!(
                "history.older-entry-is-another-state",
                older_entry_is_another_state
            ),
            check!("history.limit-bounds", limit_bounds),
        ],
    }
}

async fn history(sys: &Sys, limit: u32) -> Result<Vec<HistoryEntry>, Problem> {
    sys.history(None, limit)
        .await
        .step(&format!("history (limit {limit})"))
}

/// The fingerprint of the object registered `at` a history id.
async fn state_at(sys: &Sys, id: &str) -> Result<serde_json::Value, Problem> {
    sys.at(id)?
        .fingerprint(None)
        .await
        .step(&format!("fingerprint with at = {id:?}"))
}

async fn newest_is_current(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    sys.mutate(None).await?;
    let current = sys.state(None).await?;
    let entries = history(&sys, 10).await?;
    let Some(newest) = entries.first() else {
        fail!("history is empty after a write; expected the current state first")
    };
    let at = state_at(&sys, &newest.id).await?;
    ensure!(
        ctx.same(&at, &current),
        "the newest history entry {:?} fingerprints (as `at`) to {}; expected the current state {}",
        newest.id,
        show(&ctx.content(&at)),
        show(&ctx.content(&current))
    );
    Ok(())
}

async fn older_entry_is_another_state(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    sys.mutate(None).await?;
    let older = sys.state(None).await?;
    sys.mutate(None).await?;
    let current = sys.state(None).await?;
    let entries = history(&sys, 10).await?;
    ensure!(
        entries.len() >= 2,
        "history has {} entries after two writes; expected at least 2",
        entries.len()
    );
    let at = state_at(&sys, &entries[1].id).await?;
    ensure!(
        !ctx.same(&at, &current),
        "the second history entry {:?} fingerprints to the current state; expected the state before the last write",
        entries[1].id
    );
    ensure!(
        ctx.same(&at, &older),
        "the second history entry {:?} fingerprints to {}; expected the state before the last write, {}",
        entries[1].id,
        show(&ctx.content(&at)),
        show(&ctx.content(&older))
    );
    Ok(())
}

async fn limit_bounds(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    for _ in 0..3 {
        sys.mutate(None).await?;
    }
    let all = history(&sys, 100).await?;
    ensure!(
        all.len() >= 3,
        "history has {} entries after three writes; expected at least 3",
        all.len()
    );
    for limit in [1u32, 2] {
        let got = history(&sys, limit).await?;
        ensure!(
            got.len() == limit as usize,
            "history with limit {limit} returned {} entries; expected {limit}",
            got.len()
        );
        let ids: Vec<&str> = got.iter().map(|e| e.id.as_str()).collect();
        let want: Vec<&str> = all
            .iter()
            .take(limit as usize)
            .map(|e| e.id.as_str())
            .collect();
        ensure!(
            ids == want,
            "history with limit {limit} returned {ids:?}; expected the newest entries {want:?}"
        );
    }
    Ok(())
}
