//! Unit tests of plans: digest, wire shape, save/load, edited and foreign
//! plans refused, and every precondition checked and named.

use super::*;
use serde_json::json;

fn store() -> Store {
    Store::new("icechunk", json!({"uri": "s3://lab/imaging.icechunk"}))
}

/// A `new` plan with a fixed creation time, so its digest is reproducible.
fn sample() -> Plan {
    let mut plan = Plan::new("new");
    plan.created_at = "2025-01-02T03:04:05Z".into();
    plan.set_keys(&["zarr/imaging", "db"]);
    plan.context.insert("bookmark".into(), json!("relabel"));
    plan.push(
        Action::new(verb::FORK, "zarr/imaging")
            .with_kind("icechunk")
            .with_target("tether.ws.0a1b2c3d.relabel")
            .with_detail("from tether.0a1b2c3d.deb4861eb388e5f6")
            .with_param("expected", Value::Null),
    );
    plan.push(Action::new(verb::TRUNK, "db").with_kind("neon"));
    plan.note("db/metrics: unchanged");
    plan.require(Precondition::WorkspaceId {
        expected: "ab12cd34".into(),
    });
    plan.require(Precondition::ManifestHash {
        expected: "1a2b3c4d5e6f".into(),
    });
    plan.require(Precondition::RefAbsent {
        key: "zarr/imaging".into(),
        store: store(),
        ref_name: "tether.ws.0a1b2c3d.relabel".into(),
    });
    plan
}

#[test]
fn digest_is_sha256_of_the_canonical_rest() {
    let plan = sample();
    let value = plan.to_value();
    let mut body = value.as_object().unwrap().clone();
    let digest = body.remove("digest").unwrap();
    let expect = hex::encode(Sha256::digest(
        canonical::to_string(&Value::Object(body)).as_bytes(),
    ));
    assert_eq!(digest, json!(expect));
    assert_eq!(plan.digest(), expect);
    assert_eq!(expect.len(), 64);
    // Stable: the same plan digests the same, however often it is asked.
    assert_eq!(sample().digest(), plan.digest());
}

#[test]
fn digest_changes_with_any_field() {
    let base = sample().digest();
    let mut p = sample();
    p.actions[0].target = "tether.ws.0a1b2c3d.other".into();
    assert_ne!(p.digest(), base);
    let mut p = sample();
    p.context.insert("keys".into(), json!(["db"]));
    assert_ne!(p.digest(), base);
    let mut p = sample();
    p.preconditions.pop();
    assert_ne!(p.digest(), base);
    let mut p = sample();
    p.notes.clear();
    assert_ne!(p.digest(), base);
}

#[test]
fn wire_shape_is_the_spec_s() {
    let v = sample().to_value();
    let obj = v.as_object().unwrap();
    let keys: BTreeSet<&str> = obj.keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = [
        "format",
        "tether_version",
        "command",
        "created_at",
        "context",
        "notes",
        "preconditions",
        "actions",
        "digest",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, want);
    assert_eq!(obj["format"], json!(3));
    assert_eq!(obj["context"]["keys"], json!(["db", "zarr/imaging"]));
    let action = obj["actions"][0].as_object().unwrap();
    let akeys: BTreeSet<&str> = action.keys().map(String::as_str).collect();
    assert_eq!(
        akeys,
        ["op", "key", "kind", "target", "detail", "params"]
            .into_iter()
            .collect()
    );
    assert_eq!(action["op"], json!("fork"));
    let pre = &obj["preconditions"][2];
    assert_eq!(pre["kind"], json!("ref_absent"));
    assert_eq!(pre["key"], json!("zarr/imaging"));
    assert_eq!(pre["params"]["ref"], json!("tether.ws.0a1b2c3d.relabel"));
    assert_eq!(pre["params"]["backend"], json!("icechunk"));
    assert_eq!(obj["preconditions"][0]["key"], Value::Null);
}

#[test]
fn save_and_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    let plan = sample();
    plan.save(&path).unwrap();
    let back = Plan::load(&path).unwrap();
    assert_eq!(back, plan);
    assert_eq!(back.digest(), plan.digest());
}

#[test]
fn an_edited_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    sample().save(&path).unwrap();

    // Change one field of one action, as someone editing the file would.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["actions"][0]["target"] = json!("tether.ws.0a1b2c3d.elsewhere");
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let err = Plan::load(&path).unwrap_err();
    assert!(matches!(err, PlanError::Edited { .. }), "{err}");
    assert!(err.is_stale());
    assert!(err.to_string().contains("re-run the plan"), "{err}");

    // Dropping a precondition is an edit too.
    sample().save(&path).unwrap();
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["preconditions"].as_array_mut().unwrap().pop();
    std::fs::write(&path, v.to_string()).unwrap();
    assert!(matches!(
        Plan::load(&path).unwrap_err(),
        PlanError::Edited { .. }
    ));

    // Reformatting is not: the digest is over canonical JSON.
    sample().save(&path).unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::write(&path, v.to_string()).unwrap();
    assert_eq!(Plan::load(&path).unwrap(), sample());
}

#[test]
fn another_version_s_plan_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    let mut plan = sample();
    plan.tether_version = "0.0.1-other".into();
    plan.save(&path).unwrap();
    let err = Plan::load(&path).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, PlanError::OtherVersion { .. }), "{msg}");
    assert!(err.is_stale());
    assert!(msg.contains("made by tether 0.0.1-other"), "{msg}");
    assert!(
        msg.contains(&format!("this is tether {TETHER_VERSION}")),
        "{msg}"
    );
    assert!(msg.contains("re-run the plan"), "{msg}");

    // A plan recording no version: made before plans recorded one.
    let mut v = sample().to_value();
    v.as_object_mut().unwrap().remove("tether_version");
    let err = Plan::from_value(&v).unwrap_err();
    assert!(matches!(err, PlanError::NoVersion { .. }), "{err}");
    assert!(err.to_string().contains("older tether"), "{err}");

    // Another format.
    let mut v = sample().to_value();
    v["format"] = json!(2);
    assert!(matches!(
        Plan::from_value(&v).unwrap_err(),
        PlanError::Format { .. }
    ));
}

#[test]
fn every_precondition_kind_round_trips() {
    let all = vec![
        Precondition::WorkspaceId {
            expected: "ab12cd34".into(),
        },
        Precondition::WorkspaceBookmark {
            expected: Some("relabel".into()),
        },
        Precondition::WorkspaceBookmark { expected: None },
        Precondition::ManifestHash {
            expected: "1a2b3c4d5e6f".into(),
        },
        Precondition::DatasetVersion { expected: 5 },
        Precondition::BookmarkHead {
            bookmark: "relabel".into(),
            expected: "c0ffee".into(),
        },
        Precondition::VcsHead {
            rev: "@".into(),
            expected: "c0ffee".into(),
        },
        Precondition::HistoryDigest {
            expected: "d1g35t".into(),
        },
        Precondition::NoNewHolders {
            bookmark: "relabel".into(),
            expected: vec!["ab12cd34".into()],
        },
        Precondition::RefHead {
            key: "k".into(),
            store: store(),
            ref_name: "tether.ws.x.b".into(),
            expected: json!({"snapshot_id": "S1"}),
        },
        Precondition::RefAbsent {
            key: "k".into(),
            store: store(),
            ref_name: "r".into(),
        },
        Precondition::RefPresent {
            key: "k".into(),
            store: store(),
            ref_name: "r.2".into(),
        },
        Precondition::RefDescends {
            key: "k".into(),
            store: store(),
            ref_name: "r".into(),
            expected: json!({"snapshot_id": "S0"}),
        },
        Precondition::BaseState {
            key: "k".into(),
            store: store(),
            ref_name: "main".into(),
            expected: json!({"snapshot_id": "S2"}),
        },
        Precondition::PinState {
            key: "k".into(),
            store: store(),
            pin: "0a1b2c3d.deb4861eb388e5f6".into(),
            expected: json!({"snapshot_id": "S3"}),
        },
        Precondition::StoreEmpty {
            key: None,
            store: store(),
            ignore: vec!["tether.0a1b2c3d.x".into()],
        },
    ];
    let kinds: BTreeSet<&str> = all.iter().map(|p| p.kind()).collect();
    assert_eq!(kinds.len(), PRECONDITION_KINDS.len());
    for p in all {
        let v = p.to_value();
        assert_eq!(v["detail"], json!(p.describe()));
        assert_eq!(Precondition::from_value(&v).unwrap(), p, "{v}");
    }
    let err = Precondition::from_value(&json!({"kind": "nope"})).unwrap_err();
    assert!(err.contains("unknown precondition kind `nope`"), "{err}");
}

/// A world the tests set up by hand.
#[derive(Default)]
struct World {
    workspace: String,
    manifests: String,
    refs: std::collections::HashMap<String, Value>,
}

impl PreconditionChecker for World {
    fn workspace_id(&mut self) -> Result<String, String> {
        Ok(self.workspace.clone())
    }
    fn manifest_hash(&mut self) -> Result<String, String> {
        Ok(self.manifests.clone())
    }
    fn ref_head(&mut self, _key: &str, _store: &Store, r: &str) -> Result<Option<Value>, String> {
        Ok(self.refs.get(r).cloned())
    }
}

fn world() -> World {
    World {
        workspace: "ab12cd34".into(),
        manifests: "1a2b3c4d5e6f".into(),
        refs: Default::default(),
    }
}

#[test]
fn preconditions_that_hold_pass() {
    sample().check_all(&mut world()).unwrap();
}

#[test]
fn every_failed_precondition_is_named() {
    let mut w = world();
    w.manifests = "ffffffffffff".into();
    w.refs.insert(
        "tether.ws.0a1b2c3d.relabel".into(),
        json!({"snapshot_id": "PEER"}),
    );
    let err = sample().check_all(&mut w).unwrap_err();
    assert!(err.is_stale());
    let PlanError::Stale(stale) = &err else {
        panic!("{err}")
    };
    let kinds: Vec<&str> = stale.failed.iter().map(|f| f.precondition.kind()).collect();
    assert_eq!(kinds, vec!["manifest_hash", "ref_absent"]);
    let msg = err.to_string();
    assert!(msg.contains("nothing was applied"), "{msg}");
    assert!(msg.contains("were 1a2b3c4d5e6f, now ffffffffffff"), "{msg}");
    assert!(
        msg.contains("zarr/imaging: tether.ws.0a1b2c3d.relabel appeared"),
        "{msg}"
    );
}

#[test]
fn states_compare_in_canonical_form() {
    let mut plan = Plan::new("new");
    plan.require(Precondition::WorkspaceId {
        expected: "ab12cd34".into(),
    });
    plan.require(Precondition::ManifestHash {
        expected: "1a2b3c4d5e6f".into(),
    });
    plan.push(Action::new(verb::REUSE, "k"));
    plan.require(Precondition::RefHead {
        key: "k".into(),
        store: store(),
        ref_name: "b".into(),
        expected: json!({"a": 1, "b": 2}),
    });
    let mut w = world();
    w.refs.insert("b".into(), json!({"b": 2, "a": 1}));
    plan.check_all(&mut w).unwrap();
    w.refs.insert("b".into(), json!({"b": 3, "a": 1}));
    let msg = plan.check_all(&mut w).unwrap_err().to_string();
    assert!(msg.contains("k: b moved since the plan"), "{msg}");
    w.refs.clear();
    let msg = plan.check_all(&mut w).unwrap_err().to_string();
    assert!(msg.contains("k: b is gone"), "{msg}");
}

#[test]
fn a_checker_that_cannot_tell_fails_closed() {
    let mut plan = Plan::new("gc");
    plan.require(Precondition::WorkspaceId {
        expected: "ab12cd34".into(),
    });
    plan.require(Precondition::HistoryDigest {
        expected: "abc".into(),
    });
    let err = plan.check_all(&mut world()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cannot check `history_digest`"), "{msg}");
}

#[test]
fn a_plan_lacking_a_required_precondition_is_stale() {
    let mut plan = sample();
    plan.preconditions
        .retain(|p| p.kind() != kind::MANIFEST_HASH && p.kind() != kind::REF_ABSENT);
    assert_eq!(
        plan.missing_preconditions(),
        vec![
            "manifest_hash".to_string(),
            "ref_head or ref_absent for zarr/imaging".to_string()
        ]
    );
    let err = plan.check_all(&mut world()).unwrap_err();
    assert!(err.is_stale());
    let msg = err.to_string();
    assert!(
        msg.contains("lacks the manifest_hash, ref_head or ref_absent for zarr/imaging"),
        "{msg}"
    );

    let mut promote = Plan::new("promote");
    promote.push(Action::new(verb::MERGE, "k"));
    let missing = promote.missing_preconditions();
    assert!(
        missing.contains(&"base_state for k".to_string()),
        "{missing:?}"
    );
    assert!(
        missing.contains(&"ref_head or pin_state for k".to_string()),
        "{missing:?}"
    );
}

#[test]
fn no_new_holders_tolerates_fewer_but_not_new_holders() {
    struct Holders(Vec<String>);
    impl PreconditionChecker for Holders {
        fn bookmark_holders(&mut self, _b: &str) -> Result<Vec<String>, String> {
            Ok(self.0.clone())
        }
    }
    let p = Precondition::NoNewHolders {
        bookmark: "feat".into(),
        expected: vec!["aaaaaaaa".into(), "bbbbbbbb".into()],
    };
    assert!(p.check(&mut Holders(vec!["aaaaaaaa".into()])).is_none());
    let failed = p
        .check(&mut Holders(vec!["aaaaaaaa".into(), "cccccccc".into()]))
        .unwrap();
    assert!(failed.message.contains("cccccccc"), "{}", failed.message);
}

#[test]
fn render_prints_one_line_per_action_then_notes() {
    let plan = sample();
    let text = plan.render();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "plan: new (1 write(s))");
    assert_eq!(
        lines[1],
        "  fork zarr/imaging [icechunk] tether.ws.0a1b2c3d.relabel from tether.0a1b2c3d.deb4861eb388e5f6"
    );
    assert_eq!(lines[2], "  trunk db [neon]");
    assert_eq!(lines[3], "  db/metrics: unchanged");
    assert_eq!(lines.len(), 4);
    let full = plan.render_full();
    assert!(full.contains("preconditions:\n  workspace_id: made in checkout ab12cd34\n"));
    assert!(full.contains("  ref_absent: zarr/imaging: tether.ws.0a1b2c3d.relabel does not exist"));
}

#[test]
fn empty_plans_write_nothing() {
    let mut plan = Plan::new("gc");
    plan.push(Action::new(verb::KEEP_PIN, "k").with_detail("not created by this clone"));
    assert!(plan.is_empty());
    plan.push(Action::new(verb::UNPIN, "k"));
    assert!(!plan.is_empty());
}

#[test]
fn selection_must_match_the_plan_s() {
    let plan = sample();
    plan.check_selection::<&str>(&[]).unwrap();
    plan.check_selection(&["db", "zarr/imaging", "db"]).unwrap();
    let err = plan.check_selection(&["db"]).unwrap_err();
    assert!(matches!(err, PlanError::SelectionMismatch { .. }));
    assert!(err.to_string().contains("(db zarr/imaging)"), "{err}");
}
