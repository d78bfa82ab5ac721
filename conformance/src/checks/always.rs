//! What every backend must do (`FINGERPRINT`): a stable fingerprint that
//! changes with the content, a deterministic identity, and through both a
//! deterministic pin id.

use super::{Group, check};
use crate::context::{Ctx, Outcome, Step, ensure, show};
use tether_contract::Capability;

const CAPABILITY: &str = Capability::Fingerprint.as_str();

pub(super) fn group() -> Group {
    Group {
        capability: CAPABILITY,
        checks: vec![
            check!("fingerprint.stable", stable),
            check!("fingerprint.changes-after-mutate", changes_after_mutate),
            check!("fingerprint.identity-deterministic", identity_deterministic),
            check!("fingerprint.pin-id-deterministic", pin_id_deterministic),
            check!(
                "fingerprint.describe-meta-well-formed",
                describe_meta_well_formed
            ),
        ],
    }
}

/// Two fingerprints of an unchanged system name the same content.
async fn stable(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let a = sys.state(None).await?;
    let b = sys.state(None).await?;
    ensure!(
        ctx.same(&a, &b),
        "two fingerprints of an unchanged system differ: {} then {}; expected equal content keys",
        show(&ctx.content(&a)),
        show(&ctx.content(&b))
    );
    Ok(())
}

/// A write changes the content the fingerprint names.
async fn changes_after_mutate(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let before = sys.state(None).await?;
    sys.mutate(None).await?;
    let after = sys.state(None).await?;
    ensure!(
        !ctx.same(&before, &after),
        "the fingerprint did not change after a write to the base: {} both times",
        show(&ctx.content(&after))
    );
    Ok(())
}

/// The identity is the same on every call and does not follow the content
/// (it names the system, and is hashed into pin ids).
async fn identity_deterministic(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let a = sys.identity().await.step("identity")?;
    let b = sys.identity().await.step("identity (second call)")?;
    ensure!(
        a == b,
        "two identity calls disagree: {} then {}",
        show(&a),
        show(&b)
    );
    sys.mutate(None).await?;
    let c = sys.identity().await.step("identity after a write")?;
    ensure!(
        a == c,
        "the identity changed after a write: {} then {}; it must name the system, not its state",
        show(&a),
        show(&c)
    );
    Ok(())
}

/// The engine's pin id (dataset, kind, identity, content state) comes out
/// the same from separate calls, and differs once the content does.
async fn pin_id_deterministic(ctx: Ctx) -> Outcome {
    let sys = ctx.new_object().await?;
    let first = sys.pin_id(&sys.state(None).await?).await?;
    let second = sys.pin_id(&sys.state(None).await?).await?;
    ensure!(
        first == second,
        "the pin id of an unchanged system came out as {first} then {second}"
    );
    ensure!(
        first.starts_with(&format!("{}.", ctx.dataset())),
        "pin id {first} is not namespaced by the dataset"
    );
    sys.mutate(None).await?;
    let third = sys.pin_id(&sys.state(None).await?).await?;
    ensure!(
        third != first,
        "the pin id stayed {first} after a write; expected a new id for new content"
    );
    Ok(())
}

/// `describe-meta` (since 0.1.5), when the plugin exports it, names the
/// plugin with a semver version, and says nothing the host would have to cut
/// or strip before showing it (control characters, over-long fields). A
/// plugin without it passes: it is optional.
async fn describe_meta_well_formed(ctx: Ctx) -> Outcome {
    let Some(given) = ctx.plugin().meta_as_given().await.step("describe-meta")? else {
        return Ok(());
    };
    ensure!(
        !given.name.trim().is_empty(),
        "describe-meta gave an empty name; expected the plugin's name (its crate's)"
    );
    ensure!(
        semver::Version::parse(&given.version).is_ok(),
        "describe-meta gave version {}; expected a semver version (1.2.3)",
        show(&serde_json::json!(given.version))
    );
    let shown = given.clone().bounded();
    ensure!(
        shown == given,
        "describe-meta gave {}, which tether shows as {}: a field holds control characters, \
         surrounding blanks or empty values, or is longer than tether shows",
        show(&serde_json::json!(given)),
        show(&serde_json::json!(shown))
    );
    Ok(())
}
