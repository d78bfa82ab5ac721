//! `PIN`: pins are native refs `tether.<pin-id>` that hold a state: created
//! once (and say so), listed, verified, idempotent, immune to later writes,
//! and removable.

use tether::plugin::VerifyStatus;
use tether_contract::Capability;

use super::{Group, check};
use crate::context::{Ctx, Outcome, Step, ensure, expect_refused, show};

const CAPABILITY: &str = Capability::Pin.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("pin.create", create),
            check!("pin.list", list),
            check!("pin.verify-shallow", verify_shallow),
            check!("pin.verify-deep", verify_deep),
            check!("pin.idempotent", idempotent),
            check!("pin.protects-against-drift", protects_against_drift),
            check!("pin.other-state-refused", other_state_refused),
            check!("pin.unpin", unpin),
            check!("pin.verify-many", verify_many),
        ],
    }
}

async fn create(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let id = sys.pin_id(&state).await?;
    let pin = sys.pin(&state, &id).await.step(&format!("pin {id}"))?;
    ensure!(
        pin.created,
        "the first pin of {id} returned created = false; expected true"
    );
    ensure!(
        pin.id == id,
        "pin {id} returned id {:?}; expected the id given",
        pin.id
    );
    let base = format!("tether.{id}");
    ensure!(
        pin.ref_name == base || pin.ref_name.starts_with(&format!("{base}.")),
        "pin {id} returned ref {:?}; expected {base} (or a later generation {base}.N)",
        pin.ref_name
    );
    Ok(())
}

async fn list(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let pin = sys.pin_state(&sys.state(None).await?).await?;
    let pins = sys.list_pins().await.step("list-pins")?;
    ensure!(
        pins.contains(&pin.id),
        "list-pins returned {pins:?} after pinning {}; expected it listed",
        pin.id
    );
    ensure!(
        !pins.iter().any(|p| p.starts_with("tether.")),
        "list-pins returned {pins:?}; expected ids without the `tether.` prefix"
    );
    Ok(())
}

async fn verify_shallow(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let pin = sys.pin_state(&state).await?;
    let report = sys
        .verify(&state, Some(&pin), false)
        .await
        .step("verify (shallow)")?;
    ensure!(
        report.status == VerifyStatus::Ok,
        "shallow verify of a fresh pin returned {:?} ({}); expected ok",
        report.status,
        report.message
    );
    Ok(())
}

async fn verify_deep(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let pin = sys.pin_state(&state).await?;
    let report = sys
        .verify(&state, Some(&pin), true)
        .await
        .step("verify (deep)")?;
    ensure!(
        report.status == VerifyStatus::Ok,
        "deep verify of a fresh pin returned {:?} ({}); expected ok",
        report.status,
        report.message
    );
    Ok(())
}

async fn idempotent(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let first = sys.pin_state(&state).await?;
    let second = sys
        .pin(&state, &first.id)
        .await
        .step("a second pin of the same state")?;
    ensure!(
        !second.created,
        "a second pin of {} returned created = true; expected false (it found the ref)",
        first.id
    );
    ensure!(
        second.ref_name == first.ref_name,
        "a second pin of {} returned ref {:?}; expected the first one's, {:?}",
        first.id,
        second.ref_name,
        first.ref_name
    );
    Ok(())
}

/// A pin keeps its state while the branch it was taken from moves on.
async fn protects_against_drift(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let pin = sys.pin_state(&state).await?;
    sys.mutate(None).await?;
    sys.mutate(None).await?;
    for deep in [false, true] {
        let report = sys
            .verify(&state, Some(&pin), deep)
            .await
            .step("verify after writes to the base")?;
        ensure!(
            report.status == VerifyStatus::Ok,
            "{} verify of a pin after later writes to the base returned {:?} ({}); expected ok",
            if deep { "deep" } else { "shallow" },
            report.status,
            report.message
        );
    }
    let again = sys
        .pin(&state, &pin.id)
        .await
        .step("re-pin of the pinned state after writes")?;
    ensure!(
        !again.created,
        "re-pinning {} after writes to the base returned created = true; expected false",
        pin.id
    );
    Ok(())
}

/// A pin id that exists for one state cannot be pointed at another.
async fn other_state_refused(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let pin = sys.pin_state(&state).await?;
    sys.mutate(None).await?;
    let other = sys.state(None).await?;
    expect_refused(
        sys.pin(&other, &pin.id).await,
        &format!("pinning another state under the existing id {}", pin.id),
    )?;
    let report = sys
        .verify(&state, Some(&pin), false)
        .await
        .step("verify after the refused pin")?;
    ensure!(
        report.status == VerifyStatus::Ok,
        "after a refused pin of {} the pin verifies as {:?} ({}); expected it still at {}",
        pin.id,
        report.status,
        report.message,
        show(&ctx.content(&state))
    );
    Ok(())
}

async fn unpin(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let state = sys.state(None).await?;
    let pin = sys.pin_state(&state).await?;
    sys.unpin(&pin).await.step("unpin")?;
    let pins = sys.list_pins().await.step("list-pins after unpin")?;
    ensure!(
        !pins.contains(&pin.id),
        "list-pins still returns {} after unpin",
        pin.id
    );
    let report = sys
        .verify(&state, Some(&pin), false)
        .await
        .step("verify after unpin")?;
    ensure!(
        report.status == VerifyStatus::Missing,
        "verify of an unpinned pin returned {:?} ({}); expected missing",
        report.status,
        report.message
    );
    sys.unpin(&pin)
        .await
        .step("a second unpin (already gone is success)")?;
    Ok(())
}

/// Many pins checked together (`verify-many`, since 0.1.5; the host asks pin
/// by pin in one instance for a plugin without it) answer as each alone
/// does: a live pin ok, an unpinned one missing, in the order asked.
async fn verify_many(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let first = sys.state(None).await?;
    let kept = sys.pin_state(&first).await?;
    sys.mutate(None).await?;
    let second = sys.state(None).await?;
    let dropped = sys.pin_state(&second).await?;
    sys.unpin(&dropped).await.step("unpin")?;
    let asked = [
        (&first, &kept, VerifyStatus::Ok),
        (&second, &dropped, VerifyStatus::Missing),
        (&first, &kept, VerifyStatus::Ok),
    ];
    let empty = serde_json::Map::new();
    let items: Vec<_> = asked
        .iter()
        .map(|(state, pin, _)| (state.as_object().unwrap_or(&empty), Some((*pin).clone())))
        .collect();
    let how = if sys.plugin().has_verify_many() {
        "verify-many"
    } else {
        "verify of each pin in one instance (no verify-many export)"
    };
    for deep in [false, true] {
        let answers = sys.verify_batch(&items, deep).await.step(how)?;
        ensure!(
            answers.len() == asked.len(),
            "{how} gave {} answers for {} pins",
            answers.len(),
            asked.len()
        );
        for (n, ((state, pin, want), got)) in asked.iter().zip(answers).enumerate() {
            let got = got.step(&format!("{how}, pin {}", n + 1))?;
            let alone = sys
                .verify(state, Some(pin), deep)
                .await
                .step("verify of the same pin alone")?;
            ensure!(
                got.status == *want && alone.status == *want,
                "{} {how} of pin {} ({}) returned {:?} ({}), alone {:?} ({}); expected {want:?}",
                if deep { "deep" } else { "shallow" },
                n + 1,
                pin.ref_name,
                got.status,
                got.message,
                alone.status,
                alone.message
            );
        }
    }
    Ok(())
}
