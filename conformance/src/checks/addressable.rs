//! `ADDRESSABLE`: a recorded state opens without a pin, older ones included.

use tether::plugin::{Handle, Target};
use tether_contract::Capability;

use super::{Group, check};
use crate::context::{Ctx, Outcome, Step, ensure, show};

const CAPABILITY: &str = Capability::Addressable.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("addressable.open-current-state", open_current_state),
            check!("addressable.open-older-state", open_older_state),
        ],
    }
}

async fn open_current_state(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    sys.mutate(None).await?;
    let state = sys.state(None).await?;
    let handle = sys
        .open(&Target::Recorded(state.clone()), true)
        .await
        .step("open of the current state")?;
    ensure!(
        handle.read_only,
        "open(read_only = true) of a recorded state returned a writable handle"
    );
    Ok(())
}

/// What tells two handles apart: a handle on an older state must not be the
/// handle on the current one, or it cannot be reading the older state.
fn coordinates(h: &Handle) -> (String, String) {
    (h.address.clone(), show(&h.fields))
}

async fn open_older_state(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    sys.mutate(None).await?;
    let older = sys.state(None).await?;
    sys.mutate(None).await?;
    let current = sys.state(None).await?;
    let old = sys
        .open(&Target::Recorded(older.clone()), true)
        .await
        .step("open of an older recorded state")?;
    let new = sys
        .open(&Target::Recorded(current), true)
        .await
        .step("open of the current state")?;
    ensure!(
        coordinates(&old) != coordinates(&new),
        "the handles on an older and the current state are identical (address {:?}); expected the older state's own address",
        old.address
    );
    Ok(())
}
