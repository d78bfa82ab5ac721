//! Two `tether` processes on one checkout at once (issue 29, point 5; spec
//! 14, "One writer per checkout, one per repository"): for every pair of
//! writers that can run together, many rounds of the real binary started
//! side by side. Whatever the interleaving, no update is lost: the final
//! `workspace.toml`, manifests, VCS and journal agree with each other and
//! with the commands that said they succeeded. A command that loses is
//! refused, either by the lock (the error names the lock and the process
//! holding it) or by its plan going stale under it, and writes nothing.
//!
//! commit/commit, new/new and status --snapshot/new run on git and on jj
//! (the VCS moves under the same locks); gc/commit and open/promote on git.
//!
//! In each round one of the two is impatient (`TETHER_LOCK_TIMEOUT`, a
//! fraction of a second) so that losing the lock is possible; which one
//! alternates. The other waits as long as a user's command would. How each
//! round went depends on the scheduler, so the tests count the outcomes and
//! assert what must hold after every one of them; the refusal message itself
//! is pinned down deterministically by
//! `a_held_lock_refuses_every_writer_naming_it_and_its_holder`.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};

use crate::support::{Dataset, MemoryStore, Vcs, describe};
use serde_json::{Value, json};
use tether::model::WorkspaceState;

/// Rounds per pair: enough interleavings to matter, few enough that the
/// suite stays within tens of seconds.
const ROUNDS: usize = 12;

/// The impatient process's lock wait, in seconds.
const IMPATIENT: &str = "0.05";

/// How one process of a round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Succeeded,
    /// Refused by the checkout or repository lock, the holder named.
    LostTheLock,
    /// Refused because the other one moved what its plan checked.
    Stale,
}

struct Run {
    args: String,
    pid: u32,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn start(d: &Dataset, args: &[&str], impatient: bool) -> Child {
    let mut c = d.command(env!("CARGO_BIN_EXE_tether"), &d.root());
    c.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("TETHER_LOCK_TIMEOUT");
    if impatient {
        c.env("TETHER_LOCK_TIMEOUT", IMPATIENT);
    }
    c.spawn().expect("start tether")
}

fn finish(child: Child, args: &[&str]) -> Run {
    let pid = child.id();
    let out = child.wait_with_output().expect("wait for tether");
    Run {
        args: args.join(" "),
        pid,
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Start `a` and `b` together (`a` impatient on even rounds, `b` on odd
/// ones), wait for both, and judge each against the other.
fn race(d: &Dataset, round: usize, a: &[&str], b: &[&str]) -> [(Outcome, Run); 2] {
    let ca = start(d, a, round.is_multiple_of(2));
    let cb = start(d, b, !round.is_multiple_of(2));
    let ra = finish(ca, a);
    let rb = finish(cb, b);
    let (oa, ob) = (judge(&ra, &rb), judge(&rb, &ra));
    [(oa, ra), (ob, rb)]
}

fn judge(run: &Run, other: &Run) -> Outcome {
    if run.code == Some(0) {
        return Outcome::Succeeded;
    }
    let err = &run.stderr;
    assert_eq!(run.code, Some(1), "tether {}: {err}", run.args);
    if err.contains("another tether is running in this") {
        assert!(
            err.contains("checkout lock") || err.contains("repository lock"),
            "tether {}: the refusal names the lock: {err}",
            run.args
        );
        assert!(
            err.contains(".tether/lock") || err.contains("tether.lock"),
            "tether {}: the refusal names the lock file: {err}",
            run.args
        );
        assert!(
            err.contains(&format!("(process {})", other.pid)),
            "tether {}: the refusal names the holder, process {}: {err}",
            run.args,
            other.pid
        );
        return Outcome::LostTheLock;
    }
    assert!(
        err.contains("plan is stale, and nothing was applied"),
        "tether {} lost the race in an unexpected way:\n{err}\n(the other, `tether {}`, said: {})",
        run.args,
        other.args,
        other.stderr
    );
    Outcome::Stale
}

/// Counts of outcomes per command, printed for the record.
#[derive(Default)]
struct Tally(BTreeMap<(String, Outcome), usize>);

impl Tally {
    fn add(&mut self, command: &str, outcome: Outcome) {
        *self.0.entry((command.to_string(), outcome)).or_default() += 1;
    }

    fn print(&self, pair: &str) {
        eprintln!("{pair}: {ROUNDS} rounds: {:?}", self.0);
    }
}

fn workspace(d: &Dataset) -> WorkspaceState {
    WorkspaceState::read(&d.root().join(".tether/workspace.toml"))
        .unwrap()
        .expect("workspace.toml exists")
}

/// No journal entry is left INCOMPLETE: every process that started one
/// finished it (a refused one never started).
fn no_incomplete(d: &Dataset) {
    for op in d.ops() {
        assert_eq!(op["status"], "done", "an unfinished entry: {op}");
    }
}

/// The completed entries of `command`, oldest first.
fn done_ops(d: &Dataset, command: &str) -> Vec<Value> {
    let mut ops: Vec<Value> = d
        .ops()
        .into_iter()
        .filter(|o| o["command"] == command && o["status"] == "done")
        .collect();
    ops.reverse();
    ops
}

fn dataset_with(names: &[&str]) -> (Dataset, Vec<MemoryStore>) {
    dataset_in(Vcs::Git, names)
}

fn dataset_in(vcs: Vcs, names: &[&str]) -> (Dataset, Vec<MemoryStore>) {
    let d = Dataset::init_in(vcs);
    let stores: Vec<MemoryStore> = names
        .iter()
        .map(|n| {
            let s = d.memory_store(n);
            s.write(json!({"v": 0}), "first");
            d.add_memory(n, &s);
            s
        })
        .collect();
    d.ok(&["commit", "-m", "adopt"]);
    (d, stores)
}

fn state_of(d: &Dataset, key: &str) -> String {
    d.manifest(key)["state"]["snapshot_id"]
        .as_str()
        .expect("a recorded state")
        .to_string()
}

fn commit_and_commit(vcs: Vcs) {
    let (d, stores) = dataset_in(vcs, &["img"]);
    let img = &stores[0];
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let head = img.write(json!({"v": round + 1}), "write");
        let before = done_ops(&d, "commit").len();
        let ma = format!("a{round}");
        let mb = format!("b{round}");
        let runs = race(&d, round, &["commit", "-m", &ma], &["commit", "-m", &mb]);
        for (o, _) in &runs {
            tally.add("commit", *o);
        }
        let won = runs
            .iter()
            .filter(|(o, _)| *o == Outcome::Succeeded)
            .count();
        no_incomplete(&d);
        let commits = done_ops(&d, "commit");
        if won == 0 {
            assert_eq!(commits.len(), before, "nothing landed");
            continue;
        }
        // Exactly one commit recorded the new state (a winner that came
        // second found nothing left to commit), and it is the last one.
        assert_eq!(commits.len(), before + 1, "{commits:?}");
        assert_eq!(
            state_of(&d, "img"),
            head,
            "the manifest has this round's state"
        );
        assert!(
            d.uncommitted()
                .iter()
                .all(|f| !f.contains(".tether/objects")),
            "the manifest is committed: {:?}",
            d.uncommitted()
        );
        let last = d.subjects()[0].clone();
        assert!(last == ma || last == mb, "{last}");
        let ws = workspace(&d);
        assert_eq!(
            ws.last_snapshot["img"]["snapshot_id"], head,
            "the snapshot cache agrees with the manifest"
        );
        assert_eq!(ws.bookmark.as_deref(), Some("main"));
    }
    tally.print(&format!("commit/commit ({vcs:?})"));
    d.ok(&["verify"]);
}

crate::for_each_vcs!(commit_and_commit, new_and_new, status_snapshot_and_new);

fn new_and_new(vcs: Vcs) {
    let (d, _) = dataset_in(vcs, &["img"]);
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let x = format!("x{round}");
        let y = format!("y{round}");
        let runs = race(&d, round, &["new", "-b", &x], &["new", "-b", &y]);
        for (o, _) in &runs {
            tally.add("new", *o);
        }
        no_incomplete(&d);
        let won: Vec<&str> = runs
            .iter()
            .filter(|(o, _)| *o == Outcome::Succeeded)
            .map(|(_, r)| {
                if r.args.ends_with(&x) {
                    x.as_str()
                } else {
                    y.as_str()
                }
            })
            .collect();
        let ws = workspace(&d);
        let on = ws.bookmark.clone().expect("on a bookmark");
        // workspace.toml, the VCS and the journal name the same bookmark:
        // the one the last `new` to finish chose.
        assert_eq!(d.current_bookmark(), on, "workspace.toml and the VCS agree");
        let last = done_ops(&d, "new").pop().expect("a new finished once");
        assert_eq!(last["result"]["report"]["bookmark"], json!(on), "{last}");
        if won.is_empty() {
            continue;
        }
        assert!(won.contains(&on.as_str()), "{on} is a winner's: {won:?}");
        let wr = d.working_ref(&on);
        for (k, r) in ws.working_refs.iter().chain(&ws.pending_forks) {
            assert_eq!(r, &wr, "{k} works on {on}'s branch");
        }
        assert!(
            ws.pending_forks.contains_key("img") || ws.working_refs.contains_key("img"),
            "img has a place on {on}"
        );
    }
    tally.print(&format!("new/new ({vcs:?})"));
}

fn status_snapshot_and_new(vcs: Vcs) {
    // The lost update of issue 29: a snapshot rewriting workspace.toml from
    // what it read before a concurrent `new -b` wrote it, after which `open`
    // handed out the trunk's branch.
    let (d, stores) = dataset_in(vcs, &["img"]);
    let img = &stores[0];
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let s = format!("s{round}");
        let runs = race(&d, round, &["status", "--snapshot"], &["new", "-b", &s]);
        tally.add("status --snapshot", runs[0].0);
        tally.add("new", runs[1].0);
        no_incomplete(&d);
        let ws = workspace(&d);
        if runs[1].0 != Outcome::Succeeded {
            continue;
        }
        let wr = d.working_ref(&s);
        assert_eq!(
            ws.bookmark.as_deref(),
            Some(s.as_str()),
            "{}",
            d.workspace_text()
        );
        assert_eq!(d.current_bookmark(), s);
        assert_eq!(
            ws.pending_forks.get("img"),
            Some(&wr),
            "{}",
            d.workspace_text()
        );
        assert!(!ws.working_refs.contains_key("img"));
        // A job opening img writes on this bookmark's branch, not main.
        let opened: Value =
            serde_json::from_str(&d.ok(&["open", "img", "--json"])).expect("open --json");
        assert_eq!(opened["read_only"], false);
        let address = opened["address"].as_str().unwrap();
        assert!(address.ends_with(&format!("#{wr}")), "{address}");
        assert_eq!(img.branch(&wr), Some(img.head()));
        if runs[0].0 == Outcome::Succeeded {
            let status = &runs[0].1.stdout;
            assert!(status.contains("img"), "{status}");
        }
    }
    tally.print(&format!("status --snapshot/new ({vcs:?})"));
}

#[test]
fn gc_and_commit() {
    let (d, stores) = dataset_with(&["img"]);
    let img = &stores[0];
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let head = img.write(json!({"v": round + 1}), "write");
        let m = format!("c{round}");
        let runs = race(&d, round, &["gc", "--no-dry-run"], &["commit", "-m", &m]);
        tally.add("gc", runs[0].0);
        tally.add("commit", runs[1].0);
        no_incomplete(&d);
        // Whatever gc did, every pin a manifest names is still there.
        let out = d.tether(&["verify"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        if runs[1].0 == Outcome::Succeeded {
            assert_eq!(state_of(&d, "img"), head);
            let pin = d.manifest("img")["pin"]["ref"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(img.tag(&pin), Some(head.clone()), "gc kept the new pin");
        }
    }
    tally.print("gc/commit");
}

#[test]
fn open_and_promote() {
    // Both write workspace.toml under the locks: `open` of `b` moves its
    // deferred fork into `working_refs`, `promote a` records a's new fork
    // point. Neither may lose the other's field.
    let (d, stores) = dataset_with(&["a", "b"]);
    let (a, b) = (&stores[0], &stores[1]);
    let mut tally = Tally::default();
    for round in 0..ROUNDS {
        let p = format!("p{round}");
        let wr = d.working_ref(&p);
        d.ok(&["new", "-b", &p]);
        d.ok(&["open", "a"]);
        let written = a.write_on(&wr, json!({"v": round + 1}), "on the bookmark");
        d.ok(&["commit", "-m", &format!("work {round}")]);
        let runs = race(
            &d,
            round,
            &["open", "b", "--json"],
            &["promote", "a", "--strategy", "ff"],
        );
        tally.add("open", runs[0].0);
        tally.add("promote", runs[1].0);
        no_incomplete(&d);
        let ws = workspace(&d);
        if runs[0].0 == Outcome::Succeeded {
            assert_eq!(
                ws.working_refs.get("b"),
                Some(&wr),
                "{}",
                d.workspace_text()
            );
            assert!(!ws.pending_forks.contains_key("b"));
            assert_eq!(b.branch(&wr), Some(b.head()));
        } else {
            assert_eq!(
                ws.pending_forks.get("b"),
                Some(&wr),
                "{}",
                d.workspace_text()
            );
            assert_eq!(b.branch(&wr), None);
        }
        if runs[1].0 == Outcome::Succeeded {
            assert_eq!(a.head(), written, "a's base moved");
            assert_eq!(
                ws.fork_points["a"]["snapshot_id"],
                written,
                "{}",
                d.workspace_text()
            );
        } else {
            assert_ne!(a.head(), written);
        }
        assert_eq!(ws.working_refs.get("a"), Some(&wr));
    }
    tally.print("open/promote");
}

/// Every writer, and the snapshot's cache write, facing a lock another
/// process holds: refused, naming the lock file and the holder's pid.
#[test]
fn a_held_lock_refuses_every_writer_naming_it_and_its_holder() {
    let (d, stores) = dataset_with(&["img"]);
    stores[0].write(json!({"v": 1}), "write");
    // img's fork deferred: the first writable open has one to make.
    d.ok(&["new", "-b", "deferred"]);
    let guard = tether::lock::lock_checkout(&d.root().join(".tether")).unwrap();
    let written = d.written();
    let holder = format!("(process {})", std::process::id());
    for args in [
        &["status", "--snapshot"][..],
        &["snapshot"],
        &["commit", "-m", "held"],
        &["new", "-b", "held"],
        &["gc", "--no-dry-run"],
        &["open", "img", "--writable"],
    ] {
        let out = d
            .command(env!("CARGO_BIN_EXE_tether"), &d.root())
            .args(args)
            .env("TETHER_LOCK_TIMEOUT", "0.2")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let what = args.join(" ");
        assert_eq!(out.status.code(), Some(1), "{what}: {}", describe(&out));
        assert!(
            err.contains("another tether is running in this checkout")
                && err.contains("checkout lock")
                && err.contains(".tether/lock")
                && err.contains(&holder),
            "{what}: {err}"
        );
    }
    assert_eq!(d.written(), written, "a refused command wrote nothing");
    drop(guard);
    d.ok(&["status", "--snapshot"]);
}

/// A pin's store write waits for the store's lock while another process
/// holds it (pins run where the plugin call is, not on a blocking thread,
/// unless the lock is taken), then lands once it is released.
#[test]
fn a_pin_waits_for_a_store_lock_another_process_holds() {
    use sha2::{Digest, Sha256};
    let (d, stores) = dataset_with(&["a"]);
    d.ok(&["commit", "-m", "first pins"]);
    stores[0].write(json!({"round": 1}), "round 1");
    // The lock of the store's tag directory, named as the local store names
    // it: one of 4,096 buckets, by the hash of the canonical root and the
    // directory under it.
    let root = std::fs::canonicalize(&stores[0].root).unwrap();
    let mut h = Sha256::new();
    h.update(root.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(b"refs/tags");
    let digest = h.finalize();
    let bucket = u16::from_be_bytes([digest[0], digest[1]]) % 4096;
    let lock = tether_testkit::cache_dir()
        .join("locks")
        .join(format!("{bucket:03x}.lock"));
    let held = std::fs::File::open(&lock)
        .unwrap_or_else(|e| panic!("the first commit's lock file {}: {e}", lock.display()));
    fs4::FileExt::lock(&held).unwrap();
    let mut child = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .args(["commit", "-m", "round 1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the commit went on while its store's lock was held"
    );
    assert_eq!(stores[0].tags().len(), 1, "no pin written under the lock");
    fs4::FileExt::unlock(&held).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stores[0].tags().len(), 2);
    assert_eq!(state_of(&d, "a"), stores[0].head());
}
