//! CLI conventions through the `tether` binary (issue 27): short operation
//! ids, the lock-wait message, `--json` everywhere, usage errors exiting 2.

use crate::support::{Dataset, describe, stderr, stdout};
use serde_json::json;

/// The id column of `tether ops`, newest first.
fn printed_ids(d: &Dataset) -> Vec<String> {
    d.ok(&["ops", "-n", "100"])
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

/// Ten operations an older tether started within one second share their
/// first 8 digits: each is still taken in full and by the prefix `ops`
/// prints, an ambiguous prefix is refused naming every candidate, and new
/// operations, however fast they come, print a few digits that address them.
#[test]
fn operation_ids_print_and_take_their_shortest_unique_prefix() {
    let d = Dataset::init();
    let old: Vec<String> = (0..10).map(|i| format!("6b0ec931{i:04x}")).collect();
    let mut text = String::new();
    for id in &old {
        // `promote` entries: `undo` names them and refuses, changing nothing.
        for record in [
            json!({"record": "started", "id": id, "at": "2026-01-01T00:00:00.000Z",
                   "command": "promote", "plan": null, "pre": {}, "parent": null, "undoes": null}),
            json!({"record": "done", "op": id, "at": "2026-01-01T00:00:00.000Z", "result": {}}),
        ] {
            text.push_str(&format!("{record}\n"));
        }
    }
    std::fs::write(d.root().join(".tether/ops.jsonl"), text).unwrap();

    // Several operations in quick succession (well within a second each
    // on an idle machine): add and remove an object, over and over.
    for i in 0..6 {
        let key = format!("k{i}");
        d.ok(&["add", &key, "--kind", "memory", "--set", "system=/nowhere"]);
        d.ok(&["remove", &key]);
    }

    let ops = d.json(&["ops", "-n", "100"], 0);
    let ops = ops.as_array().unwrap();
    assert_eq!(ops.len(), 22);
    let full: Vec<String> = ops
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_string())
        .collect();
    let printed = printed_ids(&d);
    assert_eq!(printed.len(), full.len());
    for (short, id) in printed.iter().zip(&full) {
        assert!(
            id.starts_with(short.as_str()),
            "{short} is not a prefix of {id}"
        );
        let others = full
            .iter()
            .filter(|o| o.starts_with(short.as_str()))
            .count();
        assert_eq!(others, 1, "{short} is not unique");
    }
    // The new ids need no more than a few digits; the old ones need all 12.
    for short in &printed[..12] {
        assert!(short.len() < 12, "{printed:?}");
    }
    for short in &printed[12..] {
        assert_eq!(short.len(), 12, "{printed:?}");
    }

    // Each old entry by its printed prefix and in full: `undo` names it.
    for id in &old {
        let out = d.fails(&["undo", id], 1);
        assert!(
            stderr(&out).contains(&format!("operation {id} (promote)")),
            "{}",
            describe(&out)
        );
    }
    // A new one by its printed prefix: the newest `remove` is undone.
    let out = d.ok(&["undo", &printed[0]]);
    assert!(out.starts_with(&format!("undid {}", full[0])), "{out}");

    // Ambiguous: refused, every candidate named, nothing undone.
    let before = d.json(&["ops", "-n", "100"], 0);
    let out = d.fails(&["undo", "6b0ec93"], 1);
    let err = stderr(&out);
    assert!(err.contains("ambiguous"), "{err}");
    for id in &old {
        assert!(err.contains(id.as_str()), "{id} not named: {err}");
    }
    assert_eq!(d.json(&["ops", "-n", "100"], 0), before);
    assert!(stdout(&out).is_empty(), "{}", describe(&out));
}

/// A command that finds the checkout lock held says so on stderr at once,
/// naming the lock and the holder's pid and command line, then goes on when
/// the holder is done. The holder is a `tether commit` held inside its
/// pre-commit hook.
#[cfg(unix)]
#[test]
fn a_blocked_command_names_the_lock_and_its_holder() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    let d = Dataset::init();
    let db = d.memory_store("db");
    db.write(json!({"rows": "1"}), "rows");
    d.add_memory("db", &db);
    let held = d.tmp().join("held");
    let release = d.tmp().join("release");
    let hook = d.root().join(".git/hooks/pre-commit");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntouch '{}'\nwhile [ ! -e '{}' ]; do sleep 0.05; done\n",
            held.display(),
            release.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();

    let bin = env!("CARGO_BIN_EXE_tether");
    let mut holder = d
        .command(bin, &d.root())
        .args(["commit", "-m", "slow"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let generous = Duration::from_secs(120);
    let start = Instant::now();
    while !held.exists() {
        assert!(
            start.elapsed() < generous,
            "the commit never reached its hook"
        );
        assert!(
            holder.try_wait().unwrap().is_none(),
            "the commit ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    let mut waiter = d
        .command(bin, &d.root())
        .arg("snapshot")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = waiter.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    // The notice comes while the holder still holds the lock: nothing is
    // released until it has been read.
    let notice = loop {
        let line = rx
            .recv_timeout(generous)
            .expect("the blocked command said nothing");
        if line.contains("Blocking waiting") {
            break line;
        }
    };
    assert!(notice.contains("checkout lock"), "{notice}");
    assert!(notice.contains(".tether/lock"), "{notice}");
    assert!(
        notice.contains(&format!("held by process {}", holder.id())),
        "{notice}"
    );
    assert!(notice.contains("tether commit -m slow"), "{notice}");
    assert!(waiter.try_wait().unwrap().is_none(), "it waits, not fails");

    std::fs::write(&release, "").unwrap();
    assert!(holder.wait().unwrap().success());
    assert!(waiter.wait().unwrap().success());
    reader.join().unwrap();
}

/// Commands where JSON makes no sense: they print no result of their own
/// (a script, files written).
const NO_JSON: &[&str] = &["tether completion", "tether man", "tether help"];

/// Every command that prints, walked from clap's own definition (so a new
/// command without `--json` fails here), takes `--json`.
#[test]
fn every_printing_command_takes_json() {
    fn walk(cmd: &clap::Command, path: String, missing: &mut Vec<String>, seen: &mut usize) {
        let subs: Vec<&clap::Command> = cmd.get_subcommands().collect();
        if subs.is_empty() {
            *seen += 1;
            let has = cmd.get_arguments().any(|a| a.get_long() == Some("json"));
            if !has && !NO_JSON.contains(&path.as_str()) {
                missing.push(path);
            }
            return;
        }
        for sub in subs {
            walk(sub, format!("{path} {}", sub.get_name()), missing, seen);
        }
    }
    let (mut missing, mut seen) = (Vec::new(), 0);
    walk(
        &tether::cli::command(),
        "tether".into(),
        &mut missing,
        &mut seen,
    );
    assert!(missing.is_empty(), "without --json: {missing:?}");
    assert!(seen > 25, "only {seen} commands found");
}

/// `add`, `remove` and the plugin subcommands print JSON with `--json`.
#[test]
fn add_remove_and_plugin_print_json() {
    let d = Dataset::init();
    let added = d.json(
        &["add", "k", "--kind", "memory", "--set", "system=/nowhere"],
        0,
    );
    assert_eq!(added["key"], "k", "{added}");
    assert_eq!(added["kind"], "memory", "{added}");
    let removed = d.json(&["remove", "k"], 0);
    assert_eq!(removed, json!({"removed": "k"}));
    let listed = d.json(&["plugin", "list"], 0);
    assert!(listed.is_array(), "{listed}");
    let digest = format!("sha256:{}", "0".repeat(64));
    let trusted = d.json(&["plugin", "trust", &digest], 0);
    assert_eq!(trusted["digest"], json!(digest), "{trusted}");
    assert_eq!(trusted["trusted"], json!(true), "{trusted}");
}

/// Usage errors exit 2 (spec/09's exit-code table), with `--json` as
/// `{"error": {"class": "UsageError"}}`: what clap finds and what the
/// commands find themselves.
#[test]
fn usage_errors_exit_2() {
    let d = Dataset::init();
    for args in [
        &["commit"][..],
        &["commit", "-m", " "],
        &["add", "--kind", "file"],
        &["add", "--kind", "memory"],
        &["new", "-b"],
        &["drop"],
        &["set", "--file", "versioned"],
        &["set", "--all"],
        &["status", "--no-such-option"],
        &["no-such-command"],
    ] {
        let out = d.fails(args, 2);
        assert!(stderr(&out).starts_with("error: "), "{}", describe(&out));
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let out = d.fails(&with_json, 2);
        let v: serde_json::Value = serde_json::from_str(&stdout(&out))
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", describe(&out)));
        assert_eq!(v["error"]["class"], "UsageError", "{args:?}: {v}");
    }
}

/// `--version` names the build: commit, date, wasmtime, plugin ABI.
#[test]
fn version_names_the_commit_the_date_wasmtime_and_the_plugin_abi() {
    let d = Dataset::init();
    let out = d.ok(&["--version"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("tether {}", env!("CARGO_PKG_VERSION")),
        "{out}"
    );
    let field = |name: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name}: {out}"))
            .to_string()
    };
    let commit = field("commit");
    assert!(
        commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{out}"
    );
    let date = field("built");
    assert!(
        chrono::NaiveDate::parse_from_str(&date, "%Y-%m-%d").is_ok(),
        "{out}"
    );
    let wasmtime = field("wasmtime");
    assert!(wasmtime.split('.').count() == 3, "{out}");
    assert_eq!(field("plugin ABI"), tether_contract::ABI_VERSION, "{out}");
}

/// `tether completion SHELL` prints a script that completes the commands;
/// an unknown shell is a usage error.
#[test]
fn completion_prints_a_script_per_shell() {
    let d = Dataset::init();
    let bash = d.ok(&["completion", "bash"]);
    assert!(bash.contains("complete -F"), "{bash}");
    for sub in ["commit", "undo", "forget-workspace", "completion"] {
        assert!(bash.contains(sub), "{sub} missing from the bash script");
    }
    let fish = d.ok(&["completion", "fish"]);
    assert!(fish.contains("complete -c tether"), "{fish}");
    d.fails(&["completion", "tcsh-of-the-future"], 2);
}

/// `status` under a pseudo-terminal (`script`), so `--color auto` sees one.
#[cfg(target_os = "linux")]
fn status_on_a_terminal(d: &Dataset, colour: &str, no_color: Option<&str>) -> String {
    let line = format!("'{}' --color {colour} status", env!("CARGO_BIN_EXE_tether"));
    let mut cmd = d.command("script", &d.root());
    cmd.args(["-qec", &line, "/dev/null"]);
    match no_color {
        Some(v) => cmd.env("NO_COLOR", v),
        None => cmd.env_remove("NO_COLOR"),
    };
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    stdout(&out)
}

/// Status labels are coloured on a terminal only, never with `NO_COLOR` set
/// (unless `--color always`), never with `--color never`, never when piped.
#[cfg(target_os = "linux")]
#[test]
fn status_labels_are_coloured_on_a_terminal_unless_no_color() {
    let d = Dataset::init();
    let db = d.memory_store("db");
    db.write(json!({"rows": "1"}), "rows");
    d.add_memory("db", &db);
    let yellow_new = "\u{1b}[33mnew\u{1b}[0m db";
    assert!(status_on_a_terminal(&d, "auto", None).contains(yellow_new));
    let plain = status_on_a_terminal(&d, "auto", Some("1"));
    assert!(
        plain.contains("new db") && !plain.contains('\u{1b}'),
        "{plain:?}"
    );
    assert!(status_on_a_terminal(&d, "always", Some("1")).contains(yellow_new));
    let never = status_on_a_terminal(&d, "never", None);
    assert!(
        never.contains("new db") && !never.contains('\u{1b}'),
        "{never:?}"
    );
    // Piped: plain; --color always: coloured even so.
    let piped = d.ok(&["status"]);
    assert!(
        piped.contains("new db") && !piped.contains('\u{1b}'),
        "{piped:?}"
    );
    assert!(d.ok(&["--color", "always", "status"]).contains(yellow_new));
    d.fails(&["--color", "sometimes", "status"], 2);
}

/// `-q`: a command that changes things prints nothing (its `--json` still
/// prints), one that shows things still shows them, and errors still speak.
#[test]
fn quiet_silences_what_was_not_asked_for() {
    let d = Dataset::init();
    let db = d.memory_store("db");
    db.write(json!({"rows": "1"}), "rows");
    let system = format!("system={}", db.root.display());
    let out = d.tether(&["-q", "add", "k", "--kind", "memory", "--set", &system]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(stdout(&out), "", "{}", describe(&out));
    assert_eq!(stderr(&out), "", "{}", describe(&out));
    assert!(
        d.root().join(".tether/objects/k.toml").exists(),
        "it was added"
    );
    assert!(d.ok(&["--quiet", "status"]).contains("new k"));
    let removed = d.json(&["remove", "-q", "k"], 0);
    assert_eq!(removed, json!({"removed": "k"}));
    let out = d.fails(&["-q", "remove", "k"], 1);
    assert!(stderr(&out).starts_with("error: "), "{}", describe(&out));
}

/// Every option and argument of every command says what it is for in `--help`.
#[test]
fn every_option_has_help() {
    fn walk(cmd: &clap::Command, path: String, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    walk(&tether::cli::command(), "tether".into(), &mut missing);
    assert!(missing.is_empty(), "without help: {missing:?}");
}

/// Every command's `--help` ends with an example, and every example still
/// parses (the comments and placeholders aside).
#[test]
fn every_command_has_an_example_that_parses() {
    fn leaves(cmd: &clap::Command, path: String, out: &mut Vec<(String, String)>) {
        let subs: Vec<&clap::Command> = cmd.get_subcommands().collect();
        if subs.is_empty() {
            let help = cmd
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            out.push((path.clone(), help));
        }
        for sub in subs {
            leaves(
                sub,
                format!("{path} {}", sub.get_name()).trim().to_string(),
                out,
            );
        }
    }
    let mut all = Vec::new();
    leaves(&tether::cli::command(), String::new(), &mut all);
    for (path, help) in &all {
        assert!(help.starts_with("Examples:\n"), "tether {path}: no example");
        for line in help.lines().skip(1) {
            let line = line
                .split(" # ")
                .next()
                .unwrap()
                .split(" > ")
                .next()
                .unwrap();
            let line = line.replace("<64 hex>", &"0".repeat(64));
            // Words, with "..." quoting.
            let mut words = Vec::new();
            for (i, part) in line.trim().split('"').enumerate() {
                if i % 2 == 1 {
                    words.push(part.to_string());
                } else {
                    words.extend(part.split_whitespace().map(str::to_string));
                }
            }
            assert_eq!(words[0], "tether", "{line}");
            assert!(
                words[1..].join(" ").starts_with(path.as_str()),
                "tether {path}: example of another command: {line}"
            );
            if let Err(e) = tether::cli::command().try_get_matches_from(&words) {
                panic!("tether {path}: {line}: {e}");
            }
        }
    }
}

/// A mistyped key, kind or bookmark is answered with the closest name there
/// is; a name close to nothing gets no guess.
#[test]
fn a_mistyped_key_kind_or_bookmark_gets_a_did_you_mean() {
    let d = Dataset::init();
    let store = d.memory_store("labels");
    store.write(json!({"rows": "1"}), "rows");
    d.add_memory("tables/labels", &store);
    d.ok(&["commit", "-m", "labels"]);

    let out = d.fails(&["remove", "tables/lables"], 1);
    assert!(
        stderr(&out).contains(
            "no object \"tables/lables\" in this dataset (did you mean \"tables/labels\"?)"
        ),
        "{}",
        describe(&out)
    );
    let out = d.fails(&["remove", "zzz"], 1);
    assert!(!stderr(&out).contains("did you mean"), "{}", describe(&out));

    let system = format!("system={}", store.root.display());
    let out = d.fails(&["add", "other", "--kind", "memroy", "--set", &system], 1);
    assert!(
        stderr(&out).contains("unknown kind \"memroy\" (did you mean \"memory\"?)"),
        "{}",
        describe(&out)
    );

    d.ok(&["new", "-b", "relabel"]);
    d.ok(&["new", "main"]);
    let out = d.fails(&["new", "relable"], 1);
    assert!(
        stderr(&out).contains("(did you mean \"relabel\"?)"),
        "{}",
        describe(&out)
    );
}
