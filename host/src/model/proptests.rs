//! Property tests of every parser that reads bytes a clone, a store or a
//! checkout's cache can hold (issue 29): manifests, `tether.toml`,
//! `workspace.toml`, `secrets.toml`, `ops.jsonl`, plan files, listings, the
//! history memo and plugin descriptors. Each must return (an error is fine)
//! on arbitrary bytes and on mutations of a valid file, never panic; where
//! tether writes the format too, what parses writes back to text that
//! parses to the same value. Cases are few and inputs small, so the whole
//! set runs in seconds in CI; `cargo xtask fuzz` runs the same parsers for
//! as long as one likes (`fuzz/`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::engine::history::{ManifestSet, decode_memo, encode_memo};
use crate::model::config::{Config, default_file_text};
use crate::model::listing::{self, ListingEntry};
use crate::model::manifest::{Manifest, Origin, Pin};
use crate::model::policy::{FileMode, PinMode, Policy};
use crate::model::secrets::Secrets;
use crate::model::workspace::WorkspaceState;
use crate::oplog::Journal;
use crate::plan::{Action, Plan, verb};
use crate::plugin::parse_descriptor;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 96,
        // Failures are reported with their input; no regression files are
        // written into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A valid file changed in a few places: bytes replaced, inserted, removed,
/// or the file cut short. Most mutations land in the parser's deeper paths,
/// which arbitrary bytes rarely reach.
fn mutated(valid: String) -> impl Strategy<Value = Vec<u8>> {
    let len = valid.len().max(1);
    let edit = (0..len, any::<u8>(), 0u8..4);
    prop::collection::vec(edit, 1..6).prop_map(move |edits| {
        let mut bytes = valid.clone().into_bytes();
        for (at, byte, how) in edits {
            let at = at.min(bytes.len());
            match how {
                0 if at < bytes.len() => bytes[at] = byte,
                1 => bytes.insert(at, byte),
                2 if at < bytes.len() => {
                    bytes.remove(at);
                }
                _ => bytes.truncate(at),
            }
        }
        bytes
    })
}

/// Arbitrary bytes, or a mutation of one of `seeds`.
fn input(seeds: Vec<String>) -> BoxedStrategy<Vec<u8>> {
    let arbitrary = prop::collection::vec(any::<u8>(), 0..512).boxed();
    let mut options = vec![arbitrary];
    for s in seeds {
        options.push(mutated(s).boxed());
    }
    proptest::strategy::Union::new(options).boxed()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const MANIFEST: &str = r#"kind = "icechunk"
recoverable = true
captured_at = "2026-09-04T22:10:03.118Z"

[locator]
branch = "main"
uri = "s3://lab/greetings.icechunk"
opts = { depth = 3, ratio = 0.5, tags = ["a", 1, true] }

[policy]
file = "versioned"
pin = "native"

[state]
snapshot_id = "K3F7Q2ZJ1XN4Y8W0"

[pin]
id = "0a1b2c3d.e7a279c1973a37ef"
ref = "tether.0a1b2c3d.e7a279c1973a37ef.2"
created = false
"#;

const CONFIG: &str = super::config::FULL_CONFIG;

const WORKSPACE: &str = r#"workspace_id = "7c1e0a4d9b2e4f6a8c1d3e5f7a9b0c2d"
bookmark = "relabel"
last_snapshot_at = "2026-09-04T22:10:03.118Z"

[working_refs]
"db/metrics" = "tether.ws.0a1b2c3d.relabel"

[pending_forks]
features = "tether.ws.0a1b2c3d.relabel"

[pending_resets.features]
version = 9

[base_states."zarr/imaging"]
snapshot_id = "K3F7Q2ZJ1XN4Y8W0"

[last_snapshot_errors."db/metrics"]
error = "connection refused"
ref = ""
"#;

const SECRETS: &str = r#"[vcs]
jj_path = "/usr/bin/jj"

[plugins]
trusted = ["sha256:0000000000000000000000000000000000000000000000000000000000000000"]

[backends.icechunk.storage_options]
region = "us-east-1"
"#;

const LISTING: &str = "{\"k\":\"ab12\",\"p\":\"a.tif\",\"s\":3}\n{\"k\":\"cd34\",\"p\":\"dir/b \\u001b.tif\",\"s\":0}\n\n";

const OPS: &str = r#"{"id":"65f0a1b2c3d4","at":"2026-09-04T22:10:03Z","command":"commit","plan":null,"pre":{"bookmark":"main"}}
{"progress":"65f0a1b2c3d4","detail":{"pinned":"imaging"}}
{"done":"65f0a1b2c3d4","result":{"commit":"abc"}}
{"undone":"65f0a1b2c3d4","by":"65f0a1b2c3d5"}
"#;

const DESCRIPTOR: &str = r#"{"kind":"memory","maturity":"stable","capabilities":["FINGERPRINT","PIN"],"volatile_keys":[],"local_path_keys":["system"],"local_path_prefixes":[],"storage_keys":["system"],"tree_keys":[],"promote_hint":"","abi":"0.1.2"}"#;

fn plan_text() -> String {
    let mut plan = Plan::new("new");
    plan.created_at = "2025-01-02T03:04:05Z".into();
    plan.set_keys(&["zarr/imaging", "db"]);
    plan.context.insert("bookmark".into(), json!("relabel"));
    plan.push(
        Action::new(verb::FORK, "zarr/imaging")
            .with_kind("icechunk")
            .with_target("tether.ws.0a1b2c3d.relabel")
            .with_param("expected", Value::Null),
    );
    plan.note("db/metrics: unchanged");
    plan.to_json_pretty()
}

// ---- values for the generated round trips ----

fn json_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Finite floats (JSON has no NaN or infinities).
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::from),
    ]
}

/// JSON a locator or state may hold: objects with any string keys, arrays
/// without `null` (the TOML mapping refuses those), scalars.
fn json_value() -> impl Strategy<Value = Value> {
    json_scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_map() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(".{0,8}", json_value(), 0..4).prop_map(|m| m.into_iter().collect())
}

fn manifest() -> impl Strategy<Value = Manifest> {
    (
        "[a-z0-9_-]{1,10}",
        json_map(),
        any::<(bool, bool, bool, bool)>(),
        proptest::option::of(json_map()),
        "[0-9a-f]{16}",
        1u32..1000,
        0i64..4_000_000_000_000,
    )
        .prop_map(
            |(
                kind,
                locator,
                (versioned, record, recoverable, created),
                state,
                h16,
                generation,
                ms,
            )| {
                let mut m = Manifest::new(
                    &kind,
                    locator,
                    Policy {
                        file: if versioned {
                            FileMode::Versioned
                        } else {
                            FileMode::Immutable
                        },
                        pin: if record {
                            PinMode::Record
                        } else {
                            PinMode::Native
                        },
                    },
                );
                m.recoverable = recoverable;
                if created {
                    m.origin = Origin::Created;
                }
                if let Some(state) = state {
                    m.state = Some(crate::model::toml_json::strip_nulls_map(&state));
                    let at = chrono::DateTime::from_timestamp_millis(ms).unwrap();
                    m.captured_at = Some(crate::model::time::format_timestamp(at));
                    if !record {
                        let id = format!("0a1b2c3d.{h16}");
                        let mut pin = Pin::new(&id);
                        if generation > 1 {
                            pin.r#ref = format!("{}.{generation}", pin.r#ref);
                            pin.created = false;
                        }
                        m.pin = Some(pin);
                    }
                }
                m
            },
        )
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn manifests_never_panic_and_what_parses_writes_back(
        bytes in input(vec![MANIFEST.into()]),
        key in prop_oneof!["[a-z]{1,8}(/[a-z]{1,8}){0,2}", ".{0,16}"],
    ) {
        let file = Path::new("m.toml");
        if let Ok(m) = Manifest::parse(&text(&bytes), &key, file) {
            // Every value that parses is one tether can write, and reads back.
            let written = m.to_toml_string(&key);
            if let Ok(written) = written {
                prop_assert_eq!(&Manifest::parse(&written, &key, file).unwrap(), &m);
            }
        }
    }

    #[test]
    fn generated_manifests_round_trip(m in manifest()) {
        let file = Path::new("m.toml");
        let written = m.to_toml_string("k/x").unwrap();
        let back = Manifest::parse(&written, "k/x", file).unwrap();
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(back.to_toml_string("k/x").unwrap(), written);
    }

    #[test]
    fn tether_toml_never_panics_and_what_parses_writes_back(
        bytes in input(vec![CONFIG.into(), default_file_text("0a1b2c3d").unwrap()]),
    ) {
        let file = Path::new("tether.toml");
        let t = text(&bytes);
        let _ = crate::model::config::peek_version(&t, file);
        if let Ok(c) = Config::parse(&t, file) {
            let written = c.to_toml_string().unwrap();
            prop_assert_eq!(&Config::parse(&written, file).unwrap(), &c);
        }
    }

    #[test]
    fn workspace_toml_never_panics_and_what_parses_writes_back(
        bytes in input(vec![WORKSPACE.into()]),
    ) {
        let file = Path::new("workspace.toml");
        if let Ok(w) = WorkspaceState::parse(&text(&bytes), file) {
            let written = w.to_toml_string().unwrap();
            prop_assert_eq!(&WorkspaceState::parse(&written, file).unwrap(), &w);
        }
    }

    #[test]
    fn secrets_toml_never_panics(bytes in input(vec![SECRETS.into()])) {
        let _ = Secrets::parse(&text(&bytes), Path::new("secrets.toml"));
    }

    #[test]
    fn plan_files_never_panic_and_what_parses_writes_back(bytes in input(vec![plan_text()])) {
        if let Ok(p) = Plan::from_json(&text(&bytes)) {
            let back = Plan::from_json(&p.to_json_pretty()).unwrap();
            prop_assert_eq!(back.to_value(), p.to_value());
        }
    }

    #[test]
    fn listings_never_panic_and_normalise_stably(bytes in input(vec![LISTING.into()])) {
        let what = Path::new("l.jsonl");
        let t = text(&bytes);
        if let Ok(normal) = listing::normalize(&t, what) {
            prop_assert_eq!(listing::normalize(&normal, what).unwrap(), normal.clone());
        }
        if let Ok(entries) = listing::parse_entries(&t, what) {
            let written = listing::entries_to_text(&entries);
            prop_assert_eq!(listing::parse_entries(&written, what).unwrap(), entries);
        }
    }

    #[test]
    fn listing_entries_round_trip(
        entries in prop::collection::vec((".{0,16}", "[0-9a-f]{0,16}", any::<u64>()), 0..6),
    ) {
        let entries: Vec<ListingEntry> = entries
            .into_iter()
            .map(|(p, k, s)| ListingEntry { p, k, s })
            .collect();
        let written = listing::entries_to_text(&entries);
        prop_assert_eq!(listing::parse_entries(&written, Path::new("l")).unwrap(), entries);
    }

    #[test]
    fn ops_jsonl_never_panics(bytes in input(vec![OPS.into()])) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ops.jsonl");
        std::fs::write(&path, &bytes).unwrap();
        let journal = Journal::open(&path);
        let _ = journal.entries();
        let _ = journal.incomplete();
        let _ = journal.undo_target(None);
        let _ = crate::oplog::jsonl::read(&path);
    }

    #[test]
    fn history_memos_never_panic(bytes in input(Vec::new())) {
        let _ = decode_memo(&bytes, "p");
    }

    #[test]
    fn history_memos_round_trip_and_survive_mutation(
        sets in prop::collection::btree_map(
            "[a-f0-9]{4}",
            prop::collection::btree_map("[a-z]{1,6}", manifest(), 0..3),
            0..3,
        ),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let sets: BTreeMap<String, ManifestSet> = sets
            .into_iter()
            .map(|(id, s)| {
                (id, Arc::new(s.into_iter().map(|(k, m)| (k, Arc::new(m))).collect()))
            })
            .collect();
        let bytes = encode_memo("p", &sets);
        let read = decode_memo(&bytes, "p").expect("a memo this tether wrote");
        prop_assert_eq!(read.len(), sets.len());
        for (id, set) in &sets {
            prop_assert_eq!(&read[id], set);
        }
        prop_assert!(decode_memo(&bytes, "other prefix").is_none());
        // Changed bytes are taken or refused, never a panic.
        let mut bytes = bytes;
        for (at, byte) in edits {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
        }
        let _ = decode_memo(&bytes, "p");
    }

    #[test]
    fn descriptors_never_panic_and_round_trip(bytes in input(vec![DESCRIPTOR.into()])) {
        if let Ok(d) = parse_descriptor(&bytes) {
            let again = parse_descriptor(&serde_json::to_vec(&d).unwrap()).unwrap();
            prop_assert_eq!(again, d);
        }
    }
}

#[test]
fn the_seeds_are_valid() {
    // Mutations of a valid file reach deep paths only if the seed parses.
    let file = Path::new("x");
    Manifest::parse(MANIFEST, "k", file).unwrap();
    Config::parse(CONFIG, file).unwrap();
    WorkspaceState::parse(WORKSPACE, file).unwrap();
    Secrets::parse(SECRETS, file).unwrap();
    Plan::from_json(&plan_text()).unwrap();
    assert_eq!(listing::parse_entries(LISTING, file).unwrap().len(), 2);
    parse_descriptor(DESCRIPTOR.as_bytes()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ops.jsonl");
    std::fs::write(&path, OPS).unwrap();
    assert_eq!(crate::oplog::jsonl::read(&path).unwrap().len(), 4);
}
