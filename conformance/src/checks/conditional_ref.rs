//! `CONDITIONAL_REF`: `fork` honours `expected` in one atomic step. Eight
//! tasks race to move one branch from the head they all reviewed onto eight
//! different sources; exactly one may win.

use tether::plugin::{BackendError, Expected};
use tether_contract::Capability;

use super::fork::{BRANCH, is_ref_moved};
use super::{Group, check};
use crate::context::{Ctx, Outcome, describe_error, ensure, fail, show};

const CAPABILITY: &str = Capability::ConditionalRef.as_str();

/// How many forks race.
const RACERS: usize = 8;

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![check!("conditional_ref.one-winner", one_winner)],
    }
}

async fn one_winner(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let start = sys.state(None).await?;
    let (wr, _) = sys.fork_from(&start, BRANCH).await?;
    let reviewed = sys.state(Some(&wr)).await?;

    // Eight distinct sources: successive states of the base.
    let mut sources = Vec::with_capacity(RACERS);
    for _ in 0..RACERS {
        sys.mutate(None).await?;
        let state = sys.state(None).await?;
        let (target, _) = sys.source(&state).await?;
        sources.push((state, target));
    }

    // Every call runs in its own instance; spawned tasks make the race real
    // on a multi-threaded runtime.
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(RACERS));
    let tasks: Vec<_> = sources
        .iter()
        .map(|(_, target)| {
            let client = sys.client();
            let (target, expected, barrier) = (
                target.clone(),
                Expected::At(reviewed.clone()),
                barrier.clone(),
            );
            tokio::spawn(async move {
                barrier.wait().await;
                client.fork(&target, BRANCH, &expected).await
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut moved = 0;
    let mut others: Vec<BackendError> = Vec::new();
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await {
            Ok(Ok(_)) => winners.push(i),
            Ok(Err(e)) if is_ref_moved(&e) => moved += 1,
            Ok(Err(e)) => others.push(e),
            Err(join) => fail!("a racing fork task failed: {join}"),
        }
    }
    if let Some(e) = others.first() {
        fail!(
            "{} of {RACERS} racing forks failed with something other than RefMovedError, first: {}",
            others.len(),
            describe_error(e)
        );
    }
    ensure!(
        winners.len() == 1,
        "{} of {RACERS} forks succeeded; expected exactly 1 (the others RefMovedError, {moved} were)",
        winners.len()
    );
    let (won, _) = &sources[winners[0]];
    let head = sys.state(Some(&wr)).await?;
    ensure!(
        ctx.same(&head, won),
        "after the race the branch is at {}; expected the winning fork's source {}",
        show(&ctx.content(&head)),
        show(&ctx.content(won))
    );
    Ok(())
}
