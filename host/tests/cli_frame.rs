//! The frame every command runs on, through the `tether` binary: errors as
//! `{"error": {"class", "message", "hints"}}` on stdout with `--json` (the
//! human text stays on stderr) and the spec's exit codes; the global `-C DIR`;
//! and a saved plan checked in one place before any command applies it.

use crate::support::{Dataset, describe, stderr, stdout};
use serde_json::{Value, json};

/// The `{"error": {...}}` object a failed `--json` command printed, after
/// checking the exit code and that stderr kept the human text.
fn json_error(out: &std::process::Output, code: i32) -> Value {
    let what = describe(out);
    assert_eq!(out.status.code(), Some(code), "{what}");
    assert!(
        stderr(out).starts_with("error: "),
        "stderr keeps `error: ...`: {what}"
    );
    let v: Value = serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("stdout is one JSON value ({e}): {what}"));
    let obj = v.as_object().expect("an object");
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["error"], "{what}");
    let e = &v["error"];
    let mut fields: Vec<&String> = e.as_object().expect("error is an object").keys().collect();
    fields.sort();
    assert_eq!(fields, ["class", "hints", "message"], "{what}");
    assert!(e["class"].is_string() && e["message"].is_string(), "{what}");
    assert!(
        e["hints"]
            .as_array()
            .is_some_and(|h| h.iter().all(Value::is_string)),
        "{what}"
    );
    e.clone()
}

#[test]
fn status_json_outside_a_dataset_prints_a_config_error_object() {
    let d = Dataset::init();
    let elsewhere = d.tmp().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = d.tether_in(&elsewhere, &["status", "--json"]);
    let e = json_error(&out, 1);
    assert_eq!(e["class"], "ConfigError", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("not inside a tether dataset"), "{e}");
    assert!(
        stderr(&out).contains("not inside a tether dataset"),
        "{}",
        describe(&out)
    );
    // Without --json, stdout stays empty.
    let out = d.tether_in(&elsewhere, &["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(stdout(&out), "", "{}", describe(&out));
}

#[test]
fn commit_json_without_a_message_prints_the_reason_and_the_hint_apart() {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "first");
    d.add_memory("imaging", &store);
    let out = d.tether(&["commit", "--json"]);
    let e = json_error(&out, 2);
    assert_eq!(e["class"], "UsageError", "{e}");
    assert_eq!(e["message"], "a commit message is required", "{e}");
    assert_eq!(e["hints"], json!(["`tether commit -m MESSAGE`"]), "{e}");
    // The human text is the one it always was.
    assert!(
        stderr(&out).contains("a commit message is required: `tether commit -m MESSAGE`"),
        "{}",
        describe(&out)
    );
    assert_eq!(store.tags(), Vec::<String>::new(), "nothing was pinned");
}

#[test]
fn a_usage_error_with_json_is_a_usage_error_object_and_exit_2() {
    let d = Dataset::init();
    let out = d.tether(&["status", "--json", "--no-such-flag"]);
    let e = json_error(&out, 2);
    assert_eq!(e["class"], "UsageError", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("--no-such-flag"),
        "{e}"
    );
}

#[test]
fn dash_c_runs_the_command_in_another_directory() {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "first");
    d.add_memory("imaging", &store);
    let elsewhere = d.tmp().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let root = d.root();
    let root = root.to_str().unwrap();
    // Before the command or after it (a global option), as git takes it.
    for args in [
        &["-C", root, "status", "--json"][..],
        &["status", "-C", root, "--json"],
    ] {
        let out = d.tether_in(&elsewhere, args);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["objects"][0]["key"], "imaging", "{v}");
        assert_eq!(v["objects"][0]["state"], "new", "{v}");
    }
    // Relative to where tether started, and one -C after another as git
    // joins them; relative paths in the arguments are read from there too.
    let parent = d.root().parent().unwrap().to_path_buf();
    let name = d.root().file_name().unwrap().to_str().unwrap().to_string();
    let out = d.tether_in(
        &parent,
        &[
            "-C",
            &name,
            "-C",
            ".",
            "commit",
            "-m",
            "one",
            "--plan",
            "saved.json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(d.root().join("saved.json").is_file(), "{}", describe(&out));
    // A directory that is not there is an error, not a run elsewhere.
    let out = d.tether_in(&elsewhere, &["-C", "nosuch", "status", "--json"]);
    let e = json_error(&out, 1);
    assert!(e["message"].as_str().unwrap().contains("nosuch"), "{e}");
}

#[test]
fn a_saved_plan_is_checked_in_one_place_for_every_command() {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "first");
    d.add_memory("imaging", &store);
    d.ok(&["commit", "-m", "first"]);
    let saved = d.tmp().join("gc.json");
    let saved = saved.to_str().unwrap();
    d.ok(&["gc", "--plan", saved]);
    // Another command's plan is refused, by name.
    for (command, args) in [
        ("drop", &["drop", "--from-plan", saved, "--json"][..]),
        ("new", &["new", "--from-plan", saved, "--json"]),
        ("commit", &["commit", "--from-plan", saved, "--json"]),
    ] {
        let e = json_error(&d.tether(args), 1);
        assert_eq!(e["class"], "TetherError", "{e}");
        let want = format!("is a plan for `tether gc`, not for {command}");
        assert!(e["message"].as_str().unwrap().contains(&want), "{e}");
    }
    // An edited plan is stale, whichever command reads it.
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
    plan["notes"] = json!(["edited"]);
    std::fs::write(saved, plan.to_string()).unwrap();
    let e = json_error(&d.tether(&["gc", "--from-plan", saved, "--json"]), 1);
    assert_eq!(e["class"], "StalePlanError", "{e}");
    assert!(e["message"].as_str().unwrap().contains("edited"), "{e}");
}

#[test]
fn status_json_keeps_its_shape_with_the_report_enums() {
    let d = Dataset::init();
    let store = d.memory_store("imaging");
    store.write(json!({"labels": "0"}), "first");
    d.add_memory("imaging", &store);
    d.ok(&["commit", "-m", "first"]);
    store.write(json!({"labels": "1"}), "second");
    d.ok(&["commit", "-m", "second"]);
    let op = d.ok(&["ops", "--json"]);
    let op: Value = serde_json::from_str(&op).unwrap();
    let op = op[0]["id"].as_str().unwrap().to_string();
    let gone = d.head();
    d.discard_last_commit();
    store.write(json!({"labels": "2"}), "third");
    let v: Value = serde_json::from_str(&d.ok(&["status", "--snapshot", "--json"])).unwrap();
    let o = &v["objects"][0];
    assert_eq!(o["state"], "modified", "{v}");
    assert_eq!(o["tier"], "forkable", "{v}");
    // The vanished commit, as spec/09 prints it: {"op", "commit", "referenced"}.
    let drift = v["vcs_drift"].as_array().expect("vcs_drift is a list");
    assert_eq!(drift.len(), 1, "{v}");
    assert_eq!(drift[0]["op"], op.as_str(), "{v}");
    assert_eq!(drift[0]["commit"], gone.as_str(), "{v}");
    assert_eq!(drift[0]["referenced"], json!({"imaging": false}), "{v}");
    let mut keys: Vec<&String> = drift[0].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["commit", "op", "referenced"], "{v}");
}

#[test]
fn drop_json_without_a_bookmark_names_what_to_give_as_a_hint() {
    let d = Dataset::init();
    let out = d.tether(&["drop", "--json"]);
    let e = json_error(&out, 2);
    assert_eq!(e["class"], "UsageError", "{e}");
    assert_eq!(e["message"], "name the bookmark to drop", "{e}");
    assert_eq!(e["hints"], json!(["`tether drop BOOKMARK`"]), "{e}");
    assert!(
        stderr(&out).contains("name the bookmark to drop: `tether drop BOOKMARK`"),
        "{}",
        describe(&out)
    );
}
