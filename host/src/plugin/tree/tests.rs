//! Unit tests of the tree capability: grants, walk order and paging, symlink
//! rules, and the hash cache's rules (counters, not timings).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use super::*;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Move a file's mtime an hour back, out of the 2-second racy window.
fn age(path: &Path) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
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

fn tree(grants: &[&Path], cache: Option<PathBuf>) -> Tree {
    Tree::new(TreeGrants::new(grants.iter().map(|p| s(p))), cache)
}

fn walk_all_pages(t: &Tree, root: &str, hash: bool, limit: u32) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = t
            .walk(
                root,
                &WalkOptions {
                    hash,
                    cursor: cursor.clone(),
                    limit,
                },
            )
            .unwrap();
        assert!(page.entries.len() <= limit as usize);
        out.extend(page.entries);
        match page.next {
            Some(n) => cursor = Some(n),
            None => return out,
        }
    }
}

#[test]
fn normalise_folds_file_urls_and_dots() {
    for (input, want) in [
        ("/a/b", "/a/b"),
        ("/a//b/", "/a/b"),
        ("/a/./b/../c", "/a/c"),
        ("file:///a/b", "/a/b"),
        ("file://localhost/a", "/a"),
        ("/..", "/"),
    ] {
        assert_eq!(normalise(input).unwrap(), PathBuf::from(want), "{input}");
    }
    for bad in ["a/b", "", "s3://bucket/x", "file://host/x", "/a\0b"] {
        assert!(
            matches!(normalise(bad), Err(TreeError::Invalid(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn grants_cover_the_path_and_below_only() {
    let f = fixture();
    let root = f.base.join("granted");
    write(&root.join("a.txt"), b"a");
    write(&f.base.join("granted-not/x"), b"x");
    write(&f.base.join("outside.txt"), b"o");
    let t = tree(&[&root], None);
    assert!(t.stat(&s(&root.join("a.txt"))).unwrap().is_some());
    assert!(
        t.stat(&format!("file://{}/a.txt", s(&root)))
            .unwrap()
            .is_some()
    );
    for denied in [
        s(&f.base.join("outside.txt")),
        s(&f.base.join("granted-not/x")),
        format!("{}/../outside.txt", s(&root)),
        "/etc/passwd".to_string(),
    ] {
        match t.stat(&denied) {
            Err(TreeError::Denied(m)) => assert!(m.contains("not granted"), "{m}"),
            other => panic!("{denied}: {other:?}"),
        }
    }
    assert!(matches!(t.stat("relative/x"), Err(TreeError::Invalid(_))));
    // A relative or remote grant grants nothing.
    let none = Tree::new(
        TreeGrants::new(["rel/dir".to_string(), "s3://b/k".to_string()]),
        None,
    );
    assert!(matches!(none.stat("/rel/dir"), Err(TreeError::Denied(_))));
}

#[test]
fn a_directory_symlink_cannot_lead_out_of_a_grant() {
    let f = fixture();
    let root = f.base.join("granted");
    write(&f.base.join("secret/key.txt"), b"secret");
    std::fs::create_dir_all(&root).unwrap();
    symlink(f.base.join("secret"), root.join("escape")).unwrap();
    let t = tree(&[&root], None);
    // The link itself is inside (and recorded by its target) ...
    let link = t.stat(&s(&root.join("escape"))).unwrap().unwrap();
    assert_eq!(link.kind, EntryKind::Symlink);
    assert_eq!(
        link.link_target.as_deref(),
        Some(s(&f.base.join("secret")).as_str())
    );
    // ... but nothing can be reached through it.
    for op in [
        t.stat(&s(&root.join("escape/key.txt"))).map(|_| ()),
        t.hash_file(&s(&root.join("escape/key.txt"))).map(|_| ()),
        t.walk(
            &s(&root.join("escape")),
            &WalkOptions {
                hash: false,
                cursor: None,
                limit: 10,
            },
        )
        .map(|_| ()),
    ] {
        assert!(matches!(op, Err(TreeError::Denied(_))), "{op:?}");
    }
}

#[test]
fn a_granted_path_may_itself_be_a_symlink() {
    let f = fixture();
    write(&f.base.join("real/a.txt"), b"a");
    symlink(f.base.join("real"), f.base.join("link")).unwrap();
    let t = tree(&[&f.base.join("link")], None);
    assert_eq!(
        t.realpath(&s(&f.base.join("link"))).unwrap(),
        s(&f.base.join("real"))
    );
    let entries = walk_all_pages(&t, &s(&f.base.join("link")), true, 10);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].sha256.as_deref(), Some(sha(b"a").as_str()));
    // The resolved spelling is granted too.
    assert!(t.stat(&s(&f.base.join("real/a.txt"))).unwrap().is_some());
    // A path that does not exist yet resolves through its existing parent.
    assert_eq!(
        t.realpath(&s(&f.base.join("link/new/x"))).unwrap(),
        s(&f.base.join("real/new/x"))
    );
}

#[test]
fn walk_order_is_by_key_and_pages_concatenate() {
    let f = fixture();
    let root = f.base.join("d");
    for name in [
        "b.txt",
        "a/x",
        "a/y/z",
        "a-b",
        "a0",
        "c/.hidden",
        "c/d/e/f",
        "zz",
    ] {
        write(&root.join(name), name.as_bytes());
    }
    std::fs::create_dir_all(root.join("empty")).unwrap();
    let t = tree(&[&root], None);
    let whole = walk_all_pages(&t, &s(&root), false, 1000);
    let keys: Vec<String> = whole.iter().map(Entry::key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "the walk is in key order");
    assert_eq!(
        keys,
        [
            "a-b",
            "a/",
            "a/x",
            "a/y/",
            "a/y/z",
            "a0",
            "b.txt",
            "c/",
            "c/.hidden",
            "c/d/",
            "c/d/e/",
            "c/d/e/f",
            "empty/",
            "zz"
        ]
    );
    for limit in [1, 2, 3, 5, 13, 14] {
        assert_eq!(
            walk_all_pages(&t, &s(&root), false, limit),
            whole,
            "{limit}"
        );
    }
    // A cursor from another call (no session) resumes in the same place.
    let first = t
        .walk(
            &s(&root),
            &WalkOptions {
                hash: false,
                cursor: None,
                limit: 4,
            },
        )
        .unwrap();
    let other = tree(&[&root], None);
    let rest = other
        .walk(
            &s(&root),
            &WalkOptions {
                hash: false,
                cursor: first.next.clone(),
                limit: 1000,
            },
        )
        .unwrap();
    let mut joined = first.entries;
    joined.extend(rest.entries);
    assert_eq!(joined, whole);
    assert!(rest.next.is_none());
    assert!(matches!(
        t.walk(
            &s(&root),
            &WalkOptions {
                hash: false,
                cursor: None,
                limit: 0
            }
        ),
        Err(TreeError::Invalid(_))
    ));
}

#[test]
fn walk_skips_the_root_marker_and_temp_files_and_reports_symlinks() {
    let f = fixture();
    let root = f.base.join("d");
    write(&root.join(OWNER_MARKER), br#"{"owner":"x"}"#);
    write(&root.join("sub").join(OWNER_MARKER), b"data, not a marker");
    write(&root.join(".tether-tmp-123"), b"in flight");
    write(&root.join("file.txt"), b"content");
    write(&f.base.join("target.bin"), b"target content");
    write(&f.base.join("linked/inner.txt"), b"inner");
    symlink(f.base.join("target.bin"), root.join("to-file")).unwrap();
    symlink(f.base.join("linked"), root.join("to-dir")).unwrap();
    symlink("does-not-exist", root.join("dangling")).unwrap();
    let t = tree(&[&root], None);
    let entries = walk_all_pages(&t, &s(&root), true, 100);
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "dangling",
            "file.txt",
            "sub",
            "sub/.tether-owner",
            "to-dir",
            "to-file"
        ]
    );
    let get = |p: &str| entries.iter().find(|e| e.path == p).unwrap();
    let to_file = get("to-file");
    assert_eq!(to_file.kind, EntryKind::Symlink);
    assert_eq!(to_file.size, 14);
    assert_eq!(
        to_file.sha256.as_deref(),
        Some(sha(b"target content").as_str())
    );
    let to_dir = get("to-dir");
    assert_eq!((to_dir.size, to_dir.sha256.as_deref()), (0, None));
    assert_eq!(
        to_dir.link_target.as_deref(),
        Some(s(&f.base.join("linked")).as_str())
    );
    assert_eq!(
        get("dangling").link_target.as_deref(),
        Some("does-not-exist")
    );
    assert_eq!(get("dangling").sha256, None);
    assert_eq!(
        get("file.txt").sha256.as_deref(),
        Some(sha(b"content").as_str())
    );
    assert_eq!(get("sub").sha256, None);
}

#[test]
fn the_cache_hashes_each_file_once_and_writes_only_on_change() {
    let f = fixture();
    let root = f.base.join("d");
    for i in 0..20 {
        let p = root.join(format!("f{i:02}"));
        write(&p, format!("file {i}").as_bytes());
        age(&p);
    }
    let cache = f.base.join("ds/.tether/cache/file-hashes.json");
    let t = tree(&[&root], Some(cache.clone()));
    let first = walk_all_pages(&t, &s(&root), true, 7);
    let after_first = stats(Some(&cache));
    assert_eq!(after_first.files_hashed, 20);
    assert_eq!(after_first.cache_hits, 0);
    assert_eq!(after_first.writes, 1);
    assert!(cache.is_file());
    // A new call, same cache: nothing re-read, nothing rewritten.
    let second = walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 7);
    assert_eq!(first, second);
    let after_second = stats(Some(&cache));
    assert_eq!(after_second.files_hashed, 20);
    assert_eq!(after_second.cache_hits, 20);
    assert_eq!(after_second.writes, 1);
    // The file is what another process would read: drop the in-process
    // entries and the next walk still hashes nothing.
    {
        let handle = CacheHandle::open(Some(&cache)).unwrap();
        handle.with(|c| c.forget());
    }
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 100);
    assert_eq!(stats(Some(&cache)).files_hashed, 20);
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(text.contains(&sha(b"file 3")), "{text}");
}

#[test]
fn a_just_modified_file_is_rehashed_even_with_an_unchanged_stat_key() {
    let f = fixture();
    let root = f.base.join("d");
    let fresh = root.join("fresh");
    let old = root.join("old");
    write(&fresh, b"just written");
    write(&old, b"long ago");
    age(&old);
    let cache = f.base.join("cache.json");
    let t = tree(&[&root], Some(cache.clone()));
    walk_all_pages(&t, &s(&root), true, 10);
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let st = stats(Some(&cache));
    // `old` hashed once then trusted; `fresh` read both times (and never stored).
    assert_eq!((st.files_hashed, st.cache_hits), (3, 1));
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(!text.contains(&sha(b"just written")), "{text}");
    assert!(text.contains(&sha(b"long ago")), "{text}");
}

#[test]
fn an_edit_is_rehashed_without_rewriting_the_cache_until_it_settles() {
    let f = fixture();
    let root = f.base.join("d");
    let p = root.join("data");
    write(&p, b"before");
    write(&root.join("other"), b"other");
    age(&p);
    age(&root.join("other"));
    let cache = f.base.join("cache.json");
    let hash_of_data = |t: &Tree| {
        let entries = walk_all_pages(t, &s(&root), true, 10);
        let data = entries.iter().find(|e| e.path == "data").unwrap();
        data.sha256.clone().unwrap()
    };
    assert_eq!(
        hash_of_data(&tree(&[&root], Some(cache.clone()))),
        sha(b"before")
    );
    let settled = std::fs::read(&cache).unwrap();
    assert!(String::from_utf8_lossy(&settled).contains(&sha(b"before")));
    // Just edited: read again, and nothing to store, so no rewrite. The old
    // entry stays, and is never taken for the new content.
    std::thread::sleep(Duration::from_millis(20));
    write(&p, b"after!");
    for _ in 0..2 {
        assert_eq!(
            hash_of_data(&tree(&[&root], Some(cache.clone()))),
            sha(b"after!")
        );
        assert_eq!(
            std::fs::read(&cache).unwrap(),
            settled,
            "the cache was rewritten"
        );
    }
    // Settled: the new hash replaces the old one.
    age(&p);
    assert_eq!(
        hash_of_data(&tree(&[&root], Some(cache.clone()))),
        sha(b"after!")
    );
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(text.contains(&sha(b"after!")), "{text}");
    assert!(!text.contains(&sha(b"before")), "{text}");
}

#[test]
fn an_overwrite_that_restores_size_and_mtime_is_still_seen() {
    let f = fixture();
    let root = f.base.join("d");
    let p = root.join("data");
    write(&p, b"aaaa");
    age(&p);
    let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
    let cache = f.base.join("cache.json");
    let t = tree(&[&root], Some(cache.clone()));
    assert_eq!(t.hash_file(&s(&p)).unwrap(), sha(b"aaaa"));
    // Same size, mtime put back: only the ctime tells.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&p, b"bbbb").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(t.hash_file(&s(&p)).unwrap(), sha(b"bbbb"));
    assert_eq!(stats(Some(&cache)).files_hashed, 2);
}

#[test]
fn deleted_files_leave_the_cache() {
    let f = fixture();
    let root = f.base.join("d");
    for name in ["keep", "gone"] {
        write(&root.join(name), name.as_bytes());
        age(&root.join(name));
    }
    let cache = f.base.join("cache.json");
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    std::fs::remove_file(root.join("gone")).unwrap();
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(
        text.contains(&sha(b"keep")) && !text.contains(&sha(b"gone")),
        "{text}"
    );
    assert_eq!(stats(Some(&cache)).writes, 2);
}

#[test]
fn hash_and_stat_of_single_paths() {
    let f = fixture();
    let root = f.base.join("d");
    write(&root.join("a"), b"abc");
    let t = tree(&[&root], None);
    assert_eq!(t.hash_file(&s(&root.join("a"))).unwrap(), sha(b"abc"));
    assert!(matches!(t.hash_file(&s(&root)), Err(TreeError::Invalid(_))));
    assert!(matches!(
        t.hash_file(&s(&root.join("missing"))),
        Err(TreeError::NotFound(_))
    ));
    assert_eq!(t.stat(&s(&root.join("missing"))).unwrap(), None);
    let st = t.stat(&s(&root.join("a"))).unwrap().unwrap();
    assert_eq!((st.kind, st.size), (EntryKind::File, 3));
    assert_eq!(st.path, s(&root.join("a")));
    assert!(matches!(
        t.walk(
            &s(&root.join("a")),
            &WalkOptions {
                hash: false,
                cursor: None,
                limit: 1
            }
        ),
        Err(TreeError::Invalid(_))
    ));
}

#[test]
fn remove_empty_dir_removes_only_empty_directories() {
    let f = fixture();
    let root = f.base.join("d");
    write(&root.join("x"), b"data");
    let t = tree(&[&root], None);
    assert!(matches!(
        t.remove_empty_dir(&s(&root)),
        Err(TreeError::Invalid(m)) if m.contains("not empty")
    ));
    assert!(root.join("x").is_file());
    std::fs::remove_file(root.join("x")).unwrap();
    assert!(t.remove_empty_dir(&s(&root)).unwrap());
    assert!(!root.exists());
    assert!(!t.remove_empty_dir(&s(&root)).unwrap());
}

/// The `file` recipe computed independently of [`Summary::of`]: entries by
/// hand, sorted by path, digested and listed with serde_json.
fn recipe(entries: &[(&str, String, u64)]) -> (u64, u64, String, String) {
    let mut sorted = entries.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut h = Sha256::new();
    let mut listing = String::new();
    for (p, k, n) in &sorted {
        h.update(format!("{p}\0{k}\n").as_bytes());
        // Keys sorted by hand: k < p < s.
        listing.push_str(&format!(
            "{{\"k\":{},\"p\":{},\"s\":{n}}}\n",
            serde_json::to_string(k).unwrap(),
            serde_json::to_string(p).unwrap()
        ));
    }
    (
        sorted.len() as u64,
        sorted.iter().map(|e| e.2).sum(),
        hex::encode(h.finalize()),
        listing,
    )
}

#[test]
fn summarize_follows_the_file_recipe_byte_for_byte() {
    let f = fixture();
    let root = f.base.join("d");
    // Names that sort differently as keys and as paths, and that need JSON
    // escaping in the listing.
    write(&root.join("a.txt"), b"dot");
    write(&root.join("a/b"), b"inside a");
    write(&root.join("a-b"), b"dash");
    write(&root.join("q\"uote\\nl\n"), b"escaped");
    write(&root.join("\u{e9}t\u{e9}"), b"unicode");
    write(&root.join(".tether-owner"), b"{}");
    write(&root.join("x/.tether-tmp-1"), b"in flight");
    write(&f.base.join("target"), b"target content");
    symlink(f.base.join("target"), root.join("to-file")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    symlink(root.join("a"), root.join("to-dir")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    let t = tree(&[&root], None);
    let summary = t.summarize(&s(&root), true).unwrap();
    let (count, size, digest, listing) = recipe(&[
        ("a.txt", sha(b"dot"), 3),
        ("a/b", sha(b"inside a"), 8),
        ("a-b", sha(b"dash"), 4),
        ("q\"uote\\nl\n", sha(b"escaped"), 7),
        ("\u{e9}t\u{e9}", sha(b"unicode"), 7),
        ("to-file", sha(b"target content"), 14),
        ("dangling", "symlink:nowhere".into(), 0),
        ("to-dir", format!("symlink:{}", s(&root.join("a"))), 0),
    ]);
    assert_eq!(
        summary,
        Summary {
            count,
            size,
            digest: digest.clone(),
            listing: Some(listing)
        }
    );
    // Without the listing, the same numbers.
    let bare = t.summarize(&s(&root), false).unwrap();
    assert_eq!(
        (bare.count, bare.digest, bare.listing),
        (count, digest, None)
    );
    // Grants hold as for a walk.
    let other = f.base.join("other");
    std::fs::create_dir_all(&other).unwrap();
    assert!(matches!(
        t.summarize(&s(&other), false),
        Err(TreeError::Denied(_))
    ));
}

#[test]
fn the_walk_orders_keys_with_a_trailing_slash_on_directories() {
    let f = fixture();
    let root = f.base.join("d");
    for p in ["a/x", "a.txt", "a-b", "ab", "b/c/d", "b0"] {
        write(&root.join(p), b"x");
    }
    let t = tree(&[&root], None);
    let keys: Vec<String> = walk_all_pages(&t, &s(&root), false, 3)
        .iter()
        .map(Entry::key)
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(
        keys,
        [
            "a-b", "a.txt", "a/", "a/x", "ab", "b/", "b/c/", "b/c/d", "b0"
        ]
    );
}

#[test]
fn a_corrupt_or_foreign_cache_file_is_ignored_never_trusted() {
    let f = fixture();
    let root = f.base.join("d");
    let file = root.join("f");
    write(&file, b"real content");
    age(&file);
    let cache = f.base.join("ds/.tether/cache/file-hashes.json");
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let good = std::fs::read_to_string(&cache).unwrap();
    assert!(good.starts_with("{\"version\":3,\"files\":[\n"), "{good}");
    assert!(good.ends_with("]}\n"), "{good}");
    serde_json::from_str::<serde_json::Value>(&good).expect("the cache is JSON");
    let lie = sha(b"a lie");
    let real = sha(b"real content");
    // Each file vouches for `lie` with the right stat key, but is damaged.
    for bad in [
        good.replace(&real, &lie).replace("]}\n", "]"),
        good.replace(&real, &lie).replace(",\"", ",\"\",\""),
        good.replace(&real, &lie[..63]),
        good.replace(&real, &lie).replace("3,", "4,"),
        // A shared length past the previous path (there is none).
        good.replace(&real, &lie).replace("[0,", "[1,"),
        format!("{}x", good.replace(&real, &lie)),
    ] {
        std::fs::write(&cache, &bad).unwrap();
        {
            let handle = CacheHandle::open(Some(&cache)).unwrap();
            handle.with(|c| c.forget());
        }
        let entries = walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
        assert_eq!(entries[0].sha256.as_deref(), Some(real.as_str()), "{bad}");
    }
    // An intact file is trusted (so the test above tests the damage).
    std::fs::write(&cache, good.replace(&real, &lie)).unwrap();
    {
        let handle = CacheHandle::open(Some(&cache)).unwrap();
        handle.with(|c| c.forget());
    }
    let entries = walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    assert_eq!(entries[0].sha256.as_deref(), Some(lie.as_str()));
}

#[test]
fn a_version_1_cache_is_read_and_paths_needing_escapes_round_trip() {
    let f = fixture();
    let root = f.base.join("d");
    let odd = root.join("q\"uote\\ and\nnewline, comma");
    write(&odd, b"odd");
    age(&odd);
    let md = std::fs::metadata(&odd).unwrap();
    let (mtime_ns, ctime_ns, inode) = times(&md);
    let cache = f.base.join("cache.json");
    let v1 = serde_json::json!({"version": 1, "files": {
        s(&odd): [md.len(), mtime_ns, ctime_ns, inode, sha(b"odd")]
    }});
    std::fs::write(&cache, v1.to_string()).unwrap();
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let st = stats(Some(&cache));
    assert_eq!((st.files_hashed, st.cache_hits), (0, 1));
    // Rewritten as version 3 once something changes, and read back.
    let plain = root.join("plain");
    write(&plain, b"plain");
    age(&plain);
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(text.starts_with("{\"version\":3,"), "{text}");
    {
        let handle = CacheHandle::open(Some(&cache)).unwrap();
        handle.with(|c| c.forget());
    }
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let st = stats(Some(&cache));
    // 1 + 1 hits before, and both entries from the file now.
    assert_eq!((st.files_hashed, st.cache_hits), (1, 4));
}

/// A cache as version 2 wrote it: whole paths, one per line.
fn v2_cache(lines: &[String]) -> String {
    format!("{{\"version\":2,\"files\":[\n{}\n]}}\n", lines.join(",\n"))
}

fn v2_line(path: &Path, sha256: &str) -> String {
    let md = std::fs::metadata(path).unwrap();
    let (mtime_ns, ctime_ns, inode) = times(&md);
    serde_json::json!([s(path), md.len(), mtime_ns, ctime_ns, inode, sha256]).to_string()
}

fn forget(cache: &Path) {
    let handle = CacheHandle::open(Some(cache)).unwrap();
    handle.with(|c| c.forget());
}

#[test]
fn a_version_2_cache_is_read_and_a_damaged_one_ignored() {
    let f = fixture();
    let root = f.base.join("d");
    let (a, b) = (root.join("a"), root.join("b"));
    write(&a, b"aa");
    write(&b, b"bb");
    age(&a);
    age(&b);
    let cache = f.base.join("cache.json");
    let lie = sha(b"a lie");
    let good = v2_cache(&[v2_line(&a, &lie), v2_line(&b, &sha(b"bb"))]);
    for bad in [
        good.replace("]}\n", "]"),
        good.replace(&lie, &lie[..63]),
        good.replace(&lie, &lie.to_uppercase()),
        good.replace("\"/", "\"rel/"),
        // The same path twice.
        v2_cache(&[v2_line(&a, &lie), v2_line(&a, &lie)]),
    ] {
        std::fs::write(&cache, &bad).unwrap();
        forget(&cache);
        let entries = walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
        assert_eq!(entries[0].sha256, Some(sha(b"aa")), "{bad}");
    }
    // Intact: trusted (it lies about `a` to show it), and kept as it is
    // while nothing changes.
    std::fs::write(&cache, &good).unwrap();
    forget(&cache);
    let before = stats(Some(&cache));
    let entries = walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    assert_eq!(entries[0].sha256, Some(lie.clone()));
    assert_eq!(entries[1].sha256, Some(sha(b"bb")));
    let after = stats(Some(&cache));
    assert_eq!(after.files_hashed, before.files_hashed);
    assert_eq!(after.cache_hits, before.cache_hits + 2);
    assert_eq!(std::fs::read_to_string(&cache).unwrap(), good);
}

#[test]
fn version_3_shares_path_prefixes_and_rejects_paths_out_of_order() {
    let f = fixture();
    let root = f.base.join("d");
    // `bè` and `bé/x` share the first byte of `è`/`é`: the shared length
    // stops before it, at a character boundary.
    for name in ["a", "b/c", "b/d", "bè", "bé/x", "c"] {
        let p = root.join(name);
        write(&p, name.as_bytes());
        age(&p);
    }
    let cache = f.base.join("cache.json");
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let text = std::fs::read_to_string(&cache).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // Header, six files, footer; the root written once.
    assert_eq!(lines.len(), 8, "{text}");
    assert_eq!(text.matches(&s(&root)).count(), 1, "{text}");
    let shared = format!("[{},", s(&root).len() + 1);
    assert!(lines[2].starts_with(&format!("{shared}\"b/c\"")), "{text}");
    assert!(
        lines[3].starts_with(&format!("[{},\"d\"", s(&root).len() + 3)),
        "{text}"
    );
    // Read back exactly: a fresh process hashes nothing.
    forget(&cache);
    let before = stats(Some(&cache));
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let after = stats(Some(&cache));
    assert_eq!(after.files_hashed, before.files_hashed);
    assert_eq!(after.cache_hits, before.cache_hits + 6);
    assert!(
        lines[5].starts_with(&format!("[{},\"é/x\"", s(&root).len() + 2)),
        "{text}"
    );
    // Paths out of order (`b/b` after `b/c`) or repeated (`b/c` twice):
    // the whole file is ignored, as is a shared length past the previous
    // path.
    let lie = text.replace(&sha(b"a"), &sha(b"a lie"));
    for bad in [
        lie.replace(",\"d\",", ",\"b\","),
        lie.replace(",\"d\",", ",\"c\","),
        lie.replace(&shared, "[999999,"),
    ] {
        assert_ne!(bad, lie);
        std::fs::write(&cache, &bad).unwrap();
        forget(&cache);
        let entries = walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
        assert_eq!(entries[0].sha256, Some(sha(b"a")), "{bad}");
    }
    // The intact file is trusted (so the damage is what was tested).
    std::fs::write(&cache, &lie).unwrap();
    forget(&cache);
    let entries = walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    assert_eq!(entries[0].sha256, Some(sha(b"a lie")));
}

#[test]
fn lookups_in_any_order_find_every_entry() {
    let f = fixture();
    let root = f.base.join("d");
    let mut paths = Vec::new();
    for name in ["m", "a", "z", "a/b", "q"] {
        let p = root.join(format!("{name}.f"));
        write(&p, name.as_bytes());
        age(&p);
        paths.push((p, name));
    }
    let cache = f.base.join("cache.json");
    let t = tree(&[&root], Some(cache.clone()));
    walk_all_pages(&t, &s(&root), true, 10);
    let before = stats(Some(&cache));
    // Single files, out of order and repeated: each from the cache.
    for (p, content) in paths.iter().chain(paths.iter().rev()) {
        assert_eq!(t.hash_file(&s(p)).unwrap(), sha(content.as_bytes()));
    }
    let after = stats(Some(&cache));
    assert_eq!(after.files_hashed, before.files_hashed);
    assert_eq!(after.cache_hits, before.cache_hits + 10);
}

/// A named change to a tree.
type Change<'a> = (&'static str, Box<dyn Fn() + 'a>);

/// Summaries from the summary memo: an unchanged tree's summary comes back
/// without its cache file being read; any change a stat key, a path or a
/// link target shows, and any racy file, goes the full way; the answer is
/// always the one the full way gives.
#[test]
fn an_unchanged_tree_is_summarised_without_reading_the_hash_cache() {
    let f = fixture();
    let root = f.base.join("d");
    for i in 0..30 {
        let p = root.join(format!("s{}/f{i:02}", i % 3));
        write(&p, format!("file {i}").as_bytes());
        age(&p);
    }
    symlink("nowhere", root.join("dangling")).unwrap();
    let cache = f.base.join("ds/.tether/cache/file-hashes.json");
    let memo = cache.with_file_name("file-summaries.json");
    let summarize = |listing: bool| {
        tree(&[&root], Some(cache.clone()))
            .summarize(&s(&root), listing)
            .unwrap()
    };
    // What a fresh process has: nothing in memory.
    let forget = || {
        CacheHandle::open(Some(&cache))
            .unwrap()
            .with(|c| c.forget())
    };
    // The summary with every hash taken from the files, no cache involved.
    let full = || {
        let other = f.base.join("scratch-cache.json");
        let _ = std::fs::remove_file(other.with_file_name("file-summaries.json"));
        let _ = std::fs::remove_file(&other);
        let s = tree(&[&root], Some(other.clone()))
            .summarize(&s(&root), false)
            .unwrap();
        CacheHandle::open(Some(&other))
            .unwrap()
            .with(|c| c.forget());
        s
    };

    let first = summarize(false);
    assert!(memo.is_file(), "remembered");
    assert_eq!(first, full());
    let st = stats(Some(&cache));
    assert_eq!((st.files_hashed, st.summaries_reused), (30, 0));
    forget();
    let loads = stats(Some(&cache)).loads;
    assert_eq!(summarize(false), first);
    let st = stats(Some(&cache));
    assert_eq!(
        (
            st.files_hashed,
            st.summaries_reused,
            st.loads,
            st.cache_hits
        ),
        (30, 1, loads, 30),
        "nothing hashed and the cache not read; the memo vouched for 30 hashes"
    );
    // A listing needs every hash: never from the memo.
    let listed = summarize(true);
    assert!(listed.listing.is_some());
    assert_eq!(stats(Some(&cache)).summaries_reused, 1);

    // Each change is seen, and the memo then holds the new tree.
    let one = root.join("s0/f00");
    let changes: [Change; 4] = [
        (
            "same size, aged",
            Box::new(|| {
                write(&one, b"FILE 0");
                age(&one);
            }),
        ),
        (
            "same size and mtime: only the ctime tells",
            Box::new(|| {
                let mtime = std::fs::metadata(&one).unwrap().modified().unwrap();
                std::thread::sleep(Duration::from_millis(20));
                write(&one, b"fILE 0");
                let f = std::fs::File::options().write(true).open(&one).unwrap();
                f.set_modified(mtime).unwrap();
            }),
        ),
        (
            "a file renamed",
            Box::new(|| std::fs::rename(root.join("s1/f01"), root.join("s1/g01")).unwrap()),
        ),
        (
            "a symlink retargeted",
            Box::new(|| {
                std::fs::remove_file(root.join("dangling")).unwrap();
                symlink("elsewhere", root.join("dangling")).unwrap();
            }),
        ),
    ];
    let mut previous = first;
    for (what, change) in changes {
        change();
        forget();
        let before = stats(Some(&cache));
        let got = summarize(false);
        assert_ne!(got, previous, "{what}");
        assert_eq!(got, full(), "{what}");
        let after = stats(Some(&cache));
        assert_eq!(after.summaries_reused, before.summaries_reused, "{what}");
        assert_eq!(after.loads, before.loads + 1, "{what}: the cache read");
        // Remembered again: the next call takes it.
        forget();
        assert_eq!(summarize(false), got, "{what}");
        assert_eq!(
            stats(Some(&cache)).summaries_reused,
            before.summaries_reused + 1,
            "{what}"
        );
        previous = got;
    }

    // A racy file: read every time, and the summary not remembered until it
    // is old enough.
    let fresh = root.join("s2/fresh");
    write(&fresh, b"just now");
    let with_fresh = summarize(false);
    assert_eq!(with_fresh, full());
    let before = stats(Some(&cache));
    assert_eq!(summarize(false), with_fresh);
    let after = stats(Some(&cache));
    assert_eq!(after.summaries_reused, before.summaries_reused);
    assert_eq!(after.files_hashed, before.files_hashed + 1, "re-read");
    age(&fresh);
    summarize(false);
    let before = stats(Some(&cache));
    summarize(false);
    assert_eq!(
        stats(Some(&cache)).summaries_reused,
        before.summaries_reused + 1
    );

    // A memo that does not parse is ignored and replaced.
    std::fs::write(&memo, b"{").unwrap();
    forget();
    let before = stats(Some(&cache));
    let got = summarize(false);
    assert_eq!(got, full());
    assert_eq!(
        stats(Some(&cache)).summaries_reused,
        before.summaries_reused
    );
    let text = std::fs::read_to_string(&memo).unwrap();
    assert!(text.contains(&got.digest), "{text}");
}

/// The walk digest a walk computes as it goes, per directory on its
/// threads, is the digest of the entries it returns.
#[test]
fn a_digested_walk_digests_exactly_its_entries() {
    let f = fixture();
    let root = f.base.join("d");
    for p in ["a/x", "a.txt", "a-b", "ab", "b/c/d", "b0", "\u{e9}t\u{e9}"] {
        write(&root.join(p), p.as_bytes());
    }
    std::fs::create_dir_all(root.join("empty/inner")).unwrap();
    write(&f.base.join("target"), b"target");
    symlink(f.base.join("target"), root.join("b/to-file")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    symlink(root.join("a"), root.join("to-dir")).unwrap();
    // Its compact form gives back exactly the plain walk's entries.
    let (entries, seen) = walk_digested(&root, i64::MAX).unwrap().into_parts();
    assert_eq!(entries, walk_all(&root).unwrap());
    assert!(entries.iter().any(|e| e.link_target.is_some()));
    assert!(
        entries
            .iter()
            .any(|e| e.kind == EntryKind::Dir && e.mtime_ns != 0)
    );
    assert_eq!(seen.walk, summaries::digest_of_entries(&entries));
    assert!(!seen.racy, "nothing changed after the end of time");
    let now = walk_digested(&root, cache::now_ns() - cache::RACY_NS).unwrap();
    assert!(now.seen.racy, "every file was just written");
    // An empty directory is no part of it; a file is.
    std::fs::create_dir_all(root.join("empty/more")).unwrap();
    assert_eq!(walk_digested(&root, i64::MAX).unwrap().seen.walk, seen.walk);
    write(&root.join("empty/more/f"), b"f");
    assert_ne!(walk_digested(&root, i64::MAX).unwrap().seen.walk, seen.walk);
}

#[test]
fn hashing_reports_what_it_reads_to_the_watcher() {
    use std::sync::{Arc, Mutex};

    /// What the watcher was told about reads under one root.
    #[derive(Debug, Default, PartialEq)]
    struct Told {
        started: Vec<(String, u64, u64)>,
        read: u64,
        finished: usize,
    }
    struct Watcher(Arc<Mutex<Told>>, String);
    struct Task(Option<Arc<Mutex<Told>>>);
    impl progress::HashWatcher for Watcher {
        fn start(&self, what: &str, files: u64, bytes: u64) -> Box<dyn progress::HashTask> {
            // Other tests hash at the same time: only this test's root counts.
            if !what.starts_with(&self.1) {
                return Box::new(Task(None));
            }
            let mut told = self.0.lock().unwrap();
            told.started.push((what.to_owned(), files, bytes));
            Box::new(Task(Some(self.0.clone())))
        }
    }
    impl progress::HashTask for Task {
        fn advance(&self, bytes: u64) {
            if let Some(told) = &self.0 {
                told.lock().unwrap().read += bytes;
            }
        }
    }
    impl Drop for Task {
        fn drop(&mut self) {
            if let Some(told) = &self.0 {
                told.lock().unwrap().finished += 1;
            }
        }
    }

    let f = fixture();
    let root = f.base.join("d");
    // One file of several read buffers, so it reports as it goes.
    let big = vec![7u8; 600 * 1024];
    write(&root.join("big"), &big);
    write(&root.join("sub/small"), b"small");
    write(&root.join("empty"), b"");
    for p in ["big", "sub/small", "empty"] {
        age(&root.join(p));
    }
    let told = Arc::new(Mutex::new(Told::default()));
    progress::watch_hashing(Arc::new(Watcher(told.clone(), s(&root))));
    let cache = f.base.join("cache.json");
    let total = big.len() as u64 + 5;

    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    let expected = Told {
        started: vec![(s(&root), 3, total)],
        read: total,
        finished: 1,
    };
    assert_eq!(*told.lock().unwrap(), expected);

    // Everything from the cache: nothing is read, so nothing is reported.
    walk_all_pages(&tree(&[&root], Some(cache.clone())), &s(&root), true, 10);
    assert_eq!(*told.lock().unwrap(), expected);

    // One file asked for on its own is reported under its own path.
    write(&root.join("sub/small"), b"smaller");
    age(&root.join("sub/small"));
    let t = tree(&[&root], Some(cache.clone()));
    t.hash_file(&s(&root.join("sub/small"))).unwrap();
    let told = told.lock().unwrap();
    assert_eq!(
        told.started.last().unwrap(),
        &(s(&root.join("sub/small")), 1, 7)
    );
    assert_eq!((told.read, told.finished), (total + 7, 2));
}
