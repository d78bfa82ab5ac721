//! Hostile plugins are contained: each attack fails its own object with a
//! clear error while a normal object's call in the same fan-out succeeds, and
//! the plugin keeps working afterwards (a trapped store is dropped, the next
//! call instantiates afresh).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tether::plugin::{BackendError, Plugin, PluginSource, Runtime, RuntimeConfig, fan_out};
use tether_testkit::{block_on, cache_dir, first_party_plugin, test_plugin};

const MEMORY_LIMIT: usize = 64 << 20;

type Call = Pin<Box<dyn Future<Output = Result<Value, BackendError>> + Send>>;

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_root: cache_dir(),
        call_timeout: Duration::from_millis(1500),
        memory_limit: MEMORY_LIMIT,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

struct Setup {
    hostile: Arc<Plugin>,
    memory: Arc<Plugin>,
    memory_locator: Value,
    dir: tempfile::TempDir,
}

impl Setup {
    fn root(&self) -> String {
        let root = self.dir.path().join("granted");
        std::fs::create_dir_all(&root).unwrap();
        root.to_str().unwrap().to_string()
    }
}

async fn setup(rt: &Runtime) -> Setup {
    let hostile = rt
        .load_file(&test_plugin("hostile"))
        .await
        .expect("load hostile");
    let memory = rt
        .load_file(&first_party_plugin("tether_plugin_memory"))
        .await
        .expect("load memory");
    let dir = tempfile::tempdir().expect("tempdir");
    let scratch = dir.path().join("memory-store");
    let harness = memory
        .harness(scratch.to_str().unwrap(), &json!({}))
        .expect("harness");
    let memory_locator = harness.new_object().await.expect("new memory object");
    Setup {
        hostile,
        memory,
        memory_locator,
        dir,
    }
}

/// Run the attack beside a normal hostile object and a memory object in one
/// fan-out; both of those must succeed. Returns the attack's error.
async fn contained(s: &Setup, mut attack: Value) -> BackendError {
    attack["root"] = json!(s.root());
    let attacker = s.hostile.object(&attack, &json!({}));
    let normal = s
        .hostile
        .object(&json!({"root": s.root(), "attack": "none"}), &json!({}));
    let memory = s.memory.object(&s.memory_locator, &json!({}));
    let calls: Vec<(&str, Call)> = vec![
        (
            "attacker",
            Box::pin(async move { attacker.fingerprint(None).await }),
        ),
        (
            "normal",
            Box::pin(async move { normal.fingerprint(None).await }),
        ),
        (
            "memory",
            Box::pin(async move { memory.fingerprint(None).await }),
        ),
    ];
    let mut results = fan_out(calls).await.results.into_iter();
    let (_, attacked) = results.next().unwrap();
    let (_, normal) = results.next().unwrap();
    let (_, memory) = results.next().unwrap();
    assert_eq!(
        normal.expect("the normal object in the same fan-out"),
        json!({"ok": true})
    );
    assert!(memory.expect("the memory object in the same fan-out")["snapshot_id"].is_string());
    match attacked {
        Ok(state) => panic!("the attack was not contained: {state}"),
        Err(e) => e,
    }
}

#[test]
fn reading_a_host_file_outside_any_grant_is_refused() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        let secret = s.dir.path().join("secret.txt");
        std::fs::write(&secret, b"do not read").unwrap();
        for path in ["/etc/passwd", secret.to_str().unwrap()] {
            let err = contained(&s, json!({"attack": "read-host-file", "path": path})).await;
            assert!(matches!(err, BackendError::Backend(_)), "{err:?}");
            assert!(err.to_string().contains("refused"), "{err}");
        }
    });
}

#[test]
fn opening_an_ungranted_storage_uri_is_denied() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        let elsewhere = s.dir.path().join("not-granted");
        for target in [
            elsewhere.to_str().unwrap().to_string(),
            "memory://someone-else".to_string(),
        ] {
            let err = contained(&s, json!({"attack": "open-ungranted", "target": target})).await;
            assert!(matches!(err, BackendError::Denied(_)), "{err:?}");
            assert!(
                err.to_string().contains(&target),
                "the error names the URI: {err}"
            );
        }
    });
}

#[test]
fn a_symlink_inside_a_granted_root_does_not_lead_out() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        let outside = s.dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"private").unwrap();
        let root = s.root();
        std::os::unix::fs::symlink(&outside, format!("{root}/link")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), format!("{root}/file-link")).unwrap();
        for key in ["link/secret", "file-link"] {
            let err = contained(&s, json!({"attack": "symlink-escape", "key": key})).await;
            assert!(!err.is_contained_fault(), "refused, not crashed: {err:?}");
        }
    });
}

/// The `describe-fs` grant preopens exactly the directory under `fsroot`:
/// the plugin reads and writes inside it, and nothing outside is visible,
/// neither by path, nor through `..`, nor through a symlink inside it.
#[test]
fn a_preopened_directory_is_all_a_filesystem_plugin_sees() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        assert_eq!(s.hostile.filesystem_keys(), ["fsroot".to_string()]);
        let fsroot = s.dir.path().join("repo");
        std::fs::create_dir_all(&fsroot).unwrap();
        std::fs::write(fsroot.join("inside.txt"), b"visible").unwrap();
        let outside = s.dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"private").unwrap();
        std::os::unix::fs::symlink(&outside, fsroot.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), fsroot.join("file-link")).unwrap();
        let fsroot_str = fsroot.to_str().unwrap().to_string();
        let inside = |attack: &str, path: String| json!({"root": s.root(), "fsroot": fsroot_str, "attack": attack, "path": path});

        // Inside: reads, writes and lists work, and the listing is the directory's.
        let obj = s.hostile.object(
            &inside("fs-read", format!("{fsroot_str}/inside.txt")),
            &json!({}),
        );
        assert_eq!(obj.fingerprint(None).await.expect("read inside")["len"], 7);
        let obj = s.hostile.object(
            &inside("fs-write", format!("{fsroot_str}/new.txt")),
            &json!({}),
        );
        obj.fingerprint(None).await.expect("write inside");
        assert_eq!(
            std::fs::read(fsroot.join("new.txt")).unwrap(),
            b"written by a plugin"
        );
        let obj = s
            .hostile
            .object(&inside("fs-list", fsroot_str.clone()), &json!({}));
        assert_eq!(
            obj.fingerprint(None).await.expect("list inside")["names"],
            json!(["file-link", "inside.txt", "link", "new.txt"])
        );

        // Outside: by path, through `..`, through either symlink, for reads,
        // writes and listings alike.
        let secret = outside.join("secret").to_str().unwrap().to_string();
        for (attack, path) in [
            ("fs-read", secret.clone()),
            ("fs-read", format!("{fsroot_str}/../outside/secret")),
            ("fs-read", format!("{fsroot_str}/link/secret")),
            ("fs-read", format!("{fsroot_str}/file-link")),
            ("fs-write", format!("{fsroot_str}/link/planted")),
            ("fs-write", format!("{fsroot_str}/../planted")),
            ("fs-list", format!("{fsroot_str}/link")),
            ("fs-list", format!("{fsroot_str}/..")),
            ("fs-list", "/".to_string()),
            ("fs-read", "/etc/passwd".to_string()),
        ] {
            let err = contained(&s, inside(attack, path.clone())).await;
            assert!(
                matches!(err, BackendError::Backend(_)),
                "{attack} {path}: {err:?}"
            );
            assert!(
                err.to_string().contains("refused"),
                "{attack} {path}: {err}"
            );
        }
        assert!(!outside.join("planted").exists());
        assert!(!s.dir.path().join("planted").exists());
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"private");

        // Without `fsroot` in the locator, nothing is preopened at all.
        let mut bare = inside("fs-read", format!("{fsroot_str}/inside.txt"));
        bare.as_object_mut().unwrap().remove("fsroot");
        let err = contained(&s, bare).await;
        assert!(err.to_string().contains("refused"), "{err}");
    });
}

/// A plugin that does not export `describe-fs` gets no directory even when
/// its locator holds a path under a key another plugin would call `fsroot`.
/// A granted directory that is a git repository: the plugin writes in it
/// freely, except the files git runs commands from. A changed `.git/config`
/// (here the whole file replaced) is put back and the call refused, naming
/// the file; a write elsewhere in the repository stays.
#[test]
fn a_plugin_cannot_change_what_git_runs_in_a_granted_repository() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        let repo = s.dir.path().join("repo");
        tether_testkit::run_ok(std::process::Command::new("git").args([
            "init",
            "-q",
            repo.to_str().unwrap(),
        ]));
        let config = repo.join(".git/config");
        let before = std::fs::read(&config).unwrap();
        let repo_str = repo.to_str().unwrap().to_string();
        let write = |path: &Path| {
            s.hostile.object(
                &json!({"root": s.root(), "fsroot": repo_str, "attack": "fs-write",
                        "path": path.to_str().unwrap()}),
                &json!({}),
            )
        };

        let err = write(&config).fingerprint(None).await.expect_err("refused");
        let message = err.to_string();
        assert!(matches!(err, BackendError::Denied(_)), "{err:?}");
        assert!(message.contains(&config.display().to_string()), "{message}");
        assert!(message.contains("put back"), "{message}");
        assert_eq!(
            std::fs::read(&config).unwrap(),
            before,
            "the config as it was"
        );

        write(&repo.join("notes.txt"))
            .fingerprint(None)
            .await
            .expect("any other write is the plugin's business");
        assert_eq!(
            std::fs::read(repo.join("notes.txt")).unwrap(),
            b"written by a plugin"
        );
    });
}

#[test]
fn a_plugin_without_describe_fs_gets_no_directory() {
    block_on(async {
        let rt = runtime();
        let memory = rt
            .load_file(&first_party_plugin("tether_plugin_memory"))
            .await
            .expect("load memory");
        assert!(memory.filesystem_keys().is_empty());
    });
}

/// Two handles on one URI in one call: the host hands out the same bucket
/// (and the root it keeps open for reads), so each sees the other's write
/// and delete, including under a root the write itself created.
#[test]
fn two_handles_on_one_uri_see_each_others_writes() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        let root = s.dir.path().join("not-yet");
        let root = root.to_str().unwrap();
        let obj = s.hostile.object(
            &json!({"root": root, "attack": "reopen", "key": "sub/k.json"}),
            &json!({}),
        );
        let got = obj.fingerprint(None).await.expect("reopen runs");
        assert_eq!(
            got,
            json!({"before": null, "written": "one", "deleted": null}),
            "{got}"
        );
        assert!(
            std::path::Path::new(root).is_dir(),
            "the write made the root"
        );
    });
}

#[test]
fn an_endless_loop_is_stopped_at_the_deadline() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        let err = contained(&s, json!({"attack": "loop"})).await;
        assert!(matches!(err, BackendError::Deadline { .. }), "{err:?}");
        assert!(err.to_string().contains("deadline"), "{err}");
    });
}

#[test]
fn allocating_past_the_memory_limit_is_stopped() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        match contained(&s, json!({"attack": "oom"})).await {
            BackendError::MemoryLimit { limit, kind } => {
                assert_eq!(limit, MEMORY_LIMIT as u64);
                assert_eq!(kind, "hostile");
            }
            other => panic!("expected a memory-limit error, got {other:?}"),
        }
    });
}

#[test]
fn a_panic_is_reported_with_its_message_and_the_plugin_keeps_working() {
    block_on(async {
        let rt = runtime();
        let s = setup(&rt).await;
        match contained(&s, json!({"attack": "panic"})).await {
            BackendError::Crashed { kind, detail } => {
                assert_eq!(kind, "hostile");
                assert!(
                    detail.contains("hostile plugin panicked on purpose"),
                    "{detail}"
                );
            }
            other => panic!("expected a crash, got {other:?}"),
        }
        // The trapped store was dropped; the same plugin answers the next call.
        let again = s
            .hostile
            .object(&json!({"root": s.root(), "attack": "none"}), &json!({}));
        assert_eq!(again.fingerprint(None).await.unwrap(), json!({"ok": true}));
    });
}

/// A compiled-component cache of its own and the memory plugin's bytes:
/// each runtime [`CacheOfItsOwn::load`] makes starts with nothing but the
/// cache in common with the last.
struct CacheOfItsOwn {
    dir: tempfile::TempDir,
    wasm: Vec<u8>,
}

impl CacheOfItsOwn {
    fn new() -> Self {
        CacheOfItsOwn {
            dir: tempfile::tempdir().unwrap(),
            wasm: std::fs::read(first_party_plugin("tether_plugin_memory")).unwrap(),
        }
    }

    /// A new runtime on the cache, and the plugin it loaded.
    async fn load(&self) -> (Runtime, Arc<Plugin>) {
        let rt = Runtime::new(RuntimeConfig {
            cache_root: self.dir.path().to_path_buf(),
            ..RuntimeConfig::default()
        })
        .unwrap();
        let plugin = rt
            .load_bytes(&self.wasm, PluginSource::BuiltIn)
            .await
            .unwrap();
        (rt, plugin)
    }

    /// Make the one file under `sub` writable by anyone; its path.
    fn loosen(&self, sub: &Path) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let file = std::fs::read_dir(sub)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        file
    }
}

#[test]
fn a_second_runtime_on_the_same_cache_compiles_nothing() {
    block_on(async {
        let cache = CacheOfItsOwn::new();
        let compiles = |rt: &Runtime| (rt.stats().compiled, rt.stats().loaded_from_cache);
        let (first, _) = cache.load().await;
        assert_eq!(compiles(&first), (1, 0));
        let (second, _) = cache.load().await;
        assert_eq!(compiles(&second), (0, 1));
        // A cached file someone else could have written is never deserialized.
        cache.loosen(second.cache_dir());
        let (third, _) = cache.load().await;
        assert_eq!(compiles(&third), (1, 0));
    });
}

#[test]
fn a_cached_descriptor_loads_a_plugin_without_starting_an_instance() {
    block_on(async {
        let cache = CacheOfItsOwn::new();
        let (first, described) = cache.load().await;
        assert_eq!(first.stats().instantiated, 1, "asked once, and cached");
        assert_eq!(described.kind(), "memory");

        let (second, cached) = cache.load().await;
        assert_eq!(second.stats().instantiated, 0, "answered from the cache");
        assert_eq!(cached.descriptor(), described.descriptor());

        // A descriptor someone else could have written is not believed: the
        // plugin is asked again, and its answer cached again.
        let file = cache.loosen(&cache.dir.path().join("descriptors"));
        let (third, asked) = cache.load().await;
        assert_eq!(third.stats().instantiated, 1);
        assert_eq!(asked.descriptor(), described.descriptor());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "replaced by this host's own");
    });
}

#[test]
fn a_core_module_or_garbage_is_not_a_plugin() {
    block_on(async {
        let rt = runtime();
        for (bytes, what) in [
            (&b"\0asm\x01\0\0\0"[..], "core module"),
            (&b"hello"[..], "garbage"),
        ] {
            let err = rt
                .load_bytes(bytes, PluginSource::BuiltIn)
                .await
                .unwrap_err();
            assert!(
                err.to_string().contains("not a WebAssembly component"),
                "{what}: {err}"
            );
        }
    });
}
