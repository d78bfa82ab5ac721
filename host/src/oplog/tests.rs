//! Unit tests of the operation log: entries on disk before a side effect,
//! progress and completion, torn tails, ids, and what `undo` may pick.

use super::*;
use std::io::Write;

fn journal() -> (tempfile::TempDir, Journal) {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::open(ops_path(dir.path()));
    (dir, j)
}

fn lines(j: &Journal) -> Vec<Value> {
    std::fs::read_to_string(j.path())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn started_is_on_disk_before_begin_returns() {
    let (_dir, j) = journal();
    let mut plan = Plan::new("commit");
    plan.note("db: unchanged");
    let op = j
        .start(
            NewOp::new("commit")
                .plan(&plan)
                .pre("workspace", json!({"bookmark": "main"})),
        )
        .unwrap();
    // Read the file itself, as a crash right now would leave it.
    let on_disk = lines(&j);
    assert_eq!(on_disk.len(), 1);
    assert_eq!(on_disk[0]["record"], json!("started"));
    assert_eq!(on_disk[0]["id"], json!(op.id()));
    assert_eq!(on_disk[0]["command"], json!("commit"));
    assert_eq!(on_disk[0]["plan"]["digest"], json!(plan.digest()));
    assert_eq!(on_disk[0]["pre"]["workspace"]["bookmark"], json!("main"));
    assert!(std::fs::read_to_string(j.path()).unwrap().ends_with('\n'));
}

#[test]
fn progress_and_finish_complete_an_entry() {
    let (_dir, j) = journal();
    let mut op = j.begin("new", None, None).unwrap();
    op.progress(json!({"action": "fork", "key": "db", "ref": "tether.ws.x.b"}))
        .unwrap();
    assert_eq!(lines(&j).len(), 2);
    let id = op
        .finish_with_pre(
            json!({"summary": "forked db"}),
            Some(json!({"reset_heads": {"db": "H0"}})),
        )
        .unwrap();
    let e = j.get(&id).unwrap();
    assert_eq!(e.status, "done");
    assert!(!e.is_incomplete());
    assert_eq!(
        e.progress,
        vec![json!({"action": "fork", "key": "db", "ref": "tether.ws.x.b"})]
    );
    assert_eq!(e.result["summary"], json!("forked db"));
    assert_eq!(e.pre["reset_heads"]["db"], json!("H0"));
    assert_eq!(e.plan, None);
    assert!(e.flags().is_empty());
}

#[test]
fn an_interrupted_op_reads_back_incomplete() {
    let (_dir, j) = journal();
    let done = j.begin("commit", None, None).unwrap();
    let done_id = done.finish(json!({"vcs_commit": "c0ffee"})).unwrap();
    let mut op = j.begin("gc", None, None).unwrap();
    op.progress(json!({"action": "unpin", "pin": "p1"}))
        .unwrap();
    let id = op.id().to_string();
    drop(op); // the process dies here

    let incomplete = j.incomplete().unwrap();
    assert_eq!(incomplete.len(), 1);
    assert_eq!(incomplete[0].id, id);
    assert_eq!(incomplete[0].progress.len(), 1);
    assert_eq!(incomplete[0].flags(), vec!["INCOMPLETE".to_string()]);
    assert!(incomplete[0].render().ends_with("  INCOMPLETE"));
    assert_eq!(j.get(&done_id).unwrap().vcs_commit(), Some("c0ffee"));

    let err = j.undo_target(None).unwrap_err();
    assert!(matches!(err, OplogError::Incomplete { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("INCOMPLETE"), "{msg}");
    assert!(msg.contains("tether repair --dry-run"), "{msg}");
    assert!(msg.contains("`tether gc` again"), "{msg}");
}

#[test]
fn a_closed_entry_is_no_longer_incomplete_and_still_not_undoable() {
    let (_dir, j) = journal();
    let killed = j.begin("gc", None, None).unwrap();
    let killed_id = killed.id().to_string();
    drop(killed);
    let done = j.begin("gc", None, None).unwrap();
    let done_id = done
        .finish_closing(
            json!({"summary": "gc"}),
            std::slice::from_ref(&killed_id),
            "finished by gc",
        )
        .unwrap();
    // One append: the completion and the close mark land together.
    let on_disk = lines(&j);
    assert_eq!(on_disk.len(), 4);
    assert_eq!(on_disk[3]["record"], json!("closed"));
    assert_eq!(on_disk[3]["op"], json!(killed_id));

    assert!(j.incomplete().unwrap().is_empty());
    let e = j.get(&killed_id).unwrap();
    assert_eq!(e.status, STATUS_CLOSED);
    assert_eq!(e.closed_by(), Some(done_id.as_str()));
    assert_eq!(e.result["summary"], json!("finished by gc"));
    assert_eq!(
        e.flags(),
        vec![format!("(interrupted; closed by {done_id})")]
    );
    let err = j.undo_target(Some(&killed_id)).unwrap_err();
    assert!(matches!(err, OplogError::Closed { .. }), "{err}");
    assert!(err.to_string().contains("cannot be undone"), "{err}");

    // Closing again, or closing a completed entry, changes nothing.
    j.close(&[killed_id.clone(), done_id.clone()], "later", "again")
        .unwrap();
    assert_eq!(
        j.get(&killed_id).unwrap().closed_by(),
        Some(done_id.as_str())
    );
    assert_eq!(j.get(&done_id).unwrap().status, STATUS_DONE);
}

#[test]
fn a_torn_last_line_is_tolerated_and_the_next_entry_starts_fresh() {
    let (_dir, j) = journal();
    let first = j
        .begin("commit", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    // A crash mid-append leaves half a line with no newline.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(j.path())
        .unwrap();
    f.write_all(br#"{"record":"started","id":"ffff"#).unwrap();
    drop(f);
    assert_eq!(j.entries().unwrap().len(), 1);

    let second = j
        .begin("new", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let text = std::fs::read_to_string(j.path()).unwrap();
    let raw: Vec<&str> = text.lines().collect();
    assert_eq!(raw.len(), 5, "{text}");
    assert_eq!(raw[2], r#"{"record":"started","id":"ffff"#);
    let ids: Vec<String> = j.entries().unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(ids, vec![first, second]);
}

#[test]
fn ids_are_twelve_hex_and_unique_in_the_log() {
    let id = new_op_id();
    assert_eq!(id.len(), 12);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));

    let (_dir, j) = journal();
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(
            j.begin("add", None, None)
                .unwrap()
                .finish(json!({}))
                .unwrap(),
        );
    }
    // The log keeps its own order whatever the ids are.
    let listed: Vec<String> = j.entries().unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(listed, ids);
    // With the OS's entropy, starting an operation reads nothing of the log
    // (it is tens of MB after a few large commits): only an id made from the
    // clock is searched for.
    let scans = super::LOG_SCANS.load(std::sync::atomic::Ordering::Relaxed);
    j.begin("add", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    assert_eq!(
        super::LOG_SCANS.load(std::sync::atomic::Ordering::Relaxed),
        scans
    );
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ids.len());

    // An id already in the log is drawn again.
    let log = format!("{}\n", json!({"record": "started", "id": "aaaaaaaaaaaa"}));
    let mut draws = ["aaaaaaaaaaaa", "bbbbbbbbbbbb"].into_iter();
    assert_eq!(
        unique_id(&mut std::io::Cursor::new(log.as_bytes()), || draws
            .next()
            .unwrap()
            .to_string())
        .unwrap(),
        "bbbbbbbbbbbb"
    );
    // Also where the id straddles two of the reads it is searched in: a
    // reader that hands out 5 bytes at a time.
    struct Trickle<'a>(std::io::Cursor<&'a [u8]>);
    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(5);
            self.0.read(&mut buf[..n])
        }
    }
    impl std::io::Seek for Trickle<'_> {
        fn seek(&mut self, pos: std::io::SeekFrom) -> std::io::Result<u64> {
            self.0.seek(pos)
        }
    }
    let long = format!("{}{log}", "x".repeat(1_000_003));
    let mut draws = ["aaaaaaaaaaaa", "bbbbbbbbbbbb"].into_iter();
    let mut reader = Trickle(std::io::Cursor::new(long.as_bytes()));
    assert_eq!(
        unique_id(&mut reader, || draws.next().unwrap().to_string()).unwrap(),
        "bbbbbbbbbbbb"
    );
}

#[test]
fn short_ids_are_the_shortest_unique_prefixes() {
    let short = short_ids([
        "6b0ec9310000",
        "6b0ec9320000",
        "6b0ec9320001",
        "f00000000000",
    ]);
    assert_eq!(short["6b0ec9310000"], "6b0ec931");
    assert_eq!(short["6b0ec9320000"], "6b0ec9320000");
    assert_eq!(short["6b0ec9320001"], "6b0ec9320001");
    // Unique from the first digit, still shown with SHORT_ID_MIN of them.
    assert_eq!(short["f00000000000"], "f000");
    assert_eq!(short_ids(["abc"])["abc"], "abc");
}

#[test]
fn old_timestamp_ids_load_and_resolve_in_full_and_by_prefix() {
    let (_dir, j) = journal();
    let old = ["6b0ec9310a1b", "6b0ec9310a1c", "6b0ec9320000"];
    let mut text = String::new();
    for id in old {
        text += &format!(
            "{{\"record\":\"started\",\"id\":\"{id}\",\"at\":\"2027-01-01T00:00:00.000Z\",\"command\":\"add\",\"plan\":null,\"pre\":{{}},\"parent\":null,\"undoes\":null}}\n\
             {{\"record\":\"done\",\"op\":\"{id}\",\"at\":\"2027-01-01T00:00:00.000Z\",\"result\":{{}}}}\n"
        );
    }
    std::fs::create_dir_all(j.path().parent().unwrap()).unwrap();
    std::fs::write(j.path(), text).unwrap();
    let fresh = j
        .begin("add", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    for id in old {
        assert_eq!(j.get(id).unwrap().id, id);
    }
    assert_eq!(j.get("6b0ec932").unwrap().id, "6b0ec9320000");
    match j.get("6b0ec931") {
        Err(OplogError::Ambiguous { matches, .. }) => {
            assert_eq!(matches, vec!["6b0ec9310a1b", "6b0ec9310a1c"])
        }
        other => panic!("{other:?}"),
    }
    let short = j.short_ids().unwrap();
    assert_eq!(short.len(), 4);
    for (id, prefix) in &short {
        assert_eq!(&j.get(prefix).unwrap().id, id);
    }
    assert!(short[&fresh].len() < fresh.len() || fresh.starts_with("6b0ec93"));
}

#[test]
fn list_is_newest_first_with_flags() {
    let (_dir, j) = journal();
    let commit = j
        .begin("commit", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let drop_op = j.begin("drop", None, None).unwrap();
    let drop_id = drop_op.id().to_string();
    let step = j
        .begin("new", None, Some(&drop_id))
        .unwrap()
        .finish(json!({}))
        .unwrap();
    drop_op
        .finish(json!({"summary": "dropped relabel"}))
        .unwrap();
    let new = j
        .begin("new", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let undo = j
        .start(NewOp::new("undo").undoes(&new))
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let pending = j.begin("gc", None, None).unwrap();

    let list = j.list(10).unwrap();
    let ids: Vec<&str> = list.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(
        ids,
        vec![pending.id(), &undo, &new, &step, &drop_id, &commit]
    );
    assert_eq!(list[0].flags(), vec!["INCOMPLETE"]);
    assert_eq!(list[1].undoes.as_deref(), Some(new.as_str()));
    assert_eq!(list[2].flags(), vec![format!("(undone by {undo})")]);
    assert_eq!(list[2].undone_by.as_deref(), Some(undo.as_str()));
    assert_eq!(list[3].flags(), vec![format!("(step of {drop_id})")]);
    assert!(
        list[4].render().contains("  drop  dropped relabel"),
        "{}",
        list[4].render()
    );
    assert_eq!(j.list(2).unwrap().len(), 2);

    let mut gone = list[5].clone();
    gone.vcs_commit_gone = true;
    assert_eq!(gone.flags(), vec!["(vcs commit gone)"]);

    // The ops --json shape of spec 09.
    let v = serde_json::to_value(&list[2]).unwrap();
    let keys: std::collections::BTreeSet<&str> =
        v.as_object().unwrap().keys().map(String::as_str).collect();
    let want: std::collections::BTreeSet<&str> = [
        "id",
        "at",
        "command",
        "plan",
        "result",
        "pre",
        "undoes",
        "undone_by",
        "status",
        "parent",
        "progress",
        "vcs_commit_gone",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, want);
}

#[test]
fn an_unfinished_undo_does_not_mark_its_target() {
    let (_dir, j) = journal();
    let new = j
        .begin("new", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let undo = j.start(NewOp::new("undo").undoes(&new)).unwrap();
    assert_eq!(j.get(&new).unwrap().undone_by, None);
    undo.finish(json!({})).unwrap();
    assert!(j.get(&new).unwrap().undone_by.is_some());
}

#[test]
fn an_interrupted_undo_is_finished_by_undoing_its_target_again() {
    let (_dir, j) = journal();
    let commit = j
        .begin("commit", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let new = j
        .begin("new", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    // Killed: the undo's started record, no completion mark.
    drop(j.start(NewOp::new("undo").undoes(&new)).unwrap());
    assert_eq!(
        j.undo_target(None).unwrap().id,
        new,
        "undo again finishes it"
    );
    // Once a later undo reversed the target, the interrupted one is over.
    j.start(NewOp::new("undo").undoes(&new))
        .unwrap()
        .finish(json!({}))
        .unwrap();
    assert_eq!(j.undo_target(None).unwrap().id, commit);
}

#[test]
fn undo_picks_the_newest_undoable_and_refuses_the_rest() {
    let (_dir, j) = journal();
    assert!(matches!(
        j.undo_target(None).unwrap_err(),
        OplogError::NothingToUndo
    ));
    let commit = j
        .begin("commit", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    let new = j
        .begin("new", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    assert_eq!(j.undo_target(None).unwrap().id, new);

    // Undos and what they reversed are skipped.
    let undo = j
        .start(NewOp::new("undo").undoes(&new))
        .unwrap()
        .finish(json!({}))
        .unwrap();
    assert_eq!(j.undo_target(None).unwrap().id, commit);
    assert!(matches!(
        j.undo_target(Some(&new)).unwrap_err(),
        OplogError::AlreadyUndone { .. }
    ));
    assert!(matches!(
        j.undo_target(Some(&undo)).unwrap_err(),
        OplogError::IsUndo { .. }
    ));

    // A drop, and its steps, are refused rather than skipped.
    let drop_op = j.begin("drop", None, None).unwrap();
    let drop_id = drop_op.id().to_string();
    let step = j
        .begin("gc", None, Some(&drop_id))
        .unwrap()
        .finish(json!({}))
        .unwrap();
    drop_op.finish(json!({})).unwrap();
    let err = j.undo_target(None).unwrap_err();
    assert!(
        matches!(err, OplogError::NotUndoable { ref command, .. } if command == "drop"),
        "{err}"
    );
    let err = j.undo_target(Some(&step)).unwrap_err();
    assert!(matches!(err, OplogError::StepOf { .. }), "{err}");
    assert!(err.to_string().contains(&drop_id));

    // An older entry by id (or a unique prefix of it).
    assert_eq!(j.undo_target(Some(&commit)).unwrap().id, commit);
    assert!(matches!(
        j.get("zzzz").unwrap_err(),
        OplogError::NotFound { .. }
    ));
}

#[test]
fn an_interrupted_drop_names_what_finishes_it() {
    let (_dir, j) = journal();
    let mut plan = Plan::new("drop");
    plan.context.insert("bookmark".into(), json!("relabel"));
    let op = j.begin("drop", Some(&plan), None).unwrap();
    drop(op);
    let msg = j.undo_target(None).unwrap_err().to_string();
    assert!(msg.contains("`tether drop relabel --no-dry-run`"), "{msg}");
}

#[test]
fn mark_undone_appends_a_mark() {
    let (_dir, j) = journal();
    let a = j
        .begin("new", None, None)
        .unwrap()
        .finish(json!({}))
        .unwrap();
    j.mark_undone(&a, "0123456789ab").unwrap();
    assert_eq!(
        j.get(&a).unwrap().undone_by.as_deref(),
        Some("0123456789ab")
    );
    assert_eq!(lines(&j).last().unwrap()["record"], json!("undone"));
}

#[test]
fn a_missing_log_is_empty() {
    let (_dir, j) = journal();
    assert!(j.entries().unwrap().is_empty());
    assert!(j.list(5).unwrap().is_empty());
    assert!(!j.path().exists());
}
