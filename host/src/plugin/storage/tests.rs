//! Every operation runs against every implementation with one shared body:
//! local directories, memory buckets, and `s3://` on a local S3 server (moto,
//! one per test process, from the pinned Python environment).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tempfile::TempDir;

use super::*;

/// A bucket of one kind plus whatever keeps it alive.
struct Harness {
    bucket: Bucket,
    /// The bucket's directory for local buckets, to look at the files.
    dir: Option<PathBuf>,
    _tmp: Option<TempDir>,
}

fn unique_memory_name() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "storage-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

async fn local_harness() -> Harness {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("store");
    let grants = Grants::new([root.to_str().unwrap().to_string()]);
    let bucket = grants
        .open(root.to_str().unwrap())
        .await
        .unwrap()
        .with_lock_dir(tmp.path().join("locks"));
    Harness {
        bucket,
        dir: Some(root),
        _tmp: Some(tmp),
    }
}

async fn memory_harness() -> Harness {
    let uri = format!("memory://{}", unique_memory_name());
    let grants = Grants::new([uri.clone()]);
    Harness {
        bucket: grants.open(&uri).await.unwrap(),
        dir: None,
        _tmp: None,
    }
}

/// A memory bucket opened at a sub-prefix, so prefix handling is covered too.
async fn memory_sub_harness() -> Harness {
    let name = unique_memory_name();
    let grants = Grants::new([format!("memory://{name}")]);
    let bucket = grants
        .open(&format!("memory://{name}/sub/dir"))
        .await
        .unwrap();
    Harness {
        bucket,
        dir: None,
        _tmp: None,
    }
}

/// One moto server for the whole test process; it stops when the process
/// exits (its stdin closes).
fn s3_server() -> &'static tether_testkit::S3Server {
    static SERVER: std::sync::OnceLock<tether_testkit::S3Server> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| tether_testkit::S3Server::start("storage-tests"))
}

fn s3_settings(server: &tether_testkit::S3Server) -> S3Resolution {
    let options = serde_json::json!({
        "access_key_id": tether_testkit::S3_ACCESS_KEY_ID,
        "secret_access_key": tether_testkit::S3_SECRET_ACCESS_KEY,
        "region": tether_testkit::S3_REGION,
        "endpoint_url": server.endpoint(),
        "allow_http": true,
    });
    Arc::new(S3Settings::resolve(options.as_object().unwrap(), |_| None))
}

/// An S3 bucket at a fresh prefix of the shared server's bucket.
async fn s3_harness() -> Harness {
    let server = s3_server();
    let uri = format!("s3://{}/{}", server.bucket(), unique_memory_name());
    let grants = Grants::new([uri.clone()]).with_s3(s3_settings(server));
    Harness {
        bucket: grants.open(&uri).await.unwrap(),
        dir: None,
        _tmp: None,
    }
}

async fn harnesses() -> Vec<Harness> {
    vec![
        local_harness().await,
        memory_harness().await,
        memory_sub_harness().await,
        s3_harness().await,
    ]
}

fn keys(page: &ListPage) -> Vec<&str> {
    page.objects.iter().map(|m| m.key.as_str()).collect()
}

/// `head-version`: the current object's metadata (no version id on these
/// unversioned stores), and nothing for a version the store does not have.
#[tokio::test]
async fn head_version_of_current_and_unknown_versions() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        assert_eq!(b.head_version("k", None).await.unwrap(), None, "{uri}");
        let put = b
            .put("k", b"one".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        let now = b
            .head_version("k", None)
            .await
            .unwrap()
            .expect("the object");
        assert_eq!(now.meta.etag, put.etag, "{uri}");
        assert_eq!(now.meta.size, 3, "{uri}");
        assert_eq!(now.version, None, "{uri}: no versioning here");
        assert_eq!(
            b.head_version("k", Some("3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY"))
                .await
                .unwrap(),
            None,
            "{uri}"
        );
    }
}

#[tokio::test]
async fn round_trip() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        assert_eq!(b.get("a/b.txt").await.unwrap(), None, "{uri}");
        assert_eq!(b.head("a/b.txt").await.unwrap(), None, "{uri}");

        let m1 = b
            .put("a/b.txt", b"hello".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        assert_eq!((m1.key.as_str(), m1.size), ("a/b.txt", 5), "{uri}");
        assert!(!m1.etag.is_empty(), "{uri}");
        let got = b.get("a/b.txt").await.unwrap().unwrap();
        assert_eq!(&got.data[..], b"hello", "{uri}");
        assert_eq!(got.meta.etag, m1.etag, "{uri}");
        assert_eq!(got.meta.size, 5, "{uri}");
        let lm = got.meta.last_modified.clone().expect("last_modified");
        assert!(
            lm.ends_with('Z') && lm.as_bytes()[10] == b'T',
            "{uri}: {lm}"
        );
        let head = b.head("a/b.txt").await.unwrap().unwrap();
        assert_eq!(head, got.meta, "{uri}");

        let m2 = b
            .put("a/b.txt", &b"bye"[..], PutMode::Overwrite)
            .await
            .unwrap();
        assert_ne!(m2.etag, m1.etag, "{uri}");
        assert_eq!(
            &b.get("a/b.txt").await.unwrap().unwrap().data[..],
            b"bye",
            "{uri}"
        );

        // Empty objects exist.
        b.put("empty", Vec::new(), PutMode::Create).await.unwrap();
        let e = b.get("empty").await.unwrap().unwrap();
        assert_eq!((e.meta.size, e.data.len()), (0, 0), "{uri}");

        // A "directory" is not an object.
        assert_eq!(b.get("a").await.unwrap(), None, "{uri}");
        assert_eq!(b.head("a").await.unwrap(), None, "{uri}");
        // Keys below an object do not exist either.
        assert_eq!(b.get("empty/x").await.unwrap(), None, "{uri}");
    }
}

#[tokio::test]
async fn local_etag_is_content_sha256_prefix() {
    let h = local_harness().await;
    let m = h
        .bucket
        .put("k", b"abc".to_vec(), PutMode::Overwrite)
        .await
        .unwrap();
    // sha256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad
    assert_eq!(m.etag, "ba7816bf8f01cfea414140de5dae2223");
    let on_disk = std::fs::read(h.dir.as_ref().unwrap().join("k")).unwrap();
    assert_eq!(on_disk, b"abc");
}

#[tokio::test]
async fn range_reads() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        assert_eq!(b.get_range("r", 0, 4).await.unwrap(), None, "{uri}");
        b.put("r", b"0123456789".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        let range = |o, l| b.get_range("r", o, l);
        assert_eq!(range(0, 4).await.unwrap().unwrap(), b"0123", "{uri}");
        assert_eq!(range(3, 2).await.unwrap().unwrap(), b"34", "{uri}");
        assert_eq!(range(8, 10).await.unwrap().unwrap(), b"89", "{uri}");
        assert_eq!(
            range(0, u64::MAX).await.unwrap().unwrap(),
            b"0123456789",
            "{uri}"
        );
        assert_eq!(
            range(5, u64::MAX).await.unwrap().unwrap(),
            b"56789",
            "{uri}"
        );
        assert_eq!(range(10, 1).await.unwrap().unwrap(), b"", "{uri}");
        assert_eq!(range(99, 1).await.unwrap().unwrap(), b"", "{uri}");
        assert_eq!(range(2, 0).await.unwrap().unwrap(), b"", "{uri}");
        b.put("e", Vec::new(), PutMode::Overwrite).await.unwrap();
        assert_eq!(b.get_range("e", 0, 5).await.unwrap().unwrap(), b"", "{uri}");
    }
}

const LIST_KEYS: [&str; 7] = ["c/x", "b0", "a/c/d", "b", "a-c", "a/b", "a/c/e"];
/// Byte order: `-` (0x2d) sorts before `/` (0x2f).
const LIST_SORTED: [&str; 7] = ["a-c", "a/b", "a/c/d", "a/c/e", "b", "b0", "c/x"];

async fn fill(b: &Bucket) {
    for k in LIST_KEYS {
        b.put(k, k.as_bytes().to_vec(), PutMode::Create)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn list_pages_and_cursors() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        assert_eq!(
            b.list("", None, 10).await.unwrap(),
            ListPage::default(),
            "{uri}"
        );
        fill(b).await;

        let all = b.list("", None, 100).await.unwrap();
        assert_eq!(keys(&all), LIST_SORTED, "{uri}");
        assert_eq!(all.next, None, "{uri}");
        let m = &all.objects[0];
        assert_eq!(
            (m.size, m.etag.clone()),
            (3, b.head("a-c").await.unwrap().unwrap().etag)
        );

        let mut cursor = None;
        let mut pages = Vec::new();
        loop {
            let page = b.list("", cursor.clone(), 3).await.unwrap();
            pages.push(
                keys(&page)
                    .into_iter()
                    .map(String::from)
                    .collect::<Vec<_>>(),
            );
            match page.next.clone() {
                Some(n) => {
                    assert_eq!(Some(n.as_str()), keys(&page).last().copied(), "{uri}");
                    cursor = Some(n);
                }
                None => break,
            }
        }
        assert_eq!(
            pages,
            vec![
                vec!["a-c", "a/b", "a/c/d"],
                vec!["a/c/e", "b", "b0"],
                vec!["c/x"],
            ],
            "{uri}"
        );
        // An exact fit ends with `next: None`, not an empty extra page.
        let seven = b.list("", None, 7).await.unwrap();
        assert_eq!((seven.objects.len(), seven.next), (7, None), "{uri}");

        // A cursor need not be an existing key.
        let after = b.list("", Some("a/c".into()), 2).await.unwrap();
        assert_eq!(keys(&after), ["a/c/d", "a/c/e"], "{uri}");
        assert_eq!(after.next.as_deref(), Some("a/c/e"), "{uri}");
        let after = b.list("", Some("a/c/zzz".into()), 100).await.unwrap();
        assert_eq!(keys(&after), ["b", "b0", "c/x"], "{uri}");
        let after = b.list("", Some("c/x".into()), 100).await.unwrap();
        assert_eq!(after, ListPage::default(), "{uri}");

        assert!(
            matches!(b.list("", None, 0).await, Err(StorageError::Invalid(_))),
            "{uri}"
        );
    }
}

#[tokio::test]
async fn list_prefix_filtering() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        fill(b).await;
        let list = |p: &'static str| b.list(p, None, 100);
        assert_eq!(
            keys(&list("a").await.unwrap()),
            ["a-c", "a/b", "a/c/d", "a/c/e"],
            "{uri}"
        );
        assert_eq!(
            keys(&list("a/").await.unwrap()),
            ["a/b", "a/c/d", "a/c/e"],
            "{uri}"
        );
        assert_eq!(
            keys(&list("a/c").await.unwrap()),
            ["a/c/d", "a/c/e"],
            "{uri}"
        );
        assert_eq!(keys(&list("a/c/e").await.unwrap()), ["a/c/e"], "{uri}");
        assert_eq!(keys(&list("b").await.unwrap()), ["b", "b0"], "{uri}");
        assert_eq!(keys(&list("c/").await.unwrap()), ["c/x"], "{uri}");
        assert!(list("nope").await.unwrap().objects.is_empty(), "{uri}");
        assert!(list("a/c/e/f").await.unwrap().objects.is_empty(), "{uri}");
        let page = b.list("a", Some("a-c".into()), 1).await.unwrap();
        assert_eq!(keys(&page), ["a/b"], "{uri}");
        assert_eq!(page.next.as_deref(), Some("a/b"), "{uri}");
        // The last matching key ends the listing even though `b` follows.
        let page = b.list("a", Some("a/b".into()), 2).await.unwrap();
        assert_eq!(keys(&page), ["a/c/d", "a/c/e"], "{uri}");
        assert_eq!(page.next, None, "{uri}");
        assert!(
            matches!(b.list("/a", None, 5).await, Err(StorageError::Invalid(_))),
            "{uri}"
        );
    }
}

#[tokio::test]
async fn delete_and_pruning() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        assert!(!b.delete("x/y/z").await.unwrap(), "{uri}");
        b.put("x/y/z", b"1".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        b.put("x/w", b"2".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        assert!(b.delete("x/y/z").await.unwrap(), "{uri}");
        assert!(!b.delete("x/y/z").await.unwrap(), "{uri}");
        assert_eq!(b.get("x/y/z").await.unwrap(), None, "{uri}");
        if let Some(dir) = &h.dir {
            assert!(!dir.join("x/y").exists(), "empty x/y pruned");
            assert!(dir.join("x").is_dir(), "x still holds x/w");
        }
        assert!(b.delete("x/w").await.unwrap(), "{uri}");
        if let Some(dir) = &h.dir {
            assert!(!dir.join("x").exists(), "empty x pruned");
            assert!(dir.is_dir(), "the bucket root is kept");
            assert_eq!(
                std::fs::read_dir(dir).unwrap().count(),
                0,
                "no temp files left"
            );
        }
        assert_eq!(
            b.list("", None, 10).await.unwrap(),
            ListPage::default(),
            "{uri}"
        );
        // A directory is not an object to delete.
        b.put("d/e", b"3".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        assert!(!b.delete("d").await.unwrap(), "{uri}");
        assert!(b.head("d/e").await.unwrap().is_some(), "{uri}");
    }
}

#[tokio::test]
async fn copy_with_and_without_overwrite() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        let src = b
            .put("src", b"one".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        let c = b.copy("src", "dir/dst", false).await.unwrap();
        assert_eq!((c.key.as_str(), c.size), ("dir/dst", 3), "{uri}");
        assert_eq!(
            &b.get("dir/dst").await.unwrap().unwrap().data[..],
            b"one",
            "{uri}"
        );
        assert_eq!(
            b.head("dir/dst").await.unwrap().unwrap().etag,
            c.etag,
            "{uri}"
        );

        b.put("src", b"two".to_vec(), PutMode::IfMatch(src.etag))
            .await
            .unwrap();
        let err = b.copy("src", "dir/dst", false).await.unwrap_err();
        assert!(
            matches!(err, StorageError::AlreadyExists(ref m) if m.contains("dir/dst")),
            "{uri}: {err}"
        );
        assert_eq!(
            &b.get("dir/dst").await.unwrap().unwrap().data[..],
            b"one",
            "{uri}"
        );
        b.copy("src", "dir/dst", true).await.unwrap();
        assert_eq!(
            &b.get("dir/dst").await.unwrap().unwrap().data[..],
            b"two",
            "{uri}"
        );

        let err = b.copy("missing", "other", true).await.unwrap_err();
        assert!(
            matches!(err, StorageError::PreconditionFailed(ref m) if m.contains("missing")),
            "{uri}: {err}"
        );
        assert_eq!(b.head("other").await.unwrap(), None, "{uri}");
    }
}

#[tokio::test]
async fn conditional_puts() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        let err = b
            .put("k", b"x".to_vec(), PutMode::IfMatch("nope".into()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StorageError::PreconditionFailed(ref m) if m.contains("\"k\"")),
            "{uri}: {err}"
        );
        assert_eq!(b.head("k").await.unwrap(), None, "{uri}");
        // A failed if-match in a new directory leaves nothing behind.
        let err = b
            .put("n/k", b"x".to_vec(), PutMode::IfMatch("e".into()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StorageError::PreconditionFailed(_)),
            "{uri}: {err}"
        );
        if let Some(dir) = &h.dir {
            assert!(!dir.join("n").exists());
        }

        let m1 = b.put("k", b"v1".to_vec(), PutMode::Create).await.unwrap();
        let err = b
            .put("k", b"v2".to_vec(), PutMode::Create)
            .await
            .unwrap_err();
        assert!(
            matches!(err, StorageError::AlreadyExists(ref m) if m.contains("\"k\"")),
            "{uri}: {err}"
        );
        let err = b
            .put("k", b"v2".to_vec(), PutMode::IfMatch("bogus".into()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StorageError::PreconditionFailed(_)),
            "{uri}: {err}"
        );
        assert_eq!(&b.get("k").await.unwrap().unwrap().data[..], b"v1", "{uri}");

        let m2 = b
            .put("k", b"v2".to_vec(), PutMode::IfMatch(m1.etag.clone()))
            .await
            .unwrap();
        assert_ne!(m2.etag, m1.etag, "{uri}");
        let err = b
            .put("k", b"v3".to_vec(), PutMode::IfMatch(m1.etag.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StorageError::PreconditionFailed(_)),
            "{uri}: {err}"
        );
        let m3 = b
            .put("k", b"v3".to_vec(), PutMode::Overwrite)
            .await
            .unwrap();
        assert_eq!(b.head("k").await.unwrap().unwrap().etag, m3.etag, "{uri}");
        assert_eq!(&b.get("k").await.unwrap().unwrap().data[..], b"v3", "{uri}");
        // After a delete, if-match on the old etag fails and create works.
        assert!(b.delete("k").await.unwrap(), "{uri}");
        let err = b
            .put("k", b"v4".to_vec(), PutMode::IfMatch(m3.etag))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StorageError::PreconditionFailed(_)),
            "{uri}: {err}"
        );
        b.put("k", b"v4".to_vec(), PutMode::Create).await.unwrap();
    }
}

#[tokio::test]
async fn key_validation() {
    let bad = [
        "",
        "/a",
        "a/",
        "a//b",
        ".",
        "..",
        "./a",
        "a/./b",
        "a/../b",
        "../a",
        "a\\b",
        "a\0b",
        "a\nb",
        ".tether-tmp-1",
        "a/.tether-tmp-x",
    ];
    for h in harnesses().await {
        let b = &h.bucket;
        for key in bad {
            let invalid = |r: Result<(), StorageError>| {
                assert!(
                    matches!(r, Err(StorageError::Invalid(_))),
                    "{}: key {key:?}: {r:?}",
                    b.uri()
                )
            };
            // Reads of the empty key are the object at a bucket's own URI
            // on object stores (`the_empty_key_reads_the_object_at_the_granted_uri`).
            if !key.is_empty() || h.dir.is_some() {
                invalid(b.get(key).await.map(drop));
                invalid(b.get_range(key, 0, 1).await.map(drop));
                invalid(b.head(key).await.map(drop));
            }
            invalid(
                b.put(key, b"x".to_vec(), PutMode::Overwrite)
                    .await
                    .map(drop),
            );
            invalid(b.delete(key).await.map(drop));
            invalid(b.copy(key, "ok", true).await.map(drop));
            invalid(b.copy("ok", key, true).await.map(drop));
        }
        let err = b.get("a/../b").await.unwrap_err().to_string();
        assert!(err.contains(b.uri()) && err.contains("a/../b"), "{err}");
        // Valid unusual keys round-trip.
        for key in ["a b", "ü/ß", "%2e%2e", "a.b/.c", "...", "x~y#z"] {
            b.put(key, key.as_bytes().to_vec(), PutMode::Overwrite)
                .await
                .unwrap();
            assert_eq!(
                &b.get(key).await.unwrap().unwrap().data[..],
                key.as_bytes(),
                "{key}"
            );
        }
    }
}

#[test]
fn grants() {
    let g = Grants::new(
        [
            "/a/b",
            "file:///data/x/",
            "memory://m/p",
            "relative/path",
            "s3://bucket/k",
        ]
        .map(String::from),
    );
    let ok = |uri: &str| g.check(uri).map(|l| l.uri().to_string());
    let denied = |uri: &str| matches!(g.check(uri), Err(StorageError::Denied(_)));
    let invalid = |uri: &str| matches!(g.check(uri), Err(StorageError::Invalid(_)));

    assert_eq!(ok("/a/b").unwrap(), "/a/b");
    assert_eq!(ok("/a/b/").unwrap(), "/a/b");
    assert_eq!(ok("/a//b/./c/").unwrap(), "/a/b/c");
    assert_eq!(ok("file:///a/b/c").unwrap(), "/a/b/c");
    assert_eq!(ok("file://localhost/a/b").unwrap(), "/a/b");
    assert_eq!(ok("/a/b/c/..").unwrap(), "/a/b");
    assert_eq!(ok("/data/x").unwrap(), "/data/x");
    assert_eq!(ok("/data/x/y/z").unwrap(), "/data/x/y/z");
    assert_eq!(ok("/../a/b/c").unwrap(), "/a/b/c");
    assert!(denied("/a/bc"));
    assert!(denied("/a"));
    assert!(denied("/"));
    assert!(denied("/a/b/../bc"));
    assert!(denied("/a/b/c/../../x"));
    assert!(denied("file:///a/b/.."));
    assert!(denied("/data/xy"));
    assert!(invalid("a/b"));
    assert!(invalid("./a/b"));
    assert!(invalid("relative/path"));
    assert!(invalid("file://host/a/b"));
    assert!(invalid("file://a/b"));
    assert!(invalid("/a/b/\0"));

    assert_eq!(ok("memory://m/p").unwrap(), "memory://m/p");
    assert_eq!(ok("memory://m/p/q/").unwrap(), "memory://m/p/q");
    assert_eq!(ok("memory://m/q/../p/r").unwrap(), "memory://m/p/r");
    assert!(denied("memory://m"));
    assert!(denied("memory://m/pq"));
    assert!(denied("memory://mm/p"));
    assert!(denied("memory://other/p"));
    assert!(invalid("memory://m/.."));
    assert!(invalid("memory://m/p/../../.."));
    assert!(invalid("memory://"));
    assert!(invalid("memory:///p"));
    assert!(invalid("memory://m/a\\b"));

    assert_eq!(ok("s3://bucket/k").unwrap(), "s3://bucket/k");
    assert_eq!(ok("s3://bucket/k/x/../y/").unwrap(), "s3://bucket/k/y");
    assert!(denied("s3://bucket/kk"));
    assert!(denied("s3://bucket"));
    assert!(denied("s3://other/k"));
    assert!(denied("s3://bucket/k/../j"));
    assert!(invalid("s3://bucket/.."));
    assert!(invalid("s3://Bucket/k"));
    assert!(invalid("s3://"));
    assert!(invalid("s3:///k"));
    // GCS and Azure: granted by name like S3, never across schemes.
    let clouds = Grants::new(
        [
            "gs://bucket/k",
            "az://container/k",
            "abfss://container@acct.dfs.core.windows.net/k",
        ]
        .map(String::from),
    );
    let cloud_ok = |uri: &str| clouds.check(uri).map(|l| l.uri().to_string());
    assert_eq!(cloud_ok("gs://bucket/k/x/../y").unwrap(), "gs://bucket/k/y");
    assert_eq!(cloud_ok("az://container/k").unwrap(), "az://container/k");
    assert_eq!(
        cloud_ok("abfss://container@acct.dfs.core.windows.net/k/z").unwrap(),
        "abfss://container@acct.dfs.core.windows.net/k/z"
    );
    for refused in [
        "gs://bucket/kk",
        "az://bucket/k",
        "gs://container/k",
        "s3://bucket/k",
    ] {
        assert!(
            matches!(clouds.check(refused), Err(StorageError::Denied(_))),
            "{refused}"
        );
    }
    assert!(matches!(
        clouds.check("gs://B/k"),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        clouds.check("gs://bucket/.."),
        Err(StorageError::Invalid(_))
    ));
    for other in ["gcs://b/k", "azure://c/k", "https://h/k"] {
        match g.check(other) {
            Err(StorageError::Invalid(m)) => assert!(m.contains("not supported"), "{m}"),
            other_result => panic!("{other}: {other_result:?}"),
        }
    }
    assert!(invalid("ftp://x/y"));

    match g.check("/a/bc") {
        Err(StorageError::Denied(m)) => {
            assert!(
                m.contains("/a/bc") && m.contains("locator does not name it"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    match g.check("/a/b/../bc") {
        Err(StorageError::Denied(m)) => {
            assert!(m.contains("/a/b/../bc") && m.contains("/a/bc"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    // Nothing granted, nothing allowed.
    assert!(matches!(
        Grants::new([]).check("/"),
        Err(StorageError::Denied(_))
    ));
    assert!(matches!(
        Grants::default().check("memory://m"),
        Err(StorageError::Denied(_))
    ));
}

#[tokio::test]
async fn one_lock_file_per_directory_written_not_per_key() {
    let h = local_harness().await;
    for i in 0..40 {
        h.bucket
            .put(
                &format!("refs/tags/t{i}.json"),
                b"x".to_vec(),
                PutMode::Create,
            )
            .await
            .unwrap();
    }
    h.bucket
        .put("refs/tags/t0.json", b"y".to_vec(), PutMode::Overwrite)
        .await
        .unwrap();
    h.bucket
        .put("top", b"z".to_vec(), PutMode::Create)
        .await
        .unwrap();
    assert!(h.bucket.delete("refs/tags/t1.json").await.unwrap());
    let locks = h.dir.as_ref().unwrap().parent().unwrap().join("locks");
    // Two directories written: two lock files, or one when they share a bucket.
    let files = std::fs::read_dir(locks).unwrap().count();
    assert!((1..=2).contains(&files), "{files} lock files");
    // The lock still guards each key: create-only refuses what exists.
    let err = h
        .bucket
        .put("refs/tags/t2.json", b"w".to_vec(), PutMode::Create)
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::AlreadyExists(_)), "{err}");
}

#[test]
fn lock_files_are_a_bounded_set_keyed_by_the_directory() {
    use super::local::{LOCK_BUCKETS, lock_file_name};
    let root = Path::new("/data/stores");
    let names: std::collections::HashSet<String> = (0..50_000)
        .map(|i| lock_file_name(root, &root.join(format!("s{i:05}/refs/tags"))))
        .collect();
    // However many directories, never more files than buckets, and the
    // directories spread over nearly all of them.
    assert!(names.len() <= usize::from(LOCK_BUCKETS), "{}", names.len());
    assert!(
        names.len() > usize::from(LOCK_BUCKETS) * 99 / 100,
        "{}",
        names.len()
    );
    for name in &names {
        let stem = name.strip_suffix(".lock").unwrap();
        assert!(
            stem.len() == 3 && stem.chars().all(|c| c.is_ascii_hexdigit()),
            "{name}"
        );
    }
    // One directory, one lock file, whichever process asks; the store's
    // root is part of the key.
    let a = lock_file_name(root, &root.join("s00001/refs/tags"));
    assert_eq!(a, lock_file_name(root, &root.join("s00001/refs/tags")));
    let others: std::collections::HashSet<String> = (0..64)
        .map(|i| lock_file_name(&root.join(format!("r{i}")), &root.join("s00001/refs/tags")))
        .collect();
    assert!(others.len() > 1, "{others:?}");
}

#[tokio::test]
async fn sub_path_buckets_share_objects() {
    // Local: a bucket at a granted sub-path sees the same files.
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("root");
    let g = Grants::new([root.to_str().unwrap().to_string()]);
    let locks = tmp.path().join("locks");
    let top = g
        .open(root.to_str().unwrap())
        .await
        .unwrap()
        .with_lock_dir(locks.clone());
    let sub_uri = format!("file://{}/s/t", root.display());
    let sub = g.open(&sub_uri).await.unwrap().with_lock_dir(locks);
    assert_eq!(sub.uri(), format!("{}/s/t", root.display()));
    sub.put("k", b"v".to_vec(), PutMode::Create).await.unwrap();
    assert_eq!(&top.get("s/t/k").await.unwrap().unwrap().data[..], b"v");
    assert_eq!(keys(&top.list("", None, 10).await.unwrap()), ["s/t/k"]);
    assert_eq!(keys(&sub.list("", None, 10).await.unwrap()), ["k"]);
    // Both see the same lock: create-only through either refuses the other.
    let err = top
        .put("s/t/k", b"w".to_vec(), PutMode::Create)
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::AlreadyExists(_)));
    // Deleting through the sub-bucket prunes up to its root, not beyond.
    assert!(sub.delete("k").await.unwrap());
    assert!(root.join("s/t").is_dir());

    // Memory: the same for prefixes.
    let name = unique_memory_name();
    let g = Grants::new([format!("memory://{name}")]);
    let top = g.open(&format!("memory://{name}")).await.unwrap();
    let sub = g.open(&format!("memory://{name}/s/t")).await.unwrap();
    sub.put("k", b"v".to_vec(), PutMode::Create).await.unwrap();
    assert_eq!(&top.get("s/t/k").await.unwrap().unwrap().data[..], b"v");
    assert_eq!(keys(&top.list("", None, 10).await.unwrap()), ["s/t/k"]);
    assert_eq!(keys(&sub.list("", None, 10).await.unwrap()), ["k"]);
    // A sibling prefix that merely shares the string is not part of the bucket.
    top.put("s/tx", b"no".to_vec(), PutMode::Create)
        .await
        .unwrap();
    assert_eq!(keys(&sub.list("", None, 10).await.unwrap()), ["k"]);
}

#[tokio::test]
async fn missing_local_root_reads_empty_and_is_created_on_write() {
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("not/yet/there");
    let g = Grants::new([root.to_str().unwrap().to_string()]);
    let b = g
        .open(root.to_str().unwrap())
        .await
        .unwrap()
        .with_lock_dir(tmp.path().join("locks"));
    assert_eq!(b.get("k").await.unwrap(), None);
    assert_eq!(b.head("k").await.unwrap(), None);
    assert_eq!(b.get_range("k", 0, 1).await.unwrap(), None);
    assert_eq!(b.list("", None, 10).await.unwrap(), ListPage::default());
    assert!(!b.delete("k").await.unwrap());
    assert!(matches!(
        b.copy("k", "l", true).await,
        Err(StorageError::PreconditionFailed(_))
    ));
    assert!(!root.exists(), "reads create nothing");
    b.put("k", b"v".to_vec(), PutMode::Create).await.unwrap();
    assert_eq!(std::fs::read(root.join("k")).unwrap(), b"v");
}

#[cfg(unix)]
#[tokio::test]
async fn symlinks_out_of_the_root_are_refused() {
    use std::os::unix::fs::symlink;
    let tmp = TempDir::new().unwrap();
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), b"secret").unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("inner")).unwrap();
    std::fs::write(root.join("inner/real"), b"real").unwrap();
    symlink(outside.join("secret"), root.join("file-link")).unwrap();
    symlink(&outside, root.join("dir-link")).unwrap();
    symlink("../outside/secret", root.join("rel-link")).unwrap();
    // A link that stays inside the root is fine.
    symlink("inner/real", root.join("ok-link")).unwrap();

    let g = Grants::new([root.to_str().unwrap().to_string()]);
    let b = g
        .open(root.to_str().unwrap())
        .await
        .unwrap()
        .with_lock_dir(tmp.path().join("locks"));
    let denied = |r: Result<(), StorageError>, what: &str| match r {
        Err(StorageError::Denied(m)) => assert!(m.contains("outside the granted"), "{what}: {m}"),
        other => panic!("{what}: expected Denied, got {other:?}"),
    };
    for key in ["file-link", "rel-link", "dir-link/secret"] {
        denied(b.get(key).await.map(drop), key);
        denied(b.head(key).await.map(drop), key);
        denied(b.get_range(key, 0, 3).await.map(drop), key);
        denied(b.delete(key).await.map(drop), key);
        denied(b.copy(key, "copied", true).await.map(drop), key);
        for mode in [
            PutMode::Overwrite,
            PutMode::Create,
            PutMode::IfMatch("e".into()),
        ] {
            denied(b.put(key, b"pwned".to_vec(), mode).await.map(drop), key);
        }
    }
    denied(
        b.put("dir-link/new", b"pwned".to_vec(), PutMode::Overwrite)
            .await
            .map(drop),
        "new",
    );
    denied(
        b.put("dir-link/sub/new", b"pwned".to_vec(), PutMode::Create)
            .await
            .map(drop),
        "sub",
    );
    denied(
        b.copy("inner/real", "dir-link/copy", true).await.map(drop),
        "copy dst",
    );
    assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"secret");
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        1,
        "nothing written outside"
    );
    assert!(
        std::fs::symlink_metadata(root.join("file-link"))
            .unwrap()
            .is_symlink()
    );

    // A bucket opened at a granted sub-path that is such a symlink is refused too.
    let sub = g
        .open(&format!("{}/dir-link", root.display()))
        .await
        .unwrap();
    denied(sub.get("secret").await.map(drop), "sub get");
    denied(sub.list("", None, 10).await.map(drop), "sub list");
    denied(
        sub.put("x", b"pwned".to_vec(), PutMode::Overwrite)
            .await
            .map(drop),
        "sub put",
    );

    // Inside links work; listing shows regular files only.
    assert_eq!(&b.get("ok-link").await.unwrap().unwrap().data[..], b"real");
    assert_eq!(keys(&b.list("", None, 10).await.unwrap()), ["inner/real"]);
}

#[tokio::test]
async fn listing_skips_temp_files() {
    let h = local_harness().await;
    h.bucket
        .put("a/k", b"v".to_vec(), PutMode::Overwrite)
        .await
        .unwrap();
    std::fs::write(h.dir.as_ref().unwrap().join("a/.tether-tmp-99-1"), b"half").unwrap();
    assert_eq!(keys(&h.bucket.list("", None, 10).await.unwrap()), ["a/k"]);
}

#[test]
fn rfc3339_formatting() {
    assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00Z");
    assert_eq!(rfc3339(951_782_400, 500_000_000), "2000-02-29T00:00:00.5Z");
    assert_eq!(
        rfc3339(1_700_000_000, 123),
        "2023-11-14T22:13:20.000000123Z"
    );
    assert_eq!(rfc3339(-1, 0), "1969-12-31T23:59:59Z");
    assert_eq!(rfc3339(4_102_444_800, 0), "2100-01-01T00:00:00Z");
    assert_eq!(
        rfc3339(1_700_000_000, 120_000_000),
        "2023-11-14T22:13:20.12Z"
    );
    // Past the four-digit years, as chrono's `%Y` writes them.
    assert_eq!(rfc3339(253_402_300_800, 0), "+10000-01-01T00:00:00Z");
    assert_eq!(rfc3339(-62_167_219_201, 0), "-0001-12-31T23:59:59Z");
}

/// Eight tasks put `race` with `mode`. Each writes bytes no other put wrote:
/// local etags are content hashes, so rewriting the current bytes would keep
/// the etag (a value-based compare-and-swap) and let a second if-match pass.
async fn race(b: &Bucket, mode: PutMode, round: &str) -> (usize, Vec<StorageError>) {
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let b = b.clone();
            let mode = mode.clone();
            let data = format!("{round} writer {i}").into_bytes();
            tokio::spawn(async move { b.put("race", data, mode).await })
        })
        .collect();
    let mut wins = 0;
    let mut losses = Vec::new();
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => wins += 1,
            Err(e) => losses.push(e),
        }
    }
    (wins, losses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_conditional_puts_have_one_winner() {
    for h in harnesses().await {
        let b = &h.bucket;
        let uri = b.uri().to_string();
        let (wins, losses) = race(b, PutMode::Create, "create").await;
        assert_eq!(wins, 1, "{uri}: create");
        assert!(
            losses
                .iter()
                .all(|e| matches!(e, StorageError::AlreadyExists(_))),
            "{uri}: {losses:?}"
        );

        let etag = b.head("race").await.unwrap().unwrap().etag;
        let (wins, losses) = race(b, PutMode::IfMatch(etag.clone()), "if-match").await;
        assert_eq!(wins, 1, "{uri}: if-match");
        assert!(
            losses
                .iter()
                .all(|e| matches!(e, StorageError::PreconditionFailed(_))),
            "{uri}: {losses:?}"
        );
        assert_ne!(b.head("race").await.unwrap().unwrap().etag, etag, "{uri}");
    }
}

// ---- Separate OS processes racing one local bucket ----
//
// The parent re-executes this test binary several times, filtered to
// `child_process_racer`, with `TETHER_STORAGE_CHILD` telling each child what
// to do. Children wait for a start file so they run together, then each
// records its outcome in a file. Only the outcomes are asserted, never timing.

const CHILD_ENV: &str = "TETHER_STORAGE_CHILD";
const CHILDREN: usize = 6;

/// Not a test of its own: a no-op unless started by `separate_processes_race`.
#[tokio::test]
async fn child_process_racer() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    // spec: root \n start-file \n result-file \n mode \n etag
    let parts: Vec<&str> = spec.split('\n').collect();
    let [root, start, result, mode, etag] = parts[..] else {
        panic!("bad {CHILD_ENV}: {spec:?}");
    };
    let mode = match mode {
        "create" => PutMode::Create,
        "if-match" => PutMode::IfMatch(etag.to_string()),
        other => panic!("bad mode {other}"),
    };
    // Lock files go to $TETHER_CACHE_DIR, set by the parent: the real path.
    let bucket = Grants::new([root.to_string()]).open(root).await.unwrap();
    while !Path::new(start).exists() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let outcome = match bucket
        .put(
            "contended",
            format!("pid {}", std::process::id()).into_bytes(),
            mode,
        )
        .await
    {
        Ok(m) => format!("won {}", m.etag),
        Err(StorageError::AlreadyExists(_)) => "already-exists".to_string(),
        Err(StorageError::PreconditionFailed(_)) => "precondition-failed".to_string(),
        Err(e) => format!("error {e}"),
    };
    std::fs::write(result, outcome).unwrap();
}

fn run_children(tmp: &Path, root: &Path, round: &str, mode: &str, etag: &str) -> Vec<String> {
    // libtest names are module paths without the crate name.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let filter = format!("{module}::child_process_racer");
    let start = tmp.join(format!("start-{round}"));
    let children: Vec<_> = (0..CHILDREN)
        .map(|i| {
            let result = tmp.join(format!("result-{round}-{i}"));
            let spec = [
                root.to_str().unwrap(),
                start.to_str().unwrap(),
                result.to_str().unwrap(),
                mode,
                etag,
            ]
            .join("\n");
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    filter.as_str(),
                    "--exact",
                    "--test-threads=1",
                    "--nocapture",
                ])
                .env(CHILD_ENV, spec)
                .env("TETHER_CACHE_DIR", tmp.join("cache"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, result)
        })
        .collect();
    std::fs::write(&start, b"go").unwrap();
    children
        .into_iter()
        .map(|(mut child, result)| {
            let status = child.wait().unwrap();
            assert!(status.success(), "child failed: {status}");
            std::fs::read_to_string(&result).expect("child ran the racer and wrote its result")
        })
        .collect()
}

#[test]
fn separate_processes_race() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let tmp = TempDir::new().unwrap();
    let root = tmp.path().join("store");

    let outcomes = run_children(tmp.path(), &root, "create", "create", "");
    let winners: Vec<_> = outcomes.iter().filter(|o| o.starts_with("won ")).collect();
    assert_eq!(winners.len(), 1, "create: {outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter(|o| !o.starts_with("won "))
            .all(|o| o == "already-exists"),
        "{outcomes:?}"
    );
    let etag = winners[0].strip_prefix("won ").unwrap().to_string();

    let outcomes = run_children(tmp.path(), &root, "if-match", "if-match", &etag);
    let winners: Vec<_> = outcomes.iter().filter(|o| o.starts_with("won ")).collect();
    assert_eq!(winners.len(), 1, "if-match: {outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter(|o| !o.starts_with("won "))
            .all(|o| o == "precondition-failed"),
        "{outcomes:?}"
    );
    // The stored object is the winner's, and the lock files stayed out of the store.
    let data = std::fs::read(root.join("contended")).unwrap();
    assert_eq!(
        content_etag(&data),
        winners[0].strip_prefix("won ").unwrap()
    );
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1);
    assert!(
        std::fs::read_dir(tmp.path().join("cache/locks"))
            .unwrap()
            .count()
            >= 1
    );
}

#[tokio::test]
async fn s3_settings_the_host_could_not_resolve_fail_at_open() {
    let grants = Grants::new(["s3://bucket/k".to_string()])
        .with_s3(Arc::new(Err("no S3 credentials: set them".to_string())));
    match grants.open("s3://bucket/k/sub").await {
        Err(StorageError::Denied(m)) => {
            assert!(
                m.contains("s3://bucket/k/sub") && m.contains("no S3 credentials"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
}

/// A grant naming one object reads it with the empty key, and nothing else.
#[tokio::test]
async fn the_empty_key_reads_the_object_at_the_granted_uri() {
    let s3 = s3_server();
    let name = unique_memory_name();
    for (parent, grants) in [
        (
            format!("memory://{name}/dir"),
            Grants::new([format!("memory://{name}/dir/obj")]),
        ),
        (
            format!("s3://{}/{name}/dir", s3.bucket()),
            Grants::new([format!("s3://{}/{name}/dir/obj", s3.bucket())]).with_s3(s3_settings(s3)),
        ),
    ] {
        // Written through a bucket at the parent (granted for the setup only).
        let setup = Grants::new([parent.clone()]).with_s3(s3_settings(s3));
        let p = setup.open(&parent).await.unwrap();
        let written = p
            .put("obj", b"payload".to_vec(), PutMode::Create)
            .await
            .unwrap();
        p.put("other", b"x".to_vec(), PutMode::Create)
            .await
            .unwrap();

        let b = grants.open(&format!("{parent}/obj")).await.unwrap();
        let head = b.head("").await.unwrap().expect("the object");
        assert_eq!((head.size, &head.etag), (7, &written.etag), "{parent}");
        assert_eq!(&b.get("").await.unwrap().unwrap().data[..], b"payload");
        assert_eq!(b.get_range("", 3, 3).await.unwrap().unwrap(), b"loa");
        // Writes never take the empty key, and the parent stays ungranted.
        for r in [
            b.put("", b"y".to_vec(), PutMode::Overwrite).await.map(drop),
            b.delete("").await.map(drop),
        ] {
            assert!(
                matches!(r, Err(StorageError::Invalid(_))),
                "{parent}: {r:?}"
            );
        }
        assert!(matches!(
            grants.open(&parent).await,
            Err(StorageError::Denied(_))
        ));
        // A missing object reads as absent.
        p.delete("obj").await.unwrap();
        assert_eq!(b.head("").await.unwrap(), None, "{parent}");
    }
    // A bucket's root is not an object; a local bucket refuses the empty key.
    let root = Grants::new([format!("memory://{name}")]);
    let r = root
        .open(&format!("memory://{name}"))
        .await
        .unwrap()
        .head("")
        .await;
    assert!(matches!(r, Err(StorageError::Invalid(_))), "{r:?}");
    let local = local_harness().await;
    let r = local.bucket.head("").await;
    assert!(matches!(r, Err(StorageError::Invalid(_))), "{r:?}");
}

/// A read larger than the bucket's read limit (the calling plugin's memory
/// limit) is refused before it is made, naming the object and both sizes;
/// smaller reads, ranges within it and `head` still work.
#[tokio::test]
async fn reads_over_the_read_limit_are_refused() {
    for mut h in [
        local_harness().await,
        memory_harness().await,
        memory_sub_harness().await,
    ] {
        let b = &h.bucket;
        b.put("big", vec![7u8; 100], PutMode::Overwrite)
            .await
            .unwrap();
        b.put("fits", vec![7u8; 64], PutMode::Overwrite)
            .await
            .unwrap();
        h.bucket.read_limit = 64;
        let b = &h.bucket;
        let uri = b.uri().to_string();
        for e in [
            b.get("big").await.unwrap_err(),
            b.get_range("big", 0, u64::MAX).await.unwrap_err(),
            b.get_range("big", 10, 80).await.unwrap_err(),
        ] {
            let StorageError::Invalid(m) = &e else {
                panic!("{uri}: {e:?}")
            };
            assert!(m.contains("\"big\""), "{m}");
            assert!(m.contains("memory limit of 64 bytes"), "{m}");
            assert!(m.contains("TETHER_PLUGIN_MEMORY"), "{m}");
        }
        assert!(
            b.get("big")
                .await
                .unwrap_err()
                .to_string()
                .contains("the object is 100 bytes")
        );
        assert_eq!(b.get("fits").await.unwrap().unwrap().data.len(), 64);
        assert_eq!(
            b.get_range("big", 50, u64::MAX)
                .await
                .unwrap()
                .unwrap()
                .len(),
            50
        );
        assert_eq!(b.get_range("big", 0, 64).await.unwrap().unwrap().len(), 64);
        assert_eq!(b.head("big").await.unwrap().unwrap().size, 100);
        assert!(b.get("missing").await.unwrap().is_none());
    }
}
