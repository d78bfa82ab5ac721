//! `NEEDS_QUIESCENCE`: `check-quiescence` lets an idle system through (the
//! engine calls it before every pin, so a false alarm blocks every commit).

use super::{Group, check};
use crate::context::{Ctx, Outcome, Step};
use tether_contract::Capability;

const CAPABILITY: &str = Capability::NeedsQuiescence.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![check!("needs_quiescence.idle-ok", idle_ok)],
    }
}

async fn idle_ok(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    sys.mutate(None).await?;
    sys.check_quiescence(None)
        .await
        .step("check-quiescence of an idle system")?;
    Ok(())
}
