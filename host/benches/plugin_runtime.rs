//! Plugin runtime benchmark (`cargo xtask bench`): what loading and calling a
//! plugin costs. Prints each number beside its target; the "compiles nothing"
//! claim is checked with the runtime's counters, not with a timing.
//!
//! 1. first load: compile the memory plugin into an empty cache;
//! 2. second process: load it again in a fresh process (from the cache);
//! 3. instantiate + `configure` + one `fingerprint` on a memory object.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use tether::plugin::{PluginSource, Runtime, RuntimeConfig, builtin};

const CHILD_ENV: &str = "TETHER_BENCH_CHILD_CACHE";
const CALLS: u32 = 5_000;

fn memory_wasm() -> &'static [u8] {
    builtin::by_crate("tether-plugin-memory")
        .expect("the memory plugin is built in")
        .wasm
}

fn runtime(cache_root: &Path) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_root: cache_root.to_path_buf(),
        ..RuntimeConfig::default()
    })
    .expect("start the runtime")
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    if let Some(cache) = std::env::var_os(CHILD_ENV) {
        // The second process: load from the cache and report the counters.
        let start = Instant::now();
        let runtime = runtime(Path::new(&cache));
        rt.block_on(runtime.load_bytes(memory_wasm(), PluginSource::BuiltIn))
            .expect("load");
        let elapsed = start.elapsed();
        let stats = runtime.stats();
        println!(
            "{} {} {}",
            elapsed.as_micros(),
            stats.compiled,
            stats.loaded_from_cache
        );
        return;
    }

    let cache = tempfile::tempdir().expect("temp cache dir");
    println!(
        "plugin runtime benchmark (memory plugin, {} bytes)",
        memory_wasm().len()
    );

    // 1. First load into an empty cache.
    let start = Instant::now();
    let runtime = runtime(cache.path());
    let plugin = rt
        .block_on(runtime.load_bytes(memory_wasm(), PluginSource::BuiltIn))
        .expect("load");
    let first = start.elapsed();
    assert_eq!(runtime.stats().compiled, 1, "the first load compiles");
    println!(
        "first load (compile + cache write):      {:>10.2} ms",
        ms(first)
    );

    // 2. A second process, same cache.
    let out = Command::new(std::env::current_exe().expect("current exe"))
        .env(CHILD_ENV, cache.path())
        .output()
        .expect("run the second process");
    assert!(
        out.status.success(),
        "second process failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(|f| f.parse().expect("number"))
        .collect();
    let (micros, compiled, cached) = (fields[0], fields[1], fields[2]);
    println!(
        "second process load (from cache):         {:>10.2} ms   compiled {compiled}, from cache {cached}   target: compiles nothing",
        micros as f64 / 1000.0
    );
    assert_eq!(compiled, 0, "a second process must compile nothing");

    // 3. Instantiate + configure + fingerprint, one fresh store per call.
    let harness = plugin
        .harness("memory://bench", &json!({}))
        .expect("memory exports a harness");
    let locator = rt.block_on(harness.new_object()).expect("new object");
    let client = harness.object(&locator);
    rt.block_on(async {
        for _ in 0..200 {
            client.fingerprint(None).await.expect("fingerprint");
        }
    });
    let start = Instant::now();
    rt.block_on(async {
        for _ in 0..CALLS {
            client.fingerprint(None).await.expect("fingerprint");
        }
    });
    let per_call = start.elapsed() / CALLS;
    println!(
        "instantiate + configure + fingerprint:    {:>10.2} µs   target: <= 50 µs   ({CALLS} calls)",
        per_call.as_secs_f64() * 1e6
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
