//! `tether-conformance`: the conformance suite for tether backend plugins
//! (spec/13-writing-a-backend.md, "Conformance suite").
//!
//! A plugin that exports `tether:backend/harness` can make a fresh system,
//! write to it, and name a place where no store exists yet. The suite drives
//! the plugin's `backend` interface through the host runtime against such
//! systems and checks the contract per capability: the always-on fingerprint,
//! identity and pin-id rules, then one group of checks for each of `DIFF`,
//! `HISTORY`, `ADDRESSABLE`, `PIN`, `FORK`, `CONDITIONAL_REF`, `PROMOTE`,
//! `MERGE`, `CREATE` and `NEEDS_QUIESCENCE` the plugin's objects have.
//!
//! Every check is independent: it makes its own objects under its own scratch
//! URI, runs in its own task and under its own timeout, so a plugin that
//! crashes, hangs or misbehaves in one check fails that check only.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tether::plugin::Runtime;
//! let runtime = Runtime::global()?;
//! let plugin = runtime.load_file("plugin.wasm".as_ref()).await?;
//! let report = tether_conformance::run(plugin, &tether_conformance::Options::default()).await?;
//! assert!(report.success(), "{}", report.summary());
//! # Ok(()) }
//! ```

mod checks;
mod context;
mod report;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::{Value, json};
use tether::plugin::{BackendError, KNOWN_CAPABILITIES, Plugin};
use tether_contract::Capability;

pub use report::{CheckResult, Report, Status};

use checks::Group;
use context::{Problem, Shared};

/// The dataset id the suite computes pin ids with (`conformance.<hash>`) and
/// creates stores for.
pub const DEFAULT_DATASET: &str = "conformance";

/// Where the suite's systems live.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Scratch {
    /// A fresh temporary local directory, removed when the run ends.
    #[default]
    TempDir,
    /// A storage URI the host can open (`memory://NAME`, an absolute local
    /// path). The suite works under a per-run child of it, so runs never see
    /// each other's systems.
    Uri(String),
}

/// How to run the suite.
#[derive(Debug, Clone)]
pub struct Options {
    /// Capabilities to check (spec spelling, `FORK`); empty means all the
    /// plugin's objects have. The others are reported as skipped.
    pub only: Vec<String>,
    /// Where the harness makes its systems.
    pub scratch: Scratch,
    /// A database address the harness (and the objects it makes) may open
    /// under each of the plugin's `sql-keys` the locator leaves unset
    /// (`--scratch postgres://...`); the host keeps its password.
    pub sql_scratch: Option<String>,
    /// An HTTP service the harness and its objects may reach
    /// (`--scratch http://...`, an Iceberg REST catalog, an API): its URL
    /// goes under each of the plugin's HTTP grant keys (describe-net) the
    /// configuration leaves unset, as secrets.toml would put it, with
    /// `allow_http` beside it for a plain `http://` URL (named on the
    /// command line, so the user's choice).
    pub http_scratch: Option<String>,
    /// The `[backends.<kind>]` configuration passed to every call.
    pub config: Value,
    /// The dataset id pin ids are computed with and stores are created for.
    pub dataset: String,
    /// How many checks run at once.
    pub jobs: usize,
    /// How long one check may take in all; the runtime's per-call deadline
    /// normally stops a hung plugin long before this.
    pub check_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            only: Vec::new(),
            scratch: Scratch::TempDir,
            sql_scratch: None,
            http_scratch: None,
            config: json!({}),
            dataset: DEFAULT_DATASET.to_string(),
            jobs: 4,
            check_timeout: Duration::from_secs(300),
        }
    }
}

/// Why the suite could not run at all (as opposed to a check failing).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the conformance suite needs the plugin to export tether:backend/harness; \
         the {kind} plugin ({digest}) does not"
    )]
    NoHarness { kind: String, digest: String },
    #[error("unknown capability {0:?}; known capabilities: {known}", known = KNOWN_CAPABILITIES.join(", "))]
    UnknownCapability(String),
    #[error("cannot make a scratch directory for the suite: {0}")]
    Scratch(#[source] std::io::Error),
    /// `--only` named only capabilities the plugin does not have: nothing
    /// would run, which must not read as a pass.
    #[error(
        "nothing to check: the {kind} plugin does not have {wanted} (it declares {declared}; \
         its harness's objects have {tested}); run without --only, or with one of those"
    )]
    NotSelectable {
        kind: String,
        wanted: String,
        declared: String,
        tested: String,
    },
}

/// The spec spelling of a capability name given loosely (`fork`,
/// `conditional-ref`, `CONDITIONAL_REF`).
pub fn parse_capability(name: &str) -> Result<String, Error> {
    let upper = name.trim().to_ascii_uppercase().replace('-', "_");
    Capability::from_name(&upper)
        .map(|c| c.as_str().to_owned())
        .ok_or_else(|| Error::UnknownCapability(name.to_string()))
}

/// Whether a `--scratch` value is a database address (for the harness's
/// SQL scratch) rather than a storage URI.
pub fn is_sql_address(uri: &str) -> bool {
    let scheme = uri
        .split(':')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let family = scheme.split('+').next().unwrap_or_default();
    uri.contains(':')
        && matches!(
            family,
            "postgres" | "postgresql" | "mysql" | "mariadb" | "sqlite"
        )
}

/// Whether a `--scratch` value is an HTTP service's URL (for the harness's
/// HTTP grants) rather than a storage URI.
pub fn is_http_url(uri: &str) -> bool {
    let lower = uri.trim().to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// `config` with `url` under each of `url_keys` it leaves unset (dotted
/// keys nest: `catalog.uri`), and `allow_http = true` beside each key it
/// set for a plain `http://` URL.
pub fn with_http_scratch(config: &Value, url_keys: &[&str], url: &str) -> Value {
    fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
        v.get(key).or_else(|| {
            let (first, rest) = key.split_once('.')?;
            get(v.get(first)?, rest)
        })
    }
    fn set(v: &mut Value, key: &str, value: Value) {
        if !v.is_object() {
            *v = json!({});
        }
        let map = v.as_object_mut().expect("an object");
        match key.split_once('.') {
            Some((first, rest)) => set(
                map.entry(first.to_string()).or_insert_with(|| json!({})),
                rest,
                value,
            ),
            None => {
                map.insert(key.to_string(), value);
            }
        }
    }
    let mut out = config.clone();
    let plain = url.trim().to_ascii_lowercase().starts_with("http://");
    for key in url_keys {
        if get(&out, key).is_some() {
            continue;
        }
        set(&mut out, key, json!(url));
        if plain {
            let allow = match key.rsplit_once('.') {
                Some((parent, _)) => format!("{parent}.allow_http"),
                None => "allow_http".to_string(),
            };
            set(&mut out, &allow, json!(true));
        }
    }
    out
}

/// Run the suite against `plugin`.
pub async fn run(plugin: Arc<Plugin>, options: &Options) -> Result<Report, Error> {
    run_with(plugin, options, |_| {}).await
}

/// Run the suite, handing each result to `on_result` as soon as it (and every
/// result before it) is known, in report order.
pub async fn run_with(
    plugin: Arc<Plugin>,
    options: &Options,
    mut on_result: impl FnMut(&CheckResult),
) -> Result<Report, Error> {
    if !plugin.has_harness() {
        return Err(Error::NoHarness {
            kind: plugin.kind().to_string(),
            digest: plugin.digest().to_string(),
        });
    }
    let only = options
        .only
        .iter()
        .map(|c| parse_capability(c))
        .collect::<Result<Vec<_>, _>>()?;

    // The temp dir lives until the report is built; dropping it removes every
    // system the harness made.
    let (_temp, scratch_root) = match &options.scratch {
        Scratch::TempDir => {
            let dir = tempfile::Builder::new()
                .prefix("tether-conformance-")
                .tempdir()
                .map_err(Error::Scratch)?;
            // The host refuses relative paths, and a symlinked temp root (macOS
            // /var -> /private/var) would be judged by its resolved path.
            let path = dir.path().canonicalize().map_err(Error::Scratch)?;
            (Some(dir), path.display().to_string())
        }
        Scratch::Uri(uri) => (
            None,
            format!("{}/{}", uri.trim_end_matches('/'), run_nonce()),
        ),
    };

    let declared = plugin.descriptor().capabilities.clone();
    let shared = Arc::new(Shared {
        plugin: plugin.clone(),
        scratch_root,
        sql_scratch: options.sql_scratch.clone(),
        config: match &options.http_scratch {
            Some(url) => {
                let keys: Vec<&str> = plugin
                    .http_grants()
                    .iter()
                    .map(|g| g.url_key.as_str())
                    .collect();
                with_http_scratch(&options.config, &keys, url)
            }
            None => options.config.clone(),
        },
        dataset: options.dataset.clone(),
        capabilities: declared.clone(),
    });

    let mut results = Vec::new();
    let mut emit = |r: CheckResult, results: &mut Vec<CheckResult>| {
        on_result(&r);
        results.push(r);
    };

    // The harness may narrow (or, per object, widen) what the descriptor
    // declares: the suite checks what the harness's objects actually have.
    let tested = match effective_capabilities(&shared).await {
        Ok(caps) => caps,
        Err(reason) => {
            emit(
                CheckResult::fail("harness.effective-capabilities", "FINGERPRINT", reason),
                &mut results,
            );
            declared.clone()
        }
    };
    if !only.is_empty() && !only.iter().any(|c| tested.contains(c)) {
        let list = |caps: &[String]| {
            if caps.is_empty() {
                "none".to_string()
            } else {
                caps.join(" ")
            }
        };
        return Err(Error::NotSelectable {
            kind: plugin.kind().to_string(),
            wanted: only.join(" or "),
            declared: list(&declared),
            tested: list(&tested),
        });
    }
    let shared = Arc::new(Shared {
        capabilities: tested.clone(),
        ..Arc::unwrap_or_clone(shared)
    });

    enum Item {
        Done(CheckResult),
        Run(checks::Check),
    }
    let mut items = Vec::new();
    for group in checks::groups() {
        let Group { capability, checks } = group;
        let label = capability.to_ascii_lowercase();
        if !only.is_empty() && !only.iter().any(|c| c == capability) {
            items.push(Item::Done(CheckResult::skip(
                &label,
                capability,
                "not selected (--only)",
            )));
        } else if !tested.iter().any(|c| c == capability) {
            let reason = if declared.iter().any(|c| c == capability) {
                "declared, but the harness's objects do not have it (effective-capabilities)"
            } else {
                "not declared by the plugin"
            };
            items.push(Item::Done(CheckResult::skip(&label, capability, reason)));
        } else {
            items.extend(checks.into_iter().map(Item::Run));
        }
    }

    let jobs = options.jobs.max(1);
    let timeout = options.check_timeout;
    let mut stream = futures::stream::iter(items)
        .map(|item| {
            let shared = shared.clone();
            async move {
                match item {
                    Item::Done(r) => r,
                    Item::Run(check) => run_check(shared, check, timeout).await,
                }
            }
        })
        .buffered(jobs);
    while let Some(r) = stream.next().await {
        emit(r, &mut results);
    }
    drop(stream);

    Ok(Report {
        kind: plugin.kind().to_string(),
        digest: plugin.digest().to_string(),
        declared,
        tested,
        checks: results,
    })
}

/// One check in its own task, so a panic in it (a suite bug, or an assertion
/// deep in a client) fails that check rather than the run.
async fn run_check(shared: Arc<Shared>, check: checks::Check, timeout: Duration) -> CheckResult {
    let ctx = context::Ctx::new(shared, check.name);
    let task = tokio::spawn(tokio::time::timeout(timeout, (check.run)(ctx)));
    let outcome = match task.await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_elapsed)) => Err(Problem(format!(
            "the check did not finish within {timeout:?}"
        ))),
        Err(join) => Err(Problem(format!(
            "the check panicked: {}",
            panic_message(join)
        ))),
    };
    match outcome {
        Ok(()) => CheckResult::pass(check.name, check.capability),
        Err(Problem(reason)) => CheckResult::fail(check.name, check.capability, reason),
    }
}

fn panic_message(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".to_string()),
        Err(join) => join.to_string(),
    }
}

/// The capabilities of an object the harness makes, falling back to the
/// descriptor's for a plugin that leaves `effective-capabilities` out.
async fn effective_capabilities(shared: &Arc<Shared>) -> Result<Vec<String>, String> {
    let ctx = context::Ctx::new(shared.clone(), "harness.probe");
    let sys = ctx.new_object().await.map_err(|p| p.0)?;
    match sys.effective_capabilities(&json!({})).await {
        Ok(caps) => Ok(caps),
        Err(BackendError::Capability(_)) => Ok(shared.capabilities.clone()),
        Err(e) => Err(format!(
            "effective-capabilities on a harness object failed: {e}"
        )),
    }
}

/// A name no earlier run used: runs sharing a `memory://` bucket (one process)
/// or a directory must not see each other's systems.
fn run_nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "run-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_names_are_parsed_loosely() {
        assert_eq!(parse_capability("fork").unwrap(), "FORK");
        assert_eq!(
            parse_capability("conditional-ref").unwrap(),
            "CONDITIONAL_REF"
        );
        assert_eq!(
            parse_capability("CONDITIONAL_REF").unwrap(),
            "CONDITIONAL_REF"
        );
        assert!(matches!(
            parse_capability("teleport"),
            Err(Error::UnknownCapability(_))
        ));
    }

    #[test]
    fn an_http_scratch_fills_the_unset_grant_keys() {
        let config = json!({"catalog": {"type": "rest"}, "api": "https://set.invalid"});
        let out = with_http_scratch(
            &config,
            &["catalog.uri", "api", "flat"],
            "http://127.0.0.1:8181/v1",
        );
        assert_eq!(
            out,
            json!({
                "catalog": {"type": "rest", "uri": "http://127.0.0.1:8181/v1", "allow_http": true},
                "api": "https://set.invalid",
                "flat": "http://127.0.0.1:8181/v1",
                "allow_http": true,
            })
        );
        let out = with_http_scratch(&json!({}), &["catalog.uri"], "https://cat.invalid");
        assert_eq!(out, json!({"catalog": {"uri": "https://cat.invalid"}}));
        assert!(is_http_url("HTTPS://x") && !is_http_url("s3://b") && !is_http_url("/tmp"));
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(run_nonce(), run_nonce());
    }
}
