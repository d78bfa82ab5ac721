//! The `file` plugin through the host: states of real files and directories
//! checked against sha256 computed here, the hash cache (counters, not
//! timings), the symlink rules, grants, listings and `diff --content`, and
//! the CREATE lifecycle with its `.tether-owner` marker.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tether::plugin::tree::{self, Tree, TreeError, TreeGrants};
use tether::plugin::{BackendError, ObjectClient, Plugin, Runtime, RuntimeConfig};
use tether_testkit::{block_on, cache_dir, first_party_plugin};

async fn plugin() -> Arc<Plugin> {
    let rt = Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    rt.load_file(&first_party_plugin("tether_plugin_file"))
        .await
        .expect("load the file plugin")
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The documented directory digest: sha256 of `path \0 token \n`, by path.
fn digest(entries: &[(&str, String)]) -> String {
    let mut sorted: Vec<&(&str, String)> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    for (p, token) in sorted {
        h.update(p.as_bytes());
        h.update([0]);
        h.update(token.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Move a file's mtime an hour back, out of the cache's 2-second racy window.
fn age(path: &Path) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    age(path);
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    Fixture { _dir: dir, base }
}

fn object(plugin: &Arc<Plugin>, path: &Path) -> ObjectClient {
    plugin.object(&json!({ "uri": s(path) }), &json!({}))
}

#[test]
fn describes_itself_as_an_observed_local_backend() {
    block_on(async {
        let p = plugin().await;
        let d = p.descriptor();
        assert_eq!((d.kind.as_str(), d.maturity.as_str()), ("file", "stable"));
        assert_eq!(
            d.capabilities,
            ["FINGERPRINT", "CHEAP_FINGERPRINT", "DIFF", "CREATE"]
        );
        assert_eq!(d.tier(), "Observed");
        assert_eq!(d.tree_keys, ["uri", "path"]);
        assert_eq!(d.storage_keys, ["uri", "path"]);
        assert_eq!(d.local_path_keys, ["uri", "path"]);
        assert!(p.has_harness());
    });
}

#[test]
fn directory_and_file_states_follow_the_recipe() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("data");
        write(&root.join("a.tif"), b"tiff bytes");
        write(&root.join("sub/b.csv"), b"x,y\n1,2\n");
        write(&root.join("sub/deeper/c"), b"");
        std::fs::create_dir_all(root.join("empty-dir")).unwrap();
        let state = object(&p, &root).fingerprint(None).await.unwrap();
        let want = digest(&[
            ("a.tif", sha(b"tiff bytes")),
            ("sub/b.csv", sha(b"x,y\n1,2\n")),
            ("sub/deeper/c", sha(b"")),
        ]);
        assert_eq!(
            state,
            json!({"type": "dir", "count": 3, "size": 18, "digest": want})
        );
        // A single file.
        let file = object(&p, &root.join("a.tif"))
            .fingerprint(None)
            .await
            .unwrap();
        assert_eq!(
            file,
            json!({"type": "file", "size": 10, "sha256": sha(b"tiff bytes")})
        );
        // The path spelled as a URL, with a trailing slash, or through `..`
        // names the same content and the same identity.
        let identity = object(&p, &root).identity().await.unwrap();
        assert_eq!(identity, json!({"uri": s(&root)}));
        for spelling in [
            format!("file://{}/", s(&root)),
            format!("{}//sub/..", s(&root)),
        ] {
            let o = p.object(&json!({ "uri": spelling }), &json!({}));
            assert_eq!(o.identity().await.unwrap(), identity, "{spelling}");
            assert_eq!(o.fingerprint(None).await.unwrap(), state, "{spelling}");
        }
        // `path` is accepted as an alias of `uri`.
        let alias = p.object(&json!({ "path": s(&root) }), &json!({}));
        assert_eq!(alias.fingerprint(None).await.unwrap(), state);
    });
}

#[test]
fn touch_is_not_a_change_but_a_byte_is() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("data");
        write(&root.join("a"), b"0123456789");
        write(&root.join("b"), b"other");
        let o = object(&p, &root);
        let before = o.fingerprint(None).await.unwrap();
        // touch: mtime only.
        std::fs::File::options()
            .write(true)
            .open(root.join("a"))
            .unwrap()
            .set_modified(SystemTime::now())
            .unwrap();
        assert_eq!(o.fingerprint(None).await.unwrap(), before);
        // One byte, same size.
        std::fs::write(root.join("a"), b"0123456780").unwrap();
        let after = o.fingerprint(None).await.unwrap();
        assert_ne!(after["digest"], before["digest"]);
        assert_eq!(after["size"], before["size"]);
    });
}

#[test]
fn the_hash_cache_is_written_and_a_second_fingerprint_rehashes_nothing() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("data");
        for i in 0..50 {
            write(
                &root.join(format!("d{}/f{i}", i % 5)),
                format!("{i}").as_bytes(),
            );
        }
        let cache = f.base.join("ds/.tether/cache/file-hashes.json");
        let o = object(&p, &root).with_hash_cache(&cache);
        let first = o.fingerprint(None).await.unwrap();
        let st = tree::stats(Some(&cache));
        assert_eq!((st.files_hashed, st.cache_hits, st.writes), (50, 0, 1));
        let text = std::fs::read_to_string(&cache).expect("the cache file");
        assert!(text.contains(&sha(b"17")), "{text}");
        // A fresh call: every hash from the cache, and the file not rewritten.
        let second = object(&p, &root)
            .with_hash_cache(&cache)
            .fingerprint(None)
            .await
            .unwrap();
        assert_eq!(first, second);
        let st = tree::stats(Some(&cache));
        assert_eq!((st.files_hashed, st.cache_hits, st.writes), (50, 50, 1));
        // One changed file: one re-read.
        write(&root.join("d0/f0"), b"changed");
        let third = object(&p, &root)
            .with_hash_cache(&cache)
            .fingerprint(None)
            .await
            .unwrap();
        assert_ne!(third, first);
        let st = tree::stats(Some(&cache));
        assert_eq!((st.files_hashed, st.cache_hits, st.writes), (51, 99, 2));
    });
}

#[test]
fn a_just_written_file_is_reread_even_when_its_stat_is_unchanged() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("data");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("fresh"), b"now").unwrap();
        let cache = f.base.join("cache.json");
        for _ in 0..2 {
            object(&p, &root)
                .with_hash_cache(&cache)
                .fingerprint(None)
                .await
                .unwrap();
        }
        let st = tree::stats(Some(&cache));
        assert_eq!((st.files_hashed, st.cache_hits), (2, 0));
    });
}

#[test]
fn symlink_rules() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("data");
        write(&root.join("real.txt"), b"payload");
        write(&f.base.join("outside/target.bin"), b"target bytes");
        write(&f.base.join("linked-dir/inner"), b"inner");
        write(&f.base.join("other-dir/inner"), b"inner");
        symlink(f.base.join("outside/target.bin"), root.join("file-link")).unwrap();
        symlink(f.base.join("linked-dir"), root.join("dir-link")).unwrap();
        symlink("nowhere", root.join("dangling")).unwrap();
        let o = object(&p, &root);
        let state = o.fingerprint(None).await.unwrap();
        let want = digest(&[
            ("real.txt", sha(b"payload")),
            // Read through: the target's content and size.
            ("file-link", sha(b"target bytes")),
            // Recorded by target.
            (
                "dir-link",
                format!("symlink:{}", s(&f.base.join("linked-dir"))),
            ),
            ("dangling", "symlink:nowhere".to_string()),
        ]);
        assert_eq!(
            state,
            json!({"type": "dir", "count": 4, "size": 19, "digest": want})
        );
        // Edits under a linked directory are not seen ...
        write(&f.base.join("linked-dir/inner"), b"edited");
        write(&f.base.join("linked-dir/new"), b"new");
        assert_eq!(o.fingerprint(None).await.unwrap(), state);
        // ... but the target file's content is, and so is a retarget.
        write(&f.base.join("outside/target.bin"), b"target bytes, edited");
        let edited = o.fingerprint(None).await.unwrap();
        assert_ne!(edited, state);
        std::fs::remove_file(root.join("dir-link")).unwrap();
        symlink(f.base.join("other-dir"), root.join("dir-link")).unwrap();
        let retargeted = o.fingerprint(None).await.unwrap();
        assert_ne!(retargeted, edited);
        // The listing says what each link is.
        let listing = o.listing(&retargeted).await.unwrap().expect("a listing");
        assert!(
            listing.contains(&format!(
                r#"{{"k":"symlink:{}","p":"dir-link","s":0}}"#,
                s(&f.base.join("other-dir"))
            )),
            "{listing}"
        );
        assert!(
            listing.contains(&format!(
                r#"{{"k":"{}","p":"file-link","s":20}}"#,
                sha(b"target bytes, edited")
            )),
            "{listing}"
        );
        // A locator through a symlinked parent is the same store.
        symlink(&root, f.base.join("alias")).unwrap();
        let via = object(&p, &f.base.join("alias"));
        assert_eq!(via.identity().await.unwrap(), json!({"uri": s(&root)}));
        assert_eq!(via.fingerprint(None).await.unwrap(), retargeted);
    });
}

#[test]
fn paths_outside_the_grant_are_refused() {
    let f = fixture();
    let root = f.base.join("granted");
    write(&root.join("a"), b"a");
    write(&f.base.join("secret"), b"secret");
    symlink(&f.base, root.join("up")).unwrap();
    // What the host gives the file plugin for a locator naming `root`.
    let t = Tree::new(TreeGrants::new([s(&root)]), None);
    for path in [
        s(&f.base.join("secret")),
        format!("{}/../secret", s(&root)),
        s(&root.join("up/secret")),
        "/etc/passwd".to_string(),
    ] {
        match t.hash_file(&path) {
            Err(TreeError::Denied(m)) => assert!(m.contains("not granted"), "{m}"),
            other => panic!("{path}: {other:?}"),
        }
    }
    assert!(t.hash_file(&s(&root.join("a"))).is_ok());
}

#[test]
fn locators_that_are_not_absolute_local_paths_are_refused() {
    block_on(async {
        let p = plugin().await;
        for (uri, want) in [
            ("relative/dir", "invalid"),
            // s3://, gs://, az:// and abfs:// work (file_s3.rs, file_cloud.rs);
            // other schemes of object stores are refused as unsupported.
            ("gcs://bucket/key", "capability"),
            ("ftp://host/x", "invalid"),
        ] {
            let o = p.object(&json!({ "uri": uri }), &json!({}));
            for result in [
                o.validate_locator().await.map(|_| Value::Null),
                o.fingerprint(None).await,
            ] {
                match (want, result) {
                    ("invalid", Err(BackendError::Invalid(_))) => {}
                    ("capability", Err(BackendError::Capability(m))) => {
                        assert!(m.contains("not supported"), "{m}")
                    }
                    (_, other) => panic!("{uri}: {other:?}"),
                }
            }
        }
        let missing = p.object(&json!({}), &json!({}));
        assert!(matches!(
            missing.validate_locator().await,
            Err(BackendError::Invalid(_))
        ));
    });
}

#[test]
fn listing_and_content_diff() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("data");
        write(&root.join("a.tif"), &[1u8; 1024]);
        write(&root.join("gone.txt"), b"bye");
        write(&root.join("same.txt"), b"same");
        let o = object(&p, &root);
        let a = o.fingerprint(None).await.unwrap();
        let la = o
            .listing(&a)
            .await
            .unwrap()
            .expect("a listing of the current state");
        assert_eq!(la.lines().count(), 3);
        assert!(
            la.contains(&format!(
                r#"{{"k":"{}","p":"a.tif","s":1024}}"#,
                sha(&[1u8; 1024])
            )),
            "{la}"
        );
        write(&root.join("a.tif"), &[2u8; 5120]);
        std::fs::remove_file(root.join("gone.txt")).unwrap();
        write(&root.join("new/b.bin"), &[0u8; 2048]);
        let b = o.fingerprint(None).await.unwrap();
        // The old state is not the current content: no listing for it.
        assert_eq!(o.listing(&a).await.unwrap(), None);
        let lb = o.listing(&b).await.unwrap().unwrap();
        let d = o.diff(&a, &b, Some(&la), Some(&lb)).await.unwrap();
        assert_eq!(d.unit, "files");
        assert_eq!((d.added, d.removed, d.modified), (1, 1, 1));
        let details: Vec<String> = d
            .entries
            .iter()
            .map(|e| format!("{} {} {}", e.change, e.path, e.detail))
            .collect();
        assert_eq!(
            details,
            [
                "modified a.tif +4.0 KiB",
                "removed gone.txt -3 B",
                "added new/b.bin +2.0 KiB"
            ]
        );
        assert!(!d.truncated);
        // Self-diff is empty; a missing listing falls back to a summary.
        assert!(o.diff(&b, &b, None, None).await.unwrap().is_empty());
        let summary = o.diff(&a, &b, None, Some(&lb)).await.unwrap();
        assert!(!summary.is_empty());
        assert!(summary.note.contains("3 files"), "{}", summary.note);
        // Single files: size and sha256.
        let file = object(&p, &root.join("same.txt"));
        let s1 = file.fingerprint(None).await.unwrap();
        assert_eq!(file.listing(&s1).await.unwrap(), None);
        write(&root.join("same.txt"), b"different");
        let s2 = file.fingerprint(None).await.unwrap();
        let d = file.diff(&s1, &s2, None, None).await.unwrap();
        assert_eq!(d.modified, 1);
        assert!(
            d.entries[0]
                .detail
                .starts_with("size 4 B -> 9 B (+5 B), sha256 "),
            "{:?}",
            d.entries
        );
    });
}

#[test]
fn create_lifecycle_with_the_owner_marker() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("made/by/tether");
        let o = object(&p, &root);
        assert_eq!(o.owner().await.unwrap(), None);
        let state = o.create("ds-1").await.unwrap();
        let marker: Value =
            serde_json::from_slice(&std::fs::read(root.join(".tether-owner")).unwrap()).unwrap();
        assert_eq!(marker, json!({"owner": "ds-1"}));
        // The marker is not content.
        assert_eq!(
            state,
            json!({"type": "dir", "count": 0, "size": 0, "digest": sha(b"")})
        );
        assert_eq!(o.fingerprint(None).await.unwrap(), state);
        assert_eq!(o.owner().await.unwrap().as_deref(), Some("ds-1"));
        assert_eq!(o.is_ref_empty(&[]).await.unwrap(), Some(true));
        // Never adopts.
        assert!(matches!(
            o.create("ds-2").await,
            Err(BackendError::Backend(_))
        ));
        let existing = f.base.join("existing");
        write(&existing.join("x"), b"x");
        assert!(matches!(
            object(&p, &existing).create("ds-1").await,
            Err(BackendError::Backend(_))
        ));
        // Files are data.
        write(&root.join("data.bin"), b"data");
        assert_eq!(o.is_ref_empty(&[]).await.unwrap(), Some(false));
        assert!(matches!(
            o.delete_store("ds-1").await,
            Err(BackendError::Backend(_))
        ));
        assert!(root.join("data.bin").is_file() && root.join(".tether-owner").is_file());
        std::fs::remove_file(root.join("data.bin")).unwrap();
        // Another owner is refused; the owner deletes marker and directory.
        assert!(matches!(
            o.delete_store("ds-2").await,
            Err(BackendError::Backend(_))
        ));
        o.delete_store("ds-1").await.unwrap();
        assert!(!root.exists());
        assert!(root.parent().unwrap().is_dir(), "only the store is removed");
        assert_eq!(o.owner().await.unwrap(), None);
        // A directory tether did not create is never deleted.
        assert!(matches!(
            object(&p, &existing).delete_store("ds-1").await,
            Err(BackendError::Backend(_))
        ));
        o.create("ds-1").await.unwrap();
        assert_eq!(o.owner().await.unwrap().as_deref(), Some("ds-1"));
    });
}

#[test]
fn a_large_tree_crosses_in_pages() {
    block_on(async {
        let p = plugin().await;
        let f = fixture();
        let root = f.base.join("many");
        let mut entries = Vec::new();
        let names: Vec<String> = (0..12_000)
            .map(|i| format!("d{:02}/f{i:05}", i % 40))
            .collect();
        for (i, name) in names.iter().enumerate() {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, i.to_le_bytes()).unwrap();
            entries.push((name.as_str(), sha(&i.to_le_bytes())));
        }
        let state = object(&p, &root).fingerprint(None).await.unwrap();
        assert_eq!(state["count"], 12_000);
        assert_eq!(state["digest"], digest(&entries));
    });
}
