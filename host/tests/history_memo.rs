//! The history memo (`.tether/cache/history.bin`, `engine/history.rs`)
//! through the `tether` binary on git: a second `verify --all-history`
//! replays the remembered walk (counted from the debug log, never timed),
//! while anything that may change visible history (a commit, a new branch,
//! another worktree's `HEAD`, a replace ref) makes it walk again, so no
//! commit is missed.
//! Replaying never skips the stores: a pin deleted meanwhile is `missing`.
//! A damaged memo, or one another tether wrote, is ignored and replaced.
//! A history longer than one plugin instance's batch is verified in several
//! batches, each commit still answered under its own label.
//! A manifest unchanged across commits is kept, and read back, once.

use crate::support::{Dataset, JjCallLog, MemoryStore, Vcs, describe};
use serde_json::json;

/// `verify --all-history` with the debug log: (exit code, stdout, whether
/// the memo was replayed). Exactly one of "replayed" and "walked" is logged.
fn verify(d: &Dataset) -> (i32, String, bool) {
    verify_with(d, d.command(env!("CARGO_BIN_EXE_tether"), &d.root()))
}

fn verify_with(d: &Dataset, cmd: std::process::Command) -> (i32, String, bool) {
    let _ = d;
    let out = logged_verify(cmd);
    let log = String::from_utf8_lossy(&out.stderr);
    let replayed = log.contains("history memo replayed");
    let walked = log.contains("history walked");
    assert!(
        replayed != walked,
        "one of replayed/walked:\n{}",
        describe(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), stdout, replayed)
}

/// `cmd` (a `tether`) run as `verify --all-history` with the debug log.
fn logged_verify(mut cmd: std::process::Command) -> std::process::Output {
    cmd.args(["verify", "--all-history"])
        .env("RUST_LOG", "tether=debug")
        .output()
        .expect("run tether")
}

/// A dataset with one memory object committed twice.
fn two_commits() -> (Dataset, MemoryStore) {
    two_commits_in(Vcs::Git)
}

fn two_commits_in(vcs: Vcs) -> (Dataset, MemoryStore) {
    let d = Dataset::init_in(vcs);
    let s = d.memory_store("s");
    s.write(json!({"n": 1}), "one");
    let system = format!("system={}", s.root.display());
    d.ok(&["add", "obj", "--kind", "memory", "--set", &system]);
    d.ok(&["commit", "-m", "one"]);
    s.write(json!({"n": 2}), "two");
    d.ok(&["commit", "-m", "two"]);
    (d, s)
}

fn memo_path(d: &Dataset) -> std::path::PathBuf {
    d.root().join(".tether/cache/history.bin")
}

#[test]
fn a_second_read_replays_and_any_change_to_history_walks_again() {
    let (d, s) = two_commits();
    let (code, first, replayed) = verify(&d);
    assert_eq!(code, 0, "{first}");
    assert!(!replayed, "no memo yet: the first read walks");
    assert_eq!(first.lines().count(), 2, "{first}");
    assert!(memo_path(&d).is_file());
    let (_, again, replayed) = verify(&d);
    assert!(replayed, "nothing changed: the memo is replayed");
    assert_eq!(again, first);

    // A commit: walked, and its pin is there.
    s.write(json!({"n": 3}), "three");
    d.ok(&["commit", "-m", "three"]);
    let head = d.git(&["rev-parse", "HEAD"]);
    let (code, out, replayed) = verify(&d);
    assert_eq!(code, 0, "{out}");
    assert!(!replayed, "a new commit makes the next read walk");
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.contains(&format!("ok {}:obj", &head[..12])), "{out}");
    assert!(verify(&d).2, "and the read after that replays");

    // A new branch names no new commit, but it is a new tip: walked.
    d.git(&["branch", "side", "HEAD~1"]);
    let (_, same, replayed) = verify(&d);
    assert!(!replayed, "a new branch makes the next read walk");
    assert_eq!(same, out);

    // A commit only another worktree's HEAD reaches.
    let wt = d.tmp().join("wt");
    d.git(&[
        "worktree",
        "add",
        "--detach",
        wt.to_str().unwrap(),
        "HEAD~2",
    ]);
    tether_testkit::run_ok(d.command("git", &wt).args([
        "commit",
        "--allow-empty",
        "-m",
        "in the worktree",
    ]));
    let wt_head = tether_testkit::run_ok(d.command("git", &wt).args(["rev-parse", "HEAD"]));
    let (code, out, replayed) = verify(&d);
    assert_eq!(code, 0, "{out}");
    assert!(
        !replayed,
        "another worktree's commit makes the next read walk"
    );
    assert!(out.contains(&format!("ok {}:obj", &wt_head[..12])), "{out}");
    assert_eq!(out.lines().count(), 4, "{out}");

    // A replace ref can change a commit's parents with no tip moving.
    assert!(verify(&d).2);
    d.git(&["replace", "--graft", "HEAD~1"]);
    let (code, out, replayed) = verify(&d);
    assert_eq!(code, 0, "{out}");
    assert!(!replayed, "a replace ref makes the next read walk");

    // Replaying still asks the store: a pin deleted behind tether's back.
    assert!(verify(&d).2);
    let tag = s.tags().into_iter().next().expect("a pin");
    s.delete_tag(&tag);
    let (code, out, replayed) = verify(&d);
    assert!(replayed, "history did not change");
    assert_eq!(code, 1, "{out}");
    assert!(out.lines().any(|l| l.starts_with("missing ")), "{out}");
}

#[test]
fn a_damaged_or_foreign_memo_is_ignored_and_replaced() {
    let (d, _s) = two_commits();
    let (_, want, _) = verify(&d);
    let path = memo_path(&d);

    let whole = std::fs::read(&path).unwrap();
    std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
    let (code, out, replayed) = verify(&d);
    assert_eq!((code, replayed), (0, false), "{out}");
    assert_eq!(out, want);
    let rewritten = std::fs::read(&path).unwrap();
    assert_eq!(rewritten, whole, "rewritten whole");
    assert!(verify(&d).2, "the rewritten memo is replayed");

    // Another tether's memo: its manifests may have been read by other rules.
    // Its version is the same length, so the rest of the file still decodes.
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    let at = rewritten
        .windows(version.len())
        .position(|w| w == version)
        .expect("the memo names its tether");
    let mut foreign = rewritten.clone();
    foreign[at] = if version[0] == b'9' { b'8' } else { b'9' };
    std::fs::write(&path, &foreign).unwrap();
    let (code, out, replayed) = verify(&d);
    assert_eq!((code, replayed), (0, false), "{out}");
    assert_eq!(out, want);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        whole,
        "replaced by this tether's"
    );

    // A `history.json` from before the binary format is never read, and is
    // removed once the new memo is written.
    let old = path.with_file_name("history.json");
    std::fs::write(&old, b"{}").unwrap();
    std::fs::remove_file(&path).unwrap();
    let (code, out, replayed) = verify(&d);
    assert_eq!((code, replayed), (0, false), "{out}");
    assert!(path.is_file() && !old.exists());
}

/// On jj the key is the operation heads: a replay starts no jj process
/// (the view of visible commits the command needs is cached under the same
/// heads; a logging wrapper counts them), and any jj operation makes the next
/// read walk; here `jj new`, which leaves the old working copy behind as a
/// commit with the same manifests, so one more label.
#[test]
fn on_jj_a_replay_starts_no_jj_and_an_operation_walks_again() {
    let (d, _s) = two_commits_in(Vcs::Jj);
    let (code, first, replayed) = verify(&d);
    assert_eq!((code, replayed), (0, false), "{first}");

    let jj = JjCallLog::new(&d.tmp().join("counting"));
    let counted = || {
        let mut cmd = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
        cmd.env("TETHER_JJ", &jj.wrapper);
        cmd
    };
    // The first run through the wrapper checks its version (remembered per
    // executable): not counted.
    verify_with(&d, counted());
    jj.take();
    let (code, again, replayed) = verify_with(&d, counted());
    assert_eq!((code, replayed), (0, true), "{again}");
    assert_eq!(again, first);
    let calls = jj.take();
    assert!(calls.is_empty(), "{calls:#?}");

    d.jj(&["new"]);
    let (code, out, replayed) = verify(&d);
    assert_eq!((code, replayed), (0, false), "{out}");
    assert_eq!(out.lines().count(), first.lines().count() + 1, "{out}");
}

#[test]
fn a_long_history_is_verified_in_one_call_per_store_each_commit_under_its_own_label() {
    // Two objects, 40 commits each changing both: 80 pins, and the plugin
    // (memory, which exports `verify-many`) is called once per store.
    const COMMITS: usize = 40;
    let d = Dataset::init();
    let stores = [d.memory_store("a"), d.memory_store("b")];
    let mut pins = Vec::new();
    for n in 0..COMMITS {
        for (key, s) in ["a", "b"].iter().zip(&stores) {
            s.write(json!({ "n": n }), &format!("write {n}"));
            if n == 0 {
                d.add_memory(key, s);
            }
        }
        d.ok(&["commit", "-m", &format!("commit {n}")]);
        for key in ["a", "b"] {
            let pin = d.manifest(key)["pin"]["ref"]
                .as_str()
                .expect("a pin")
                .to_string();
            pins.push((format!("{}:{key}", &d.head()[..12]), pin));
        }
    }
    // One pin of each store goes behind tether's back.
    let gone = [&pins[6], &pins[2 * COMMITS - 3]];
    for (label, pin) in gone {
        let store = if label.ends_with(":a") {
            &stores[0]
        } else {
            &stores[1]
        };
        store.delete_tag(pin);
    }
    let out = logged_verify(d.command(env!("CARGO_BIN_EXE_tether"), &d.root()));
    let log = String::from_utf8_lossy(&out.stderr);
    let calls: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("verify-many: one call"))
        .collect();
    assert_eq!(calls.len(), 2, "one call per store:\n{}", describe(&out));
    assert!(
        calls.iter().all(|l| l.contains(&format!("pins={COMMITS}"))),
        "each with every pin of its store:\n{}",
        describe(&out)
    );
    assert!(
        !log.contains("verify: one call per pin"),
        "{}",
        describe(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 2 * COMMITS, "{stdout}");
    for (label, pin) in &pins {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1).map(|w| w.trim_end_matches(':')) == Some(label))
            .unwrap_or_else(|| panic!("{label} reported:\n{stdout}"));
        if gone.iter().any(|(l, _)| l == label) {
            assert_eq!(
                line,
                format!("missing {label}: tag {pin} is gone"),
                "{stdout}"
            );
        } else {
            assert_eq!(line, format!("ok {label}"), "{stdout}");
        }
    }
}

/// The number a debug line with `message` gives its `manifests` field.
fn manifests_logged(log: &str, message: &str) -> Option<usize> {
    let line = log.lines().find(|l| l.contains(message))?;
    let rest = &line[line.find("manifests=")? + "manifests=".len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn a_manifest_unchanged_across_commits_is_kept_once_and_each_commit_still_answers() {
    // Two objects; three commits, the second and third changing only `a`:
    // six manifests in history, four distinct (a1, a2, a3, b1).
    let d = Dataset::init();
    let (sa, sb) = (d.memory_store("a"), d.memory_store("b"));
    sa.write(json!({"n": 1}), "a1");
    sb.write(json!({"n": 1}), "b1");
    for (key, s) in [("a", &sa), ("b", &sb)] {
        let system = format!("system={}", s.root.display());
        d.ok(&["add", key, "--kind", "memory", "--set", &system]);
    }
    d.ok(&["commit", "-m", "both"]);
    let mut revs = vec![d.head()[..12].to_string()];
    for n in 2..=3 {
        sa.write(json!({ "n": n }), &format!("a{n}"));
        d.ok(&["commit", "-m", &format!("a{n}")]);
        revs.push(d.head()[..12].to_string());
    }

    let run = || logged_verify(d.command(env!("CARGO_BIN_EXE_tether"), &d.root()));
    let walked = run();
    let log = String::from_utf8_lossy(&walked.stderr);
    assert!(log.contains("history walked"), "{}", describe(&walked));
    assert_eq!(
        manifests_logged(&log, "history memo made"),
        Some(4),
        "each distinct manifest once:\n{log}"
    );
    let replayed = run();
    let log = String::from_utf8_lossy(&replayed.stderr);
    assert!(
        log.contains("history memo replayed"),
        "{}",
        describe(&replayed)
    );
    assert_eq!(
        manifests_logged(&log, "history memo read"),
        Some(4),
        "and read back once:\n{log}"
    );

    // Shared or not, every commit answers for every object it holds.
    for out in [&walked, &replayed] {
        assert_eq!(out.status.code(), Some(0), "{}", describe(out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().count(), 6, "{stdout}");
        for rev in &revs {
            for key in ["a", "b"] {
                assert!(
                    stdout.lines().any(|l| l == format!("ok {rev}:{key}")),
                    "{rev}:{key} in\n{stdout}"
                );
            }
        }
    }
    assert_eq!(walked.stdout, replayed.stdout);

    // `b`'s one pin, deleted behind tether's back, is missing at every
    // commit that holds it, not only at the first one read.
    let tag = sb.tags().into_iter().next().expect("b's pin");
    sb.delete_tag(&tag);
    let out = run();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for rev in &revs {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("missing ") && l.contains(&format!("{rev}:b"))),
            "{rev}:b missing in\n{stdout}"
        );
    }
}
