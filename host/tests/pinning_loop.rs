//! The pinning loop end to end, through the `tether` binary, as
//! spec/03-getting-started.md and spec/05-pinning.md tell it: on git, on jj and
//! on colocated jj (each test runs once per VCS), with a directory of files
//! (`file`, Observed) and a memory store kept in a local directory (`memory`,
//! Forkable, standing in for the Icechunk repository). Outputs are compared
//! line by line with what the spec prints; what was written is read back with
//! the VCS's own CLI (git, or jj) and with plain file reads of the stores.

use crate::support::{Dataset, MemoryStore, Vcs, describe, is_hex, lines, stderr, stdout};
use serde_json::{Value, json};

const BASELINE: &str = "Baseline: plate1\nimaging and\nraw files";

/// The getting-started data: a directory of three 64-byte files, and a
/// memory store whose `main` holds one state (the "empty labels").
struct Story {
    d: Dataset,
    store: MemoryStore,
}

impl Story {
    /// Data, `tether init`, both objects added (nothing contacted yet).
    fn new(vcs: Vcs) -> Story {
        let d = Dataset::init_in(vcs);
        let raw = d.data().join("raw/plate1");
        std::fs::create_dir_all(&raw).unwrap();
        for i in 0..3u8 {
            std::fs::write(raw.join(format!("well_{i}.tif")), [i; 64]).unwrap();
        }
        let store = d.memory_store("imaging");
        store.write(json!({"labels": "0"}), "plate1: empty labels");
        let added = d.ok(&["add", "raw/plate1", "--kind", "file", "../data/raw/plate1/"]);
        assert_eq!(added, "added raw/plate1 [file]\n");
        // The relative path is resolved against the directory add ran in.
        let added = d.ok(&[
            "add",
            "zarr/imaging",
            "--kind",
            "memory",
            "--set",
            "system=../data/imaging",
        ]);
        assert_eq!(added, "added zarr/imaging [memory]\n");
        Story { d, store }
    }

    fn raw(&self) -> std::path::PathBuf {
        self.d.data().join("raw/plate1")
    }

    fn system(&self) -> String {
        self.store.root.display().to_string()
    }

    /// `tether commit -m MESSAGE`: the pins it printed (key -> ref), the
    /// recorded keys, and the 12-digit commit id, checked against the
    /// spec's line forms and order (pins, then records, then `committed`).
    fn commit(&self, message: &str) -> Committed {
        let out = self.d.ok(&["commit", "-m", message]);
        let ls = lines(&out);
        let (last, rest) = ls.split_last().expect("commit prints something");
        let short = last
            .strip_prefix("committed ")
            .unwrap_or_else(|| panic!("the last line is `committed <12 hex>`:\n{out}"));
        assert!(is_hex(short, 12), "{out}");
        let head = self.d.head();
        assert_eq!(head[..12], *short, "committed names the new commit");
        let mut c = Committed {
            short: short.to_string(),
            full: head,
            pins: Vec::new(),
            recorded: Vec::new(),
        };
        for l in rest {
            if let Some(p) = l.strip_prefix("pinned ") {
                assert!(
                    c.recorded.is_empty(),
                    "pins are printed before records:\n{out}"
                );
                let (key, r) = p.split_once(" -> ").expect("pinned KEY -> REF");
                c.pins.push((key.to_string(), r.to_string()));
            } else if let Some(k) = l
                .strip_suffix(" (not recoverable)")
                .and_then(|l| l.strip_prefix("recorded "))
            {
                c.recorded.push(k.to_string());
            } else {
                panic!("unexpected commit output line {l:?}:\n{out}");
            }
        }
        for (_, r) in &c.pins {
            self.check_pin_ref(r);
        }
        c
    }

    /// `tether.<dataset id>.<16 hex>`.
    fn check_pin_ref(&self, r: &str) {
        let rest = r
            .strip_prefix(&format!("tether.{}.", self.d.dataset_id()))
            .unwrap_or_else(|| panic!("{r} is tether.<dataset id>.<hash>"));
        assert!(is_hex(rest, 16), "{r}: the hash is 16 hex digits");
    }

    /// The first commit of the story, checked.
    fn baseline(&self) -> Committed {
        let c = self.commit(BASELINE);
        assert_eq!(c.recorded, ["raw/plate1"]);
        assert_eq!(c.pins.len(), 1, "{:?}", c.pins);
        assert_eq!(c.pins[0].0, "zarr/imaging");
        c
    }

    /// The imaging store gets a new state on `main`; commit pins it.
    fn relabel(&self) -> Committed {
        self.store.write(json!({"labels": "1"}), "Relabel plate1");
        let c = self.commit("Re-segmented plate1");
        assert!(
            c.recorded.is_empty(),
            "the unchanged directory is not printed: {:?}",
            c.recorded
        );
        assert_eq!(c.pins.len(), 1);
        assert_eq!(c.pins[0].0, "zarr/imaging");
        c
    }

    /// `tether ARGS`, which must exit `code`; stdout and stderr.
    fn run(&self, args: &[&str], code: i32) -> (String, String) {
        let out = self.d.tether(args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "tether {}:\n{}",
            args.join(" "),
            describe(&out)
        );
        (stdout(&out), stderr(&out))
    }
}

struct Committed {
    short: String,
    full: String,
    pins: Vec<(String, String)>,
    recorded: Vec<String>,
}

impl Committed {
    fn pin(&self) -> &str {
        &self.pins[0].1
    }
}

/// A status listing: the header, then one line per object. The cached
/// snapshot's age line (`snapshot from ...`) is not part of the spec's
/// examples and is skipped.
fn status_lines(out: &str) -> (String, Vec<String>) {
    let mut ls = lines(out).into_iter();
    let header = ls.next().expect("a header line");
    let rest: Vec<String> = ls.filter(|l| !l.starts_with("snapshot from ")).collect();
    (header, rest)
}

/// `dataset <12 hex>; on trunk bookmark main`; returns the hash.
fn trunk_header(header: &str) -> String {
    let hash = header
        .strip_prefix("dataset ")
        .and_then(|h| h.strip_suffix("; on trunk bookmark main"))
        .unwrap_or_else(|| panic!("header {header:?} is `dataset <hash>; on trunk bookmark main`"));
    assert!(is_hex(hash, 12), "{header}");
    hash.to_string()
}

for_each_vcs!(
    colocated:
    register_status_and_the_first_commit,
    pin_again_after_the_data_moves,
    open_reads_an_object_as_it_was_at_an_older_commit,
    an_immutable_directory_touched_is_clean_and_rewritten_is_an_error,
    verify_is_ok_then_finds_a_pin_deleted_behind_tethers_back,
    diff_content_lists_the_changed_files,
);

fn register_status_and_the_first_commit(vcs: Vcs) {
    let s = Story::new(vcs);
    let d = &s.d;

    // The manifests name the objects; the relative paths were stored absolute.
    let m = d.manifest("zarr/imaging");
    assert_eq!(m["kind"].as_str(), Some("memory"));
    assert_eq!(m["locator"]["system"].as_str(), Some(s.system().as_str()));
    assert!(
        m.get("state").is_none() && m.get("pin").is_none(),
        "add contacts nothing: {m}"
    );
    let uri = d.manifest("raw/plate1")["locator"]["uri"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        uri == format!("{}/", s.raw().display()) || uri == s.raw().display().to_string(),
        "{uri}"
    );

    // `status` is the first command to contact the stores.
    let (out, err) = s.run(&["status"], 0);
    let (header, objects) = status_lines(&out);
    let hash = trunk_header(&header);
    assert_eq!(
        objects,
        [
            "new raw/plate1 [file/observed] unrecoverable",
            "new zarr/imaging [memory/forkable]"
        ],
        "{out}"
    );
    assert_eq!(err, "");
    let (json, _) = s.run(&["status", "--json"], 0);
    let j: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(j["manifest_hash"], json!(hash));
    assert_eq!(j["bookmark"], json!("main"));
    assert_eq!(j["trunk"], json!(true));
    let states: Vec<(&str, &str, &str)> = j["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["key"].as_str().unwrap(),
                o["tier"].as_str().unwrap(),
                o["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("raw/plate1", "observed", "new"),
            ("zarr/imaging", "forkable", "new")
        ]
    );

    // One command pins, records, and commits.
    let c = s.baseline();
    let pin = c.pin().to_string();

    // The VCS: one commit, the message as given, the manifests and the listing.
    assert_eq!(d.history(), std::slice::from_ref(&c.full));
    assert_eq!(d.message(&c.full), BASELINE);
    let files = d.changed_files(&c.full);
    let stat = files.join("\n");
    for f in [
        ".tether/objects/raw/plate1.toml",
        ".tether/objects/zarr/imaging.toml",
        "tether.toml",
    ] {
        assert!(
            files.iter().any(|x| x == f),
            "{f} is in the commit:\n{stat}"
        );
    }
    let listings: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with(".tether/listings/"))
        .collect();
    assert_eq!(
        listings.len(),
        1,
        "the directory's listing is committed:\n{stat}"
    );
    assert!(listings[0].ends_with(".jsonl"), "{stat}");
    for f in [".tether/workspace.toml", ".tether/ops.jsonl"] {
        assert!(
            !files.iter().any(|x| x == f),
            "{f} is per checkout, never committed:\n{stat}"
        );
    }
    assert_eq!(
        d.uncommitted(),
        Vec::<String>::new(),
        "everything tether wrote is committed or ignored"
    );

    // The manifests record the states; the pin is a tag in the store naming
    // the snapshot `main` held.
    let head = s.store.head();
    let m = d.manifest("zarr/imaging");
    assert_eq!(m["state"]["snapshot_id"].as_str(), Some(head.as_str()));
    assert_eq!(m["recoverable"].as_bool(), Some(true));
    assert_eq!(m["pin"]["ref"].as_str(), Some(pin.as_str()));
    assert_eq!(
        Some(m["pin"]["id"].as_str().unwrap()),
        pin.strip_prefix("tether.")
    );
    assert_eq!(
        s.store.tag(&pin),
        Some(head.clone()),
        "refs/tags/{pin}.json names the snapshot"
    );
    assert_eq!(s.store.tags(), std::slice::from_ref(&pin));
    let m = d.manifest("raw/plate1");
    assert_eq!(m["recoverable"].as_bool(), Some(false));
    assert!(m.get("pin").is_none(), "{m}");
    assert_eq!(m["state"]["type"].as_str(), Some("dir"), "{m}");
    assert_eq!(m["state"]["count"].as_integer(), Some(3), "{m}");
    assert_eq!(m["state"]["size"].as_integer(), Some(192), "{m}");
    assert!(m["state"]["digest"].is_str(), "{m}");
    let listing = std::fs::read_to_string(d.root().join(listings[0])).unwrap();
    let mut entries: Vec<(String, u64)> = listing
        .lines()
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            (
                e["p"].as_str().unwrap().to_string(),
                e["s"].as_u64().unwrap(),
            )
        })
        .collect();
    entries.sort();
    let expected: Vec<(String, u64)> = (0..3).map(|i| (format!("well_{i}.tif"), 64)).collect();
    assert_eq!(entries, expected, "{listing}");

    // After the commit both objects are clean.
    let (out, _) = s.run(&["status"], 0);
    let (header, objects) = status_lines(&out);
    assert_ne!(
        trunk_header(&header),
        hash,
        "the header hashes the manifests as they are now"
    );
    assert_eq!(
        objects,
        [
            "clean raw/plate1 [file/observed] unrecoverable",
            "clean zarr/imaging [memory/forkable]"
        ],
        "{out}"
    );

    // Commit again without changing anything: every object is unchanged and
    // no new refs are created.
    let (out, _) = s.run(&["commit", "-m", "again", "--json"], 0);
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        j,
        json!({"vcs_commit": null, "pinned": {}, "unrecoverable": [], "unchanged": ["raw/plate1", "zarr/imaging"]})
    );
    assert_eq!(d.head(), c.full);
    assert_eq!(s.store.tags(), [pin]);
}

fn pin_again_after_the_data_moves(vcs: Vcs) {
    let s = Story::new(vcs);
    let d = &s.d;
    let c1 = s.baseline();
    let head = s
        .store
        .write(json!({"labels": "1", "masks": "1"}), "Re-segmented plate1");

    // Plain status shows the last snapshot and contacts nothing.
    let (out, _) = s.run(&["status"], 0);
    assert_eq!(
        status_lines(&out).1[1],
        "clean zarr/imaging [memory/forkable]",
        "{out}"
    );
    // --snapshot fingerprints: the moved branch is modified (exit 0).
    let (out, err) = s.run(&["status", "--snapshot"], 0);
    let (header, objects) = status_lines(&out);
    trunk_header(&header);
    assert_eq!(
        objects,
        [
            "clean raw/plate1 [file/observed] unrecoverable",
            "modified zarr/imaging [memory/forkable]"
        ],
        "{out}"
    );
    assert_eq!(err, "");

    let out = d.ok(&[
        "commit",
        "-m",
        "Re-segmented plate1;\nmetrics through 2026-09-04",
    ]);
    let ls = lines(&out);
    assert_eq!(
        ls.len(),
        2,
        "only the changed object and the commit are printed:\n{out}"
    );
    let pin2 = ls[0]
        .strip_prefix("pinned zarr/imaging -> ")
        .expect("pinned zarr/imaging -> REF")
        .to_string();
    s.check_pin_ref(&pin2);
    assert_ne!(pin2, c1.pin());
    let head2 = d.head();
    assert_eq!(ls[1], format!("committed {}", &head2[..12]));

    // Both pins hold their states; only the imaging manifest changed.
    assert_eq!(s.store.tag(c1.pin()), Some(c1_state(d, &c1.full)));
    assert_eq!(s.store.tag(&pin2), Some(head.clone()));
    assert_eq!(
        d.manifest("zarr/imaging")["state"]["snapshot_id"].as_str(),
        Some(head.as_str())
    );
    assert_eq!(
        d.changed_files(&head2),
        [".tether/objects/zarr/imaging.toml"]
    );
    assert_eq!(
        d.subjects(),
        [
            "Re-segmented plate1; metrics through 2026-09-04",
            "Baseline: plate1 imaging and raw files"
        ]
    );
    let (out, _) = s.run(&["status"], 0);
    assert_eq!(
        status_lines(&out).1,
        [
            "clean raw/plate1 [file/observed] unrecoverable",
            "clean zarr/imaging [memory/forkable]"
        ],
        "{out}"
    );
}

/// The snapshot id the imaging manifest recorded at `rev`, read with the VCS.
fn c1_state(d: &Dataset, rev: &str) -> String {
    let text = d.show(rev, ".tether/objects/zarr/imaging.toml");
    let m: toml::Value = toml::from_str(&text).unwrap();
    m["state"]["snapshot_id"].as_str().unwrap().to_string()
}

fn open_reads_an_object_as_it_was_at_an_older_commit(vcs: Vcs) {
    let s = Story::new(vcs);
    let c1 = s.baseline();
    let c2 = s.relabel();

    let (out, _) = s.run(&["open", "zarr/imaging", "--rev", &c1.short], 0);
    assert_eq!(out.trim_end(), format!("{}#{}", s.system(), c1.pin()));
    let (out, _) = s.run(&["open", "zarr/imaging", "-r", &c2.short], 0);
    assert_eq!(out.trim_end(), format!("{}#{}", s.system(), c2.pin()));
    let (out, _) = s.run(&["open", "zarr/imaging", "--rev", &c1.full, "--json"], 0);
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["key"], json!("zarr/imaging"));
    assert_eq!(j["read_only"], json!(true));
    assert_eq!(j["address"], json!(format!("{}#{}", s.system(), c1.pin())));
    assert!(j["type"].is_string(), "{j}");

    // The directory's state is a digest, not an address.
    let (out, err) = s.run(&["open", "raw/plate1", "--rev", &c1.short], 1);
    assert_eq!(out, "");
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("raw/plate1"), "{err}");
}

fn an_immutable_directory_touched_is_clean_and_rewritten_is_an_error(vcs: Vcs) {
    let s = Story::new(vcs);
    s.baseline();

    // A touch is not a change.
    let well1 = s.raw().join("well_1.tif");
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(120);
    std::fs::File::options()
        .write(true)
        .open(&well1)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let (out, err) = s.run(&["status", "--snapshot"], 0);
    assert_eq!(
        status_lines(&out).1,
        [
            "clean raw/plate1 [file/observed] unrecoverable",
            "clean zarr/imaging [memory/forkable]"
        ],
        "{out}"
    );
    assert_eq!(err, "");

    // New bytes (same size) are: status labels it error, says why on stderr,
    // and exits 1.
    std::fs::write(s.raw().join("well_2.tif"), [9u8; 64]).unwrap();
    let (out, err) = s.run(&["status", "--snapshot"], 1);
    assert_eq!(
        status_lines(&out).1,
        [
            "error raw/plate1 [file/observed] unrecoverable",
            "clean zarr/imaging [memory/forkable]"
        ],
        "{out}"
    );
    assert_eq!(
        err.trim_end(),
        "error: raw/plate1: [raw/plate1] immutable object 'raw/plate1' changed since it was committed; \
         re-register with acceptance to record the new state"
    );
    // The cached snapshot keeps saying so.
    let (out, _) = s.run(&["status"], 1);
    assert_eq!(
        status_lines(&out).1[0],
        "error raw/plate1 [file/observed] unrecoverable",
        "{out}"
    );
}

fn verify_is_ok_then_finds_a_pin_deleted_behind_tethers_back(vcs: Vcs) {
    let s = Story::new(vcs);
    let c1 = s.baseline();
    let c2 = s.relabel();

    // Working-tree manifests: the one pin resolves; the directory has none.
    let (out, _) = s.run(&["verify"], 0);
    assert_eq!(lines(&out), ["ok zarr/imaging"], "{out}");
    let (out, _) = s.run(&["verify", "--all-history"], 0);
    let mut expected = vec![
        format!("ok {}:zarr/imaging", c1.short),
        format!("ok {}:zarr/imaging", c2.short),
    ];
    expected.sort();
    assert_eq!(lines(&out), expected, "{out}");

    // Someone deletes the first pin in the store.
    s.store.delete_tag(c1.pin());
    let (out, _) = s.run(&["verify"], 0);
    assert_eq!(
        lines(&out),
        ["ok zarr/imaging"],
        "the working tree names the second pin: {out}"
    );
    let (out, _) = s.run(&["verify", "--all-history"], 1);
    let ls = lines(&out);
    assert_eq!(ls.len(), 2, "{out}");
    let missing = format!("missing {}:zarr/imaging", c1.short);
    let ok = format!("ok {}:zarr/imaging", c2.short);
    assert!(
        ls.iter()
            .any(|l| l == &missing || l.starts_with(&format!("{missing}: "))),
        "{out}"
    );
    assert!(ls.contains(&ok), "{out}");
    let labels: Vec<&str> = ls
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().trim_end_matches(':'))
        .collect();
    assert!(labels.is_sorted(), "reports are sorted by label: {out}");

    let (out, _) = s.run(&["verify", "--all-history", "--json"], 1);
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        j[format!("{}:zarr/imaging", c1.short)]["status"],
        json!("missing"),
        "{j}"
    );
    assert_eq!(
        j[format!("{}:zarr/imaging", c2.short)]["status"],
        json!("ok"),
        "{j}"
    );
    assert_eq!(j.as_object().unwrap().len(), 2, "{j}");

    // A deleted pin falls back to the recorded state, which the memory
    // backend can address.
    let (out, _) = s.run(&["open", "zarr/imaging", "--rev", &c1.short], 0);
    assert_eq!(
        out.trim_end(),
        format!("{}#{}", s.system(), c1_state(&s.d, &c1.full))
    );
}

fn diff_content_lists_the_changed_files(vcs: Vcs) {
    let s = Story::new(vcs);
    let c1 = s.baseline();

    // A legitimate change to the immutable directory: re-register it.
    std::fs::write(s.raw().join("well_2.tif"), [9u8; 100]).unwrap();
    std::fs::write(s.raw().join("well_3.tif"), [3u8; 64]).unwrap();
    s.store
        .write(json!({"labels": "1", "masks": "1"}), "Relabel plate1");
    assert_eq!(s.d.ok(&["remove", "raw/plate1"]).lines().count(), 1);
    s.d.ok(&["add", "raw/plate1", "--kind", "file", "../data/raw/plate1/"]);
    let c2 = s.commit("Re-register plate1");
    assert_eq!(c2.recorded, ["raw/plate1"]);
    assert_eq!(c2.pins.len(), 1);

    let (out, _) = s.run(&["diff", &c1.short, &c2.short, "--content"], 0);
    let ls = lines(&out);
    let at = |prefix: &str| {
        ls.iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting {prefix:?}:\n{out}"))
    };
    let raw = at("changed raw/plate1");
    assert_eq!(ls[raw], "changed raw/plate1 [+1 -0 ~1 files]", "{out}");
    let imaging = at("changed zarr/imaging");
    assert_eq!(ls[imaging], "changed zarr/imaging [+1 -0 ~1 keys]", "{out}");
    // The directory's entries: the lines after its own, up to the next object.
    let detail: Vec<&str> = ls[raw + 1..]
        .iter()
        .take_while(|l| !l.starts_with("changed "))
        .map(|l| l.trim_start())
        .collect();
    assert!(
        detail.iter().any(|l| l.starts_with("modified well_2.tif")),
        "{out}"
    );
    assert!(
        detail.iter().any(|l| l.starts_with("added well_3.tif")),
        "{out}"
    );
    assert_eq!(detail.len(), 2, "only the changed files are listed:\n{out}");

    let (out, _) = s.run(&["diff", &c1.short, &c2.short, "--content", "--json"], 0);
    let j: Value = serde_json::from_str(&out).unwrap();
    let raw = j
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == json!("raw/plate1"))
        .unwrap_or_else(|| panic!("raw/plate1 in {j}"));
    assert_eq!(raw["change"], json!("changed"));
    assert!(
        raw["why"].as_array().unwrap().contains(&json!("state")),
        "{raw}"
    );
    assert_eq!(raw["a"], Value::Null);
    assert_eq!(raw["b"], Value::Null);
    let detail = &raw["detail"];
    assert_eq!(detail["unit"], json!("files"), "{raw}");
    assert_eq!(
        (
            detail["added"].as_u64(),
            detail["removed"].as_u64(),
            detail["modified"].as_u64()
        ),
        (Some(1), Some(0), Some(1))
    );
    let mut entries: Vec<(String, String)> = detail["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["change"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    entries.sort();
    assert_eq!(
        entries,
        [
            ("well_2.tif".to_string(), "modified".to_string()),
            ("well_3.tif".to_string(), "added".to_string())
        ]
    );
}
