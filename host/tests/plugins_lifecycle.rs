//! The plugin lifecycle end to end through the `tether` binary (issue 9,
//! DESIGN §5): `tether plugin add | trust | untrust | pin | list | verify |
//! remove`, a third-party plugin pinned, committed and cloned, trust checked
//! before anything runs, and a dataset pinned to a built-in that outlives a
//! change of the built-in.
//!
//! "The built-in changed" is simulated without rebuilding tether: the
//! dataset pins the digest of `tests/plugins/memory-rebuild` (kind `memory`,
//! other bytes than this binary's built-in memory), which is what a dataset
//! pinned and vendored by another tether release looks like to this one.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{Dataset, describe, stderr, stdout};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn digest(path: &Path) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
    )
}

fn stored(root: &Path, digest: &str) -> PathBuf {
    root.join(".tether/plugins")
        .join(format!("{}.wasm", digest.replace(':', "-")))
}

fn run_in(d: &Dataset, dir: &Path, args: &[&str]) -> Output {
    d.tether_in(dir, args)
}

fn ok_in(d: &Dataset, dir: &Path, args: &[&str]) -> String {
    let out = run_in(d, dir, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "tether {} should succeed:\n{}",
        args.join(" "),
        describe(&out)
    );
    stdout(&out)
}

/// Run `tether ARGS` in `dir`, require exit 1, return stderr.
fn fails_in(d: &Dataset, dir: &Path, args: &[&str]) -> String {
    let out = run_in(d, dir, args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "tether {} should fail:\n{}",
        args.join(" "),
        describe(&out)
    );
    format!("{}{}", stdout(&out), stderr(&out))
}

/// `tether backends --json` as kind -> row.
fn backends(d: &Dataset, dir: &Path) -> serde_json::Map<String, Value> {
    let rows: Vec<Value> =
        serde_json::from_str(&ok_in(d, dir, &["backends", "--json"])).expect("backends JSON");
    rows.into_iter()
        .map(|r| (r["kind"].as_str().unwrap().to_string(), r))
        .collect()
}

/// The digest of this binary's built-in plugin of `kind`, as `tether
/// backends` reports it outside any dataset (the embedded bytes; the file
/// `build.rs` left in target/ may have been rebuilt since).
fn builtin_digest(d: &Dataset, kind: &str) -> String {
    backends(d, d.tmp())[kind]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

fn config_pin(root: &Path, kind: &str) -> Option<String> {
    let text = std::fs::read_to_string(root.join("tether.toml")).unwrap();
    let cfg: toml::Value = toml::from_str(&text).unwrap();
    cfg.get("plugins")?
        .get(kind)?
        .get("digest")?
        .as_str()
        .map(str::to_string)
}

fn trusted(root: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(root.join(".tether/secrets.toml")) else {
        return Vec::new();
    };
    let v: toml::Value = toml::from_str(&text).unwrap();
    v.get("plugins")
        .and_then(|p| p.get("trusted"))
        .and_then(|t| t.as_array())
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Every compiled component in a cache directory, by file name.
fn compiled(cache: &Path) -> Vec<String> {
    crate::support::files_under(cache, cache)
        .into_iter()
        .filter(|p| p.ends_with(".cwasm"))
        .collect()
}

#[test]
fn third_party_plugin_is_pinned_committed_cloned_and_trusted_per_checkout() {
    let acme = tether_testkit::test_plugin("acme");
    let rebuild = tether_testkit::test_plugin("acme_rebuild");
    let (da, dr) = (digest(&acme), digest(&rebuild));
    assert_ne!(da, dr, "the two acme builds must differ");
    let acme_s = acme.to_str().unwrap();
    let rebuild_s = rebuild.to_str().unwrap();

    let d = Dataset::init();
    let root = d.root();
    let builtin_memory = builtin_digest(&d, "memory");

    // --kind must match what the component says it serves; nothing written.
    let before = d.written();
    let err = fails_in(&d, &root, &["plugin", "add", acme_s, "--kind", "memory"]);
    assert!(err.contains("serves kind acme, not memory"), "{err}");
    assert_eq!(d.written(), before);
    // Not a component at all.
    let junk = d.tmp().join("junk.wasm");
    std::fs::write(&junk, b"\0asm\x01\0\0\0").unwrap();
    let err = fails_in(&d, &root, &["plugin", "add", junk.to_str().unwrap()]);
    assert!(err.contains("not a WebAssembly component"), "{err}");

    let out = ok_in(&d, &root, &["plugin", "add", acme_s, "--kind", "acme"]);
    assert!(out.contains(&format!("added plugin acme {da}")), "{out}");
    let file = stored(&root, &da);
    assert_eq!(std::fs::read(&file).unwrap(), std::fs::read(&acme).unwrap());
    assert_eq!(config_pin(&root, "acme").as_deref(), Some(da.as_str()));
    assert_eq!(trusted(&root), vec![da.clone()]);
    {
        use std::os::unix::fs::MetadataExt as _;
        let mode = std::fs::metadata(root.join(".tether/secrets.toml"))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // The stored component is committed with the dataset: git does not ignore it.
    let ignored = d
        .command("git", &root)
        .args(["check-ignore", "-q"])
        .arg(&file)
        .status()
        .unwrap();
    assert_eq!(ignored.code(), Some(1), "git ignores {}", file.display());

    // The dataset uses it.
    let store = d.memory_store("acme-store");
    store.write(json!({"rows": 1}), "one row");
    let system = format!("system={}", store.root.display());
    let out = ok_in(
        &d,
        &root,
        &["add", "things", "--kind", "acme", "--set", &system],
    );
    assert_eq!(out, "added things [acme]\n");
    ok_in(&d, &root, &["status", "--snapshot"]);

    // `tether backends` in the dataset: each kind's source and digest.
    let rows = backends(&d, &root);
    assert_eq!(rows["acme"]["digest"], json!(da));
    assert_eq!(rows["acme"]["pinned"], json!(true));
    assert!(
        rows["acme"]["source"]
            .as_str()
            .unwrap()
            .ends_with(&format!(".tether/plugins/{}.wasm", da.replace(':', "-"))),
        "{:?}",
        rows["acme"]
    );
    assert_eq!(rows["memory"]["source"], json!("built-in"));
    assert_eq!(rows["memory"]["digest"], json!(builtin_memory));
    assert_eq!(rows["memory"]["pinned"], json!(false));
    let text = ok_in(&d, &root, &["backends"]);
    assert!(text.contains(&format!("digest {da} (pinned)")), "{text}");

    d.git(&["add", "tether.toml", ".tether"]);
    d.git(&["commit", "-q", "-m", "dataset with the acme plugin"]);
    let tracked = d.git(&["ls-files", ".tether/plugins"]);
    assert!(tracked.contains(&da.replace(':', "-")), "{tracked}");

    // A clone brings the pin and the component, not the trust.
    let out = d
        .command("git", d.tmp())
        .args(["clone", "-q", "ds", "clone"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let clone = d.tmp().join("clone");
    assert!(stored(&clone, &da).is_file());
    assert!(trusted(&clone).is_empty());

    // Refused before it runs: with a fresh compile cache, nothing of acme is
    // compiled (the built-ins are, as tether's own).
    let cache = d.tmp().join("clone-cache");
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &clone)
        .env("TETHER_CACHE_DIR", &cache)
        .args(["status", "--snapshot"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("run `tether plugin trust {da}`")),
        "{err}"
    );
    let hex_a = da.trim_start_matches("sha256:");
    assert!(
        !compiled(&cache).iter().any(|f| f.contains(hex_a)),
        "an untrusted plugin was compiled: {:?}",
        compiled(&cache)
    );
    // `backends` lists it as refused, `plugin list` as not trusted, `plugin
    // verify` fails naming it.
    let rows = backends(&d, &clone);
    assert_eq!(rows["acme"]["installed"], json!(false));
    assert!(
        rows["acme"]["note"]
            .as_str()
            .unwrap()
            .contains("tether plugin trust")
    );
    let list: Vec<Value> =
        serde_json::from_str(&ok_in(&d, &clone, &["plugin", "list", "--json"])).unwrap();
    assert_eq!(list[0]["kind"], json!("acme"));
    assert_eq!(list[0]["trusted"], json!(false));
    let err = fails_in(&d, &clone, &["plugin", "verify"]);
    assert!(err.contains(&format!("FAILED  acme {da}")), "{err}");

    // Trusted, it runs.
    let out = ok_in(&d, &clone, &["plugin", "trust", &da]);
    assert_eq!(out, format!("trusted {da}\n"));
    ok_in(&d, &clone, &["status", "--snapshot"]);
    let out = ok_in(&d, &clone, &["plugin", "verify"]);
    assert!(out.contains(&format!("ok      acme {da}")), "{out}");

    // A different build of acme under the pinned name is refused, both
    // digests named; so is adding it over the pin without --replace.
    std::fs::copy(&rebuild, stored(&clone, &da)).unwrap();
    let err = fails_in(&d, &clone, &["status", "--snapshot"]);
    assert!(err.contains(&da) && err.contains(&dr), "{err}");
    std::fs::copy(&acme, stored(&clone, &da)).unwrap();
    let err = fails_in(&d, &clone, &["plugin", "add", rebuild_s]);
    assert!(
        err.contains(&format!("already pinned to plugin {da}")) && err.contains(&dr),
        "{err}"
    );
    assert_eq!(config_pin(&clone, "acme").as_deref(), Some(da.as_str()));

    // Untrusted again, refused again.
    ok_in(&d, &clone, &["plugin", "untrust", &da]);
    let err = fails_in(&d, &clone, &["status", "--snapshot"]);
    assert!(err.contains("tether plugin trust"), "{err}");

    // --replace pins the new build and drops the old file.
    ok_in(&d, &clone, &["plugin", "add", rebuild_s, "--replace"]);
    assert_eq!(config_pin(&clone, "acme").as_deref(), Some(dr.as_str()));
    assert!(!stored(&clone, &da).exists());
    ok_in(&d, &clone, &["status", "--snapshot"]);

    // remove drops the pin and the file; then no plugin serves acme.
    let out = ok_in(&d, &clone, &["plugin", "remove", "acme"]);
    assert!(out.contains(&format!("removed pin acme {dr}")), "{out}");
    assert!(!stored(&clone, &dr).exists());
    assert_eq!(config_pin(&clone, "acme"), None);
    let err = fails_in(&d, &clone, &["status", "--snapshot"]);
    assert!(err.contains("acme"), "{err}");
    let err = fails_in(&d, &clone, &["plugin", "remove", "acme"]);
    assert!(err.contains("not pinned"), "{err}");
}

#[test]
fn pinned_builtin_survives_a_change_of_the_builtin_once_the_component_is_present() {
    let other = tether_testkit::test_plugin("memory_rebuild");
    let dother = digest(&other);
    let d = Dataset::init();
    let root = d.root();
    let db = builtin_digest(&d, "memory");
    assert_ne!(db, dother);
    let store = d.memory_store("m");
    store.write(json!({"v": 1}), "one");
    d.add_memory("m", &store);

    // pin: the built-in's digest, nothing stored, nothing to trust.
    let out = ok_in(&d, &root, &["plugin", "pin"]);
    assert_eq!(out, format!("pinned memory {db} (built-in)\n"));
    assert_eq!(config_pin(&root, "memory").as_deref(), Some(db.as_str()));
    assert!(!root.join(".tether/plugins").exists());
    assert!(trusted(&root).is_empty());
    ok_in(&d, &root, &["status", "--snapshot"]);
    let out = ok_in(&d, &root, &["plugin", "verify"]);
    assert!(
        out.contains(&format!("ok      memory {db} (built-in)")),
        "{out}"
    );

    // --vendor stores the built-in's bytes beside the pin.
    let out = ok_in(&d, &root, &["plugin", "pin", "--vendor"]);
    assert_eq!(out, format!("pinned memory {db} (built-in, vendored)\n"));
    assert_eq!(digest(&stored(&root, &db)), db);
    let rows = backends(&d, &root);
    assert_eq!(rows["memory"]["source"], json!("built-in"));
    assert_eq!(rows["memory"]["pinned"], json!(true));

    // Another release's tether pinned and vendored its built-in memory
    // (here: memory-rebuild) and this checkout trusts what it vendored. This
    // tether's built-in differs, yet the dataset keeps its pinned component.
    std::fs::remove_file(stored(&root, &db)).unwrap();
    let text = std::fs::read_to_string(root.join("tether.toml")).unwrap();
    std::fs::write(root.join("tether.toml"), text.replace(&db, &dother)).unwrap();
    std::fs::copy(&other, stored(&root, &dother)).unwrap();
    ok_in(&d, &root, &["plugin", "trust", &dother]);
    ok_in(&d, &root, &["status", "--snapshot"]);
    let rows = backends(&d, &root);
    assert_eq!(rows["memory"]["digest"], json!(dother));
    assert!(
        rows["memory"]["source"]
            .as_str()
            .unwrap()
            .ends_with(".wasm")
    );

    // Without the component, it refuses, naming the digest it wants and the
    // built-in it found instead.
    let away = d.tmp().join("user-plugins");
    std::fs::create_dir_all(&away).unwrap();
    std::fs::rename(
        stored(&root, &dother),
        away.join(format!("{}.wasm", dother.replace(':', "-"))),
    )
    .unwrap();
    let err = fails_in(&d, &root, &["status", "--snapshot"]);
    assert!(
        err.contains(&format!("pinned to plugin {dother}"))
            && err.contains(&format!("the built-in memory is {db}")),
        "{err}"
    );
    let err = fails_in(&d, &root, &["plugin", "verify"]);
    assert!(err.contains(&format!("FAILED  memory {dother}")), "{err}");

    // The user plugin directory is the last place looked.
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &root)
        .env("TETHER_PLUGIN_DIR", &away)
        .args(["status", "--snapshot"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));

    // Unpinned again, the built-in serves the kind.
    ok_in(&d, &root, &["plugin", "remove", "memory"]);
    ok_in(&d, &root, &["status", "--snapshot"]);
    assert_eq!(backends(&d, &root)["memory"]["digest"], json!(db));
}

#[test]
fn trust_edits_only_its_table_and_refuses_bad_digests() {
    let d = Dataset::init();
    let root = d.root();
    let secrets = root.join(".tether/secrets.toml");
    std::fs::write(
        &secrets,
        "# my settings\n[backends.memory]\nnote = \"kept\"  # as written\n",
    )
    .unwrap();
    let dig = format!("sha256:{}", "ab".repeat(32));
    ok_in(&d, &root, &["plugin", "trust", &dig]);
    let text = std::fs::read_to_string(&secrets).unwrap();
    assert!(
        text.starts_with("# my settings\n[backends.memory]\nnote = \"kept\"  # as written\n"),
        "{text}"
    );
    assert_eq!(trusted(&root), vec![dig.clone()]);
    assert_eq!(
        ok_in(&d, &root, &["plugin", "trust", &dig]),
        format!("already trusted {dig}\n")
    );
    ok_in(&d, &root, &["plugin", "untrust", &dig]);
    assert!(trusted(&root).is_empty());
    let err = fails_in(&d, &root, &["plugin", "trust", "sha256:xyz"]);
    assert!(err.contains("neither a plugin digest nor a kind"), "{err}");
}

/// `tether commit` takes the component a pin names along with the pin, and
/// drops it from the repository with the pin: a clone of the commit loads
/// the pinned build without anyone running `git add .tether`.
#[test]
fn commit_carries_the_pinned_component_and_drops_a_removed_one() {
    let acme = tether_testkit::test_plugin("acme");
    let da = digest(&acme);
    let d = Dataset::init();
    let root = d.root();
    let name = da.replace(':', "-");
    ok_in(
        &d,
        &root,
        &["plugin", "add", acme.to_str().unwrap(), "--kind", "acme"],
    );
    ok_in(&d, &root, &["commit", "-m", "pin acme"]);
    let tracked = d.git(&["ls-files", ".tether/plugins"]);
    assert!(tracked.contains(&name), "{tracked}");
    let shown = d.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert!(
        shown.contains("tether.toml") && shown.contains(&name),
        "{shown}"
    );

    ok_in(&d, &root, &["plugin", "remove", "acme"]);
    ok_in(&d, &root, &["commit", "-m", "unpin acme"]);
    let tracked = d.git(&["ls-files", ".tether/plugins"]);
    assert!(!tracked.contains(&name), "{tracked}");
    assert_eq!(d.git(&["status", "--porcelain"]), "");
}

/// `plugin trust` and `untrust` take what `plugin list` shows: a kind, or a
/// unique prefix of a digest (with or without `sha256:`), and print the digest.
#[test]
fn trust_takes_a_kind_or_a_unique_digest_prefix() {
    let acme = tether_testkit::test_plugin("acme");
    let da = digest(&acme);
    let d = Dataset::init();
    let root = d.root();
    ok_in(
        &d,
        &root,
        &["plugin", "add", acme.to_str().unwrap(), "--kind", "acme"],
    );
    assert_eq!(trusted(&root), vec![da.clone()]);

    let out = ok_in(&d, &root, &["plugin", "untrust", "acme"]);
    assert_eq!(out, format!("untrusted {da}\n"));
    assert!(trusted(&root).is_empty());
    let hex = da.trim_start_matches("sha256:");
    let out = ok_in(&d, &root, &["plugin", "trust", &hex[..8]]);
    assert_eq!(out, format!("trusted {da}\n"));
    let out = ok_in(
        &d,
        &root,
        &["plugin", "untrust", &format!("sha256:{}", &hex[..10])],
    );
    assert_eq!(out, format!("untrusted {da}\n"));

    let before = d.written();
    for bad in ["nokind", "0000000000", "sha256:"] {
        let err = fails_in(&d, &root, &["plugin", "trust", bad]);
        assert!(
            err.contains("neither a plugin digest nor a kind"),
            "{bad}: {err}"
        );
    }
    assert_eq!(d.written(), before, "a refused trust writes nothing");
}

/// After an upgrade of tether, a dataset's pinned built-in keeps loading
/// (vendored) until `plugin update` moves the pin to this tether's built-in:
/// `--dry-run` says what would move and writes nothing; the update is a
/// working-tree change to `tether.toml` (and the vendored components) to
/// review and commit, like `cargo update`. "Another release's built-in" is
/// `tests/plugins/memory-rebuild`, as above.
#[test]
fn update_moves_a_pinned_builtin_to_this_tethers_as_a_change_to_commit() {
    let other = tether_testkit::test_plugin("memory_rebuild");
    let dother = digest(&other);
    let d = Dataset::init();
    let root = d.root();
    let db = builtin_digest(&d, "memory");
    let store = d.memory_store("m");
    store.write(json!({"v": 1}), "one");
    d.add_memory("m", &store);
    // The dataset as the older tether left it: memory pinned and vendored.
    ok_in(&d, &root, &["plugin", "pin", "--vendor"]);
    std::fs::remove_file(stored(&root, &db)).unwrap();
    let text = std::fs::read_to_string(root.join("tether.toml")).unwrap();
    std::fs::write(root.join("tether.toml"), text.replace(&db, &dother)).unwrap();
    std::fs::copy(&other, stored(&root, &dother)).unwrap();
    ok_in(&d, &root, &["plugin", "trust", &dother]);
    d.git(&["add", "-A"]);
    d.git(&["commit", "-q", "-m", "pinned by an older tether"]);
    ok_in(&d, &root, &["status", "--snapshot"]);
    assert_eq!(backends(&d, &root)["memory"]["digest"], json!(dother));

    let out = ok_in(&d, &root, &["plugin", "update", "--dry-run"]);
    assert_eq!(
        out,
        format!("would update memory {dother} -> {db} (vendored)\n")
    );
    assert_eq!(d.git(&["status", "--porcelain"]), "", "a dry run wrote");

    let out = ok_in(&d, &root, &["plugin", "update"]);
    let old_file = format!(".tether/plugins/{}.wasm", dother.replace(':', "-"));
    assert_eq!(
        out,
        format!(
            "updated memory {dother} -> {db} (vendored)\ndeleted {old_file}\n\
             review the change to tether.toml (`git diff`) and commit it\n"
        )
    );
    assert_eq!(config_pin(&root, "memory").as_deref(), Some(db.as_str()));
    assert_eq!(digest(&stored(&root, &db)), db, "the new pin is vendored");
    assert!(!stored(&root, &dother).exists());
    assert!(trusted(&root).contains(&db));
    // A change in the working tree, to review and commit.
    let changed = d.git(&["status", "--porcelain"]);
    assert!(changed.contains(" M tether.toml"), "{changed}");
    assert!(changed.contains(&old_file), "{changed}");
    let diff = d.git(&["diff", "tether.toml"]);
    assert!(
        diff.contains(&format!("-digest = \"{dother}\""))
            && diff.contains(&format!("+digest = \"{db}\"")),
        "{diff}"
    );
    ok_in(&d, &root, &["status", "--snapshot"]);
    assert_eq!(backends(&d, &root)["memory"]["digest"], json!(db));

    // Nothing left to move.
    let out = ok_in(&d, &root, &["plugin", "update", "memory"]);
    assert_eq!(out, format!("memory is already at {db}\n"));
    let rows = d.json(&["plugin", "update"], 0);
    assert_eq!(rows[0]["kind"], json!("memory"), "{rows}");
    assert_eq!(rows[0]["changed"], json!(false), "{rows}");
    assert_eq!(rows[0]["to"], json!(db), "{rows}");

    // A kind that is not pinned already follows this tether.
    let err = fails_in(&d, &root, &["plugin", "update", "git"]);
    assert!(err.contains("kind git is not pinned"), "{err}");
}

/// A clone whose third-party component is gone is told where it came from
/// and how to get it back; the way it names works.
#[test]
fn a_missing_third_party_component_says_how_to_get_it_back() {
    let acme = tether_testkit::test_plugin("acme");
    let da = digest(&acme);
    let d = Dataset::init();
    let root = d.root();
    ok_in(&d, &root, &["plugin", "add", acme.to_str().unwrap()]);
    let store = d.memory_store("acme-store");
    store.write(json!({"rows": 1}), "one row");
    let system = format!("system={}", store.root.display());
    ok_in(
        &d,
        &root,
        &["add", "things", "--kind", "acme", "--set", &system],
    );
    d.git(&["add", "-A"]);
    d.git(&["commit", "-q", "-m", "acme"]);

    let file = format!(".tether/plugins/{}.wasm", da.replace(':', "-"));
    std::fs::remove_file(root.join(&file)).unwrap();
    let err = fails_in(&d, &root, &["status", "--snapshot"]);
    for said in [
        format!("pinned to plugin {da}"),
        "this tether has no built-in acme".to_string(),
        format!("`git log --all -- {file}`"),
        format!("`git checkout COMMIT -- {file}`"),
        "--kind acme --replace".to_string(),
    ] {
        assert!(err.contains(&said), "no {said:?} in:\n{err}");
    }
    assert!(
        !err.contains("plugin pin --vendor"),
        "a built-in's way out:\n{err}"
    );

    let commit = d.git(&["log", "--all", "--format=%H", "--", &file]);
    let commit = commit.lines().next().expect("the commit that stored it");
    d.git(&["checkout", commit, "--", &file]);
    ok_in(&d, &root, &["status", "--snapshot"]);
}

/// A checkout that does not trust a pinned third-party plugin still gets the
/// status of every object that does not need it; each object that does is
/// an error naming the refusal and `tether plugin trust`.
#[test]
fn an_untrusted_plugin_fails_only_its_own_objects_in_status() {
    let acme = tether_testkit::test_plugin("acme");
    let da = digest(&acme);
    let d = Dataset::init();
    let root = d.root();
    ok_in(&d, &root, &["plugin", "add", acme.to_str().unwrap()]);
    let store = d.memory_store("acme-store");
    store.write(json!({"rows": 1}), "one row");
    let system = format!("system={}", store.root.display());
    ok_in(
        &d,
        &root,
        &["add", "things", "--kind", "acme", "--set", &system],
    );
    let mem = d.memory_store("m");
    mem.write(json!({"v": 1}), "one");
    d.add_memory("m", &mem);
    ok_in(&d, &root, &["commit", "-m", "both"]);
    // As in a fresh clone: the plugin is pinned and present, not trusted.
    ok_in(&d, &root, &["plugin", "untrust", &da]);

    for args in [&["status", "--snapshot"][..], &["status"][..]] {
        let out = run_in(&d, &root, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", describe(&out));
        let shown = stdout(&out);
        assert!(shown.contains("m [memory/"), "{args:?}: {}", describe(&out));
        let err = stderr(&out);
        assert!(
            err.contains("error: things: ")
                && err.contains(&format!("run `tether plugin trust {da}`")),
            "{args:?}: {err}"
        );
    }
    let out = run_in(&d, &root, &["status", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let objects = report["objects"].as_array().unwrap();
    let by_key = |k: &str| objects.iter().find(|o| o["key"] == k).unwrap().clone();
    assert_eq!(by_key("m")["state"], json!("clean"), "{report}");
    assert_eq!(by_key("things")["state"], json!("error"), "{report}");
    assert!(
        by_key("things")["error"]
            .as_str()
            .unwrap()
            .contains("has not trusted"),
        "{report}"
    );

    // Trusted again, both show.
    ok_in(&d, &root, &["plugin", "trust", &da]);
    let out = ok_in(&d, &root, &["status", "--snapshot"]);
    assert!(out.contains("things [acme/"), "{out}");
}

/// `plugin call KIND METHOD JSON` runs one contract method against one
/// store and prints the plugin's answer: on a locator given as JSON, or on a
/// dataset's object by `--key`; outside a dataset on the built-ins.
#[test]
fn plugin_call_runs_one_contract_method_against_a_store() {
    let d = Dataset::init();
    let root = d.root();
    let store = d.memory_store("m");
    store.write(json!({"v": 1}), "one");
    d.add_memory("m", &store);
    let call = |dir: &Path, args: &[&str]| -> Value {
        let out = ok_in(&d, dir, args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
    };

    // Outside a dataset: this tether's built-in.
    let described = call(d.tmp(), &["plugin", "call", "memory", "describe"]);
    assert_eq!(described["kind"], json!("memory"), "{described}");

    // The same state by the object's key as by its locator.
    let locator = json!({"locator": {"system": store.root.display().to_string()}}).to_string();
    let by_key = call(
        &root,
        &["plugin", "call", "memory", "fingerprint", "--key", "m"],
    );
    let by_locator = call(
        d.tmp(),
        &["plugin", "call", "memory", "fingerprint", &locator],
    );
    assert!(
        by_key.is_object() && !by_key.as_object().unwrap().is_empty(),
        "{by_key}"
    );
    assert_eq!(by_key, by_locator);
    store.write(json!({"v": 2}), "two");
    let moved = call(
        &root,
        &["plugin", "call", "memory", "fingerprint", "--key", "m"],
    );
    assert_ne!(moved, by_key, "the store moved, the fingerprint did not");

    // Pins: none before the commit, the commit's after.
    let pins = call(
        &root,
        &["plugin", "call", "memory", "list-pins", "--key", "m"],
    );
    assert_eq!(pins, json!([]));
    ok_in(&d, &root, &["commit", "-m", "pin it"]);
    let pins = call(
        &root,
        &["plugin", "call", "memory", "list-pins", "--key", "m"],
    );
    assert_eq!(pins.as_array().map(Vec::len), Some(1), "{pins}");

    // A method that changes the store is not callable (usage, exit 2); a
    // call without its locator says what it needs.
    let out = run_in(
        &d,
        &root,
        &["plugin", "call", "memory", "delete-store", "{}"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = fails_in(&d, &root, &["plugin", "call", "memory", "fingerprint"]);
    assert!(err.contains("fingerprint needs \"locator\""), "{err}");
    let err = fails_in(
        &d,
        &root,
        &["plugin", "call", "git", "fingerprint", "--key", "m"],
    );
    assert!(err.contains("object m is of kind memory, not git"), "{err}");
}
