//! Whole-command benchmark (`cargo xtask bench`): the release `tether`
//! binary run end to end, each number the median of repeated runs, printed
//! beside its target. Nothing here asserts on a timing.
//!
//! 1. `tether status` on 5 memory objects with a cached snapshot, on git, then
//!    the same on jj, beside as many bare `jj` invocations as that status makes
//!    (counted through a logging wrapper in an untimed run);
//! 2. `tether status --snapshot` on a 100,000-file directory (`file`), cold
//!    (empty hash cache) and warm;
//! 3. `tether status` again once the dataset has 200 commits (its op log and
//!    history grow with them), then `tether verify --all-history` on those
//!    200 commits x 5 memory objects: first without the history memo
//!    (`.tether/cache/history.bin`, a walk of every commit), then as it runs
//!    again with history unchanged.
//! 4. `tether export` of 1,000 commits x 20 memory objects into SQLite (the
//!    history memo warm), and `tether import` of a 10,000-row CSV, each with
//!    its time per commit / per row.
//!
//! The binary timed is a copy of the one cargo built, in the bench's
//! temporary directory, as an installed tether is (`cargo install` copies
//! it). The linker's own output runs slower until its pages leave memory:
//! page faults on it cost more (`perf`: `filemap_map_pages` and
//! `next_uptodate_folio`, 22% of a `status` against 9% for a copy), most
//! likely because the page cache holds it in the small pieces the linker
//! wrote. On the 2-core VM that was about 1.2 ms of a 4-5 ms `status`, gone
//! after dropping the caches or copying the file.
//!
//! 4. Scale (issue 28), in a dataset of `TETHER_BENCH_SCALE` (default 10,000)
//!    memory objects registered as `add` registers them: `add` of one more,
//!    the first `commit` (every object pinned), `status --snapshot`, and a
//!    `commit` of every object changed (each commit printed with its phase
//!    times, from `RUST_LOG=tether::engine::commit=debug`), with the
//!    syscalls and syncs of one more such commit counted by `strace -f -c`
//!    (when installed) and by tether's own sync log
//!    (`RUST_LOG=tether::sync=debug`).
//!
//! `TETHER_BENCH_ONLY_SCALE=1` runs scenario 1 (with jj) then 4 only;
//! `TETHER_BENCH_SKIP_SCALE=1` leaves 4 out. `TETHER_BENCH_ONLY_VERIFY=1`
//! runs scenario 1 (without jj) and the `verify --all-history` rows only:
//! 200 commits x 5 objects, then 10,000 x 5 made with `git fast-import`
//! (`VERIFY_COMMITS`).
//!
//! With `TETHER_BENCH_KEEP=1` the datasets are left in the temporary
//! directory (`TMPDIR`) and their roots printed, to profile a command by hand.
//!
//! Plugin compilations are counted from the runtime's debug log
//! (`RUST_LOG=tether=debug`, "loaded plugin component ... how=Compiled") in
//! one extra, untimed run per scenario: the first command of the run fills an
//! empty compiled-component cache, every later one should compile nothing.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Dataset, JjCallLog, MemoryStore, Vcs, describe};

const OBJECTS: usize = 5;
const COMMITS: usize = 200;
const FILES: usize = 100_000;

struct Bench {
    /// An empty compiled-component cache for this run.
    cache: tempfile::TempDir,
    /// The `tether` timed: a copy of cargo's, as installed (module docs).
    exe: PathBuf,
    _bin: tempfile::TempDir,
}

impl Bench {
    fn run(&self, d: &Dataset, args: &[&str], log: bool) -> (Duration, Output) {
        self.run_logging(d, args, log.then_some("tether=debug"))
    }

    /// [`Bench::run`] with `RUST_LOG` set to `filter` (when given).
    fn run_logging(&self, d: &Dataset, args: &[&str], filter: Option<&str>) -> (Duration, Output) {
        let mut cmd = d.command(&self.exe, &d.root());
        cmd.args(args).env("TETHER_CACHE_DIR", self.cache.path());
        if let Some(filter) = filter {
            cmd.env("RUST_LOG", filter);
        }
        let start = Instant::now();
        let out = cmd.output().expect("run tether");
        (start.elapsed(), out)
    }

    /// Run once, requiring success.
    fn ok(&self, d: &Dataset, args: &[&str]) -> Output {
        let (_, out) = self.run(d, args, false);
        assert!(
            out.status.success(),
            "tether {}:\n{}",
            args.join(" "),
            describe(&out)
        );
        out
    }

    /// The median wall time of `n` runs (after one warm-up run), each
    /// required to exit `code`; `before` runs untimed before each.
    fn median(
        &self,
        d: &Dataset,
        args: &[&str],
        n: usize,
        code: i32,
        mut before: impl FnMut(),
    ) -> Duration {
        let mut times = Vec::with_capacity(n);
        for i in 0..=n {
            before();
            let (t, out) = self.run(d, args, false);
            assert_eq!(
                out.status.code(),
                Some(code),
                "tether {}:\n{}",
                args.join(" "),
                describe(&out)
            );
            if i > 0 {
                times.push(t);
            }
        }
        times.sort();
        times[n / 2]
    }

    /// Plugin compilations (and cache loads) in one logged run of `args`.
    fn compiles(&self, d: &Dataset, args: &[&str]) -> (usize, usize) {
        let (_, out) = self.run(d, args, true);
        let log = String::from_utf8_lossy(&out.stderr);
        // The log may be coloured: match the message and the value, not `how=`.
        let loads: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("loaded plugin component"))
            .collect();
        let count = |how: &str| loads.iter().filter(|l| l.trim_end().ends_with(how)).count();
        (count("Compiled"), count("FromCache"))
    }
}

/// Whether the switch `name` is on: set to anything but empty, `0`, `false`
/// or `no` (so `TETHER_BENCH_KEEP=0` keeps nothing).
fn switch(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn report(what: &str, t: Duration, target: &str, runs: usize) {
    println!(
        "{what:<52} {:>10.2} ms   {target}   (median of {runs})",
        ms(t)
    );
}

fn report_compiles(what: &str, (compiled, cached): (usize, usize)) {
    println!(
        "  plugin compilations in one more `{what}`: {compiled} (loaded from cache: {cached})   target: 0"
    );
}

fn main() {
    let built = Path::new(env!("CARGO_BIN_EXE_tether"));
    let bin = tempfile::tempdir().expect("temp bin dir");
    let exe = bin.path().join("tether");
    std::fs::copy(built, &exe).expect("copy the tether binary");
    let b = Bench {
        cache: tempfile::tempdir().expect("temp cache dir"),
        exe,
        _bin: bin,
    };
    println!(
        "tether command benchmark ({}, run from a copy as installed)",
        built.display()
    );

    // 1. status on 5 memory objects with a cached snapshot.
    let d = Dataset::init();
    let stores: Vec<MemoryStore> = (0..OBJECTS)
        .map(|i| {
            let s = d.memory_store(&format!("store{i}"));
            s.write(json!({"n": 0}), "first");
            s
        })
        .collect();
    for (i, s) in stores.iter().enumerate() {
        let system = format!("system={}", s.root.display());
        let args = [
            "add",
            &format!("obj{i}"),
            "--kind",
            "memory",
            "--set",
            &system,
        ];
        if i == 0 {
            // The first command of the run fills the empty component cache.
            let (compiled, cached) = b.compiles(&d, &args);
            println!(
                "first command (`tether add`, empty component cache): {compiled} plugin compilation(s), {cached} from cache"
            );
        } else {
            b.ok(&d, &args);
        }
    }
    b.ok(&d, &["commit", "-m", "baseline"]);
    // The floor every command stands on, on this machine: starting the
    // binary (loading and relocating it) and parsing its arguments.
    let floor = b.median(&d, &["--version"], 50, 0, || {});
    report(
        "process floor: `tether --version`",
        floor,
        "no target (what start-up alone costs here)",
        50,
    );
    let t = b.median(&d, &["status"], 50, 0, || {});
    report(
        "status, 5 memory objects, cached snapshot",
        t,
        "target: <= 5 ms",
        50,
    );
    report_compiles("tether status", b.compiles(&d, &["status"]));
    let only_verify = switch("TETHER_BENCH_ONLY_VERIFY");
    if !only_verify {
        jj_status(&b, t);
    }

    // 2. status --snapshot on a 100,000-file directory.
    let (_, backends) = b.run(&d, &["backends"], false);
    let has_file = String::from_utf8_lossy(&backends.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some("file"));
    if switch("TETHER_BENCH_ONLY_SCALE") {
        scale(&b);
        return;
    }
    // Dropped when the bench ends (see `big_directory`).
    let mut _big_directory = None;
    if only_verify {
        // Straight to scenario 3.
    } else if has_file {
        _big_directory = big_directory(&b);
    } else {
        println!(
            "status --snapshot, {FILES} files: SKIPPED: this tether has no `file` backend (`tether backends`)"
        );
    }

    // 4. Scale: thousands of objects (issue 28).
    if !switch("TETHER_BENCH_SKIP_SCALE") && !only_verify {
        scale(&b);
    }

    // 3. verify --all-history on 200 commits x 5 objects.
    let (_, help) = b.run(&d, &["verify", "--help"], false);
    if !help.status.success() {
        println!("verify --all-history: SKIPPED: this tether has no `verify` command");
        return;
    }
    let start = Instant::now();
    for c in 1..COMMITS {
        for s in &stores {
            s.write(json!({"n": c}), &format!("write {c}"));
        }
        b.ok(&d, &["commit", "-m", &format!("commit {c}")]);
    }
    let commits = d.git(&["rev-list", "--count", "HEAD"]);
    println!(
        "  (history: {} commits x {OBJECTS} objects built in {:.1} s)",
        commits.trim(),
        start.elapsed().as_secs_f64()
    );
    // Scenario 1 again on the grown dataset: the op log now holds 200
    // commits and history 200 commits, which a status checks against each other.
    let t = b.median(&d, &["status"], 50, 0, || {});
    report(
        &format!("status, {OBJECTS} memory objects, cached snapshot, {COMMITS} commits"),
        t,
        "target: <= 5 ms",
        50,
    );
    let memo = d.root().join(".tether/cache/history.bin");
    let t = b.median(&d, &["verify", "--all-history"], 10, 0, || {
        let _ = std::fs::remove_file(&memo);
    });
    report(
        &format!("verify --all-history, {COMMITS} x {OBJECTS}, no history memo"),
        t,
        "no target",
        10,
    );
    let t = b.median(&d, &["verify", "--all-history"], 20, 0, || {});
    report(
        &format!("verify --all-history, {COMMITS} commits x {OBJECTS} objects"),
        t,
        "target: <= 10 ms",
        20,
    );
    report_compiles(
        "tether verify --all-history",
        b.compiles(&d, &["verify", "--all-history"]),
    );
    keep(d);
    long_history(&b);
    if !only_verify {
        registry(&b);
    }
}

/// Commits of the long history `verify --all-history` reads (issue 28).
const VERIFY_COMMITS: usize = 10_000;

/// `verify --all-history` on `VERIFY_COMMITS` commits x `OBJECTS` memory
/// objects, every commit changing every object: a pin per object per commit.
/// The first commit is `tether commit`'s; the others are its manifests with a
/// new state and pin each, made with `git fast-import`, and each pin's tag
/// written into its store as `pin` writes it.
fn long_history(b: &Bench) {
    let d = Dataset::init();
    let start = Instant::now();
    let stores: Vec<MemoryStore> = (0..OBJECTS)
        .map(|i| {
            let s = d.memory_store(&format!("store{i}"));
            s.write(json!({"n": 0}), "first");
            d.add_memory(&format!("obj{i}"), &s);
            s
        })
        .collect();
    b.ok(&d, &["commit", "-m", "baseline"]);
    let base: Vec<String> = (0..OBJECTS)
        .map(|i| d.git(&["show", &format!("HEAD:.tether/objects/obj{i}.toml")]))
        .collect();
    let dataset = d.dataset_id();
    let commits: Vec<(String, Vec<(String, String)>)> = (1..VERIFY_COMMITS)
        .map(|n| {
            let files = (0..OBJECTS)
                .map(|i| {
                    let snapshot = format!("{:020x}", n * OBJECTS + i);
                    let pin = format!("{dataset}.{:016x}", n * OBJECTS + i);
                    let tag = format!("tether.{pin}");
                    stores[i].set_tag(&tag, &snapshot);
                    let text: String = base[i]
                        .lines()
                        .map(|l| {
                            if l.starts_with("snapshot_id = ") {
                                format!("snapshot_id = \"{snapshot}\"")
                            } else if l.starts_with("id = ") {
                                format!("id = \"{pin}\"")
                            } else if l.starts_with("ref = ") {
                                format!("ref = \"{tag}\"")
                            } else {
                                l.to_string()
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("\n");
                    (format!(".tether/objects/obj{i}.toml"), text + "\n")
                })
                .collect();
            (format!("commit {n}"), files)
        })
        .collect();
    d.fast_import(&commits);
    let n = d.git(&["rev-list", "--count", "HEAD"]);
    println!(
        "  (history: {} commits x {OBJECTS} objects built in {:.1} s)",
        n.trim(),
        start.elapsed().as_secs_f64()
    );
    let memo = d.root().join(".tether/cache/history.bin");
    let t = b.median(&d, &["verify", "--all-history"], 3, 0, || {
        let _ = std::fs::remove_file(&memo);
    });
    report(
        &format!(
            "verify --all-history, {} x {OBJECTS}, no history memo",
            n.trim()
        ),
        t,
        "no target",
        3,
    );
    let t = b.median(&d, &["verify", "--all-history"], 5, 0, || {});
    report(
        &format!(
            "verify --all-history, {} commits x {OBJECTS} objects",
            n.trim()
        ),
        t,
        "target: <= 500 ms",
        5,
    );
    keep(d);
}

const REGISTRY_COMMITS: usize = 1_000;
const REGISTRY_OBJECTS: usize = 20;
const IMPORT_ROWS: usize = 10_000;

/// Scenario 4: export and import, in datasets of their own.
fn registry(b: &Bench) {
    let (_, help) = b.run(&Dataset::init(), &["export", "--help"], false);
    if !help.status.success() {
        println!("export / import: SKIPPED: this tether has no `export` command");
        return;
    }
    let d = Dataset::init();
    for i in 0..REGISTRY_OBJECTS {
        let s = d.memory_store(&format!("store{i}"));
        let system = format!("system={}", s.root.display());
        b.ok(
            &d,
            &[
                "add",
                &format!("obj{i}"),
                "--kind",
                "memory",
                "--set",
                &system,
            ],
        );
    }
    b.ok(&d, &["commit", "-m", "baseline"]);
    // Every later commit rewrites one manifest (a new captured_at), as a
    // commit that moves one object does.
    let base: Vec<String> = (0..REGISTRY_OBJECTS)
        .map(|i| d.git(&["show", &format!("HEAD:.tether/objects/obj{i}.toml")]))
        .collect();
    let commits: Vec<(String, Vec<(String, String)>)> = (1..REGISTRY_COMMITS)
        .map(|n| {
            let k = n % REGISTRY_OBJECTS;
            let text: String = base[k]
                .lines()
                .map(|l| {
                    if l.starts_with("captured_at") {
                        format!(
                            "captured_at = \"2026-01-01T00:00:{:02}.{:03}Z\"",
                            n / 1000,
                            n % 1000
                        )
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            (
                format!("commit {n}"),
                vec![(format!(".tether/objects/obj{k}.toml"), text + "\n")],
            )
        })
        .collect();
    d.fast_import(&commits);
    let n = d.git(&["rev-list", "--count", "HEAD"]);
    let t = b.median(&d, &["export", "out.sqlite"], 5, 0, || {});
    report(
        &format!(
            "export, {} commits x {REGISTRY_OBJECTS} objects (sqlite)",
            n.trim()
        ),
        t,
        "no target",
        5,
    );
    println!(
        "  per commit: {:.3} ms",
        ms(t) / n.trim().parse::<f64>().unwrap_or(1.0)
    );

    let d = Dataset::init();
    let csv = d.tmp().join("registry.csv");
    let mut text = String::from("key,kind,locator_json\n");
    for i in 0..IMPORT_ROWS {
        let system = d.data().join(format!("s{i}"));
        text.push_str(&format!(
            "reg/o{i:05},memory,\"{{\"\"system\"\": \"\"{}\"\"}}\"\n",
            system.display()
        ));
    }
    std::fs::write(&csv, text).unwrap();
    let objects = d.root().join(".tether/objects/reg");
    let csv_arg = csv.to_str().unwrap().to_string();
    let t = b.median(&d, &["import", &csv_arg], 3, 0, || {
        let _ = std::fs::remove_dir_all(&objects);
    });
    report(
        &format!("import, {IMPORT_ROWS} rows (csv, memory objects)"),
        t,
        "target: seconds",
        3,
    );
    println!("  per row: {:.3} ms", ms(t) / IMPORT_ROWS as f64);
}

/// How many objects scenario 4 registers (`TETHER_BENCH_SCALE`, default 10,000).
fn scale_objects() -> usize {
    std::env::var("TETHER_BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

/// One timed `commit`, required to succeed, with its phases printed under
/// its row: the time of each of `tether::engine::commit`'s debug lines (the
/// plan applied, its checks, the journal, the pins, the manifests, the VCS
/// commit), so a slow run says where it was slow. Only those few lines are
/// logged, so the log costs the run nothing worth measuring.
fn timed_commit(b: &Bench, d: &Dataset, message: &str) -> (Duration, String) {
    let args = ["commit", "-m", message];
    let (t, out) = b.run_logging(d, &args, Some("tether::engine::commit=debug"));
    assert!(out.status.success(), "tether commit:\n{}", describe(&out));
    let phases: Vec<String> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|line| {
            // `   1.234567890s DEBUG tether::engine::commit: commit: what ...`
            let (at, rest) = line.trim_start().split_once("s ")?;
            let at: f64 = at.parse().ok()?;
            let what = rest.split_once("commit: commit: ")?.1;
            // The words before its fields (`pins landed`, not `pins=...`).
            let what = what
                .split(' ')
                .take_while(|w| !w.contains('='))
                .collect::<Vec<_>>()
                .join(" ");
            Some(format!("{what} {at:.2}"))
        })
        .collect();
    (t, format!("  phases (s from start): {}", phases.join(", ")))
}

/// Scenario 4: `n` memory objects, each in a store of its own. The first is
/// registered with `tether add`; the others get the same manifest with their
/// own store, written as files (what `add` writes, without 10,000 processes).
fn scale(b: &Bench) {
    let n = scale_objects();
    let d = Dataset::init();
    let start = Instant::now();
    let stores: Vec<MemoryStore> = (0..n)
        .map(|i| d.memory_store(&format!("s{i:05}")))
        .collect();
    let system = |s: &MemoryStore| format!("system={}", s.root.display());
    b.ok(
        &d,
        &[
            "add",
            "o00000",
            "--kind",
            "memory",
            "--set",
            &system(&stores[0]),
        ],
    );
    let objects = d.root().join(".tether/objects");
    let template = std::fs::read_to_string(objects.join("o00000.toml")).unwrap();
    let first = stores[0].root.display().to_string();
    for (i, s) in stores.iter().enumerate().skip(1) {
        let text = template.replace(&first, &s.root.display().to_string());
        std::fs::write(objects.join(format!("o{i:05}.toml")), text).unwrap();
    }
    println!(
        "  ({n} memory stores and manifests written in {:.1} s)",
        start.elapsed().as_secs_f64()
    );

    // `add` of one more: it reads no other manifest.
    let extra = d.memory_store("extra");
    let extra_system = system(&extra);
    let add = ["add", "extra", "--kind", "memory", "--set", &extra_system];
    let manifest = objects.join("extra.toml");
    let t = b.median(&d, &add, 10, 0, || {
        let _ = std::fs::remove_file(&manifest);
    });
    report(
        &format!("add, {n} objects registered"),
        t,
        "target: <= 10 ms",
        10,
    );
    std::fs::remove_file(&manifest).unwrap();

    let (t, phases) = timed_commit(b, &d, "first pins");
    report(
        &format!("commit, {n} objects, first pins"),
        t,
        "target: <= 5000 ms",
        1,
    );
    println!("{phases}");
    let change = |round: usize| {
        for s in &stores {
            s.write(json!({"round": round}), &format!("round {round}"));
        }
    };
    change(1);
    let t = b.median(&d, &["status", "--snapshot"], 3, 0, || {});
    report(
        &format!("status --snapshot, {n} objects, all changed"),
        t,
        "target: <= 1500 ms",
        3,
    );
    let (t, phases) = timed_commit(b, &d, "round 1");
    report(
        &format!("commit, {n} changed objects"),
        t,
        "target: <= 5000 ms",
        1,
    );
    println!("{phases}");
    let t = b.median(&d, &add, 10, 0, || {
        let _ = std::fs::remove_file(&manifest);
    });
    report(
        &format!("add, {n} objects registered and committed twice"),
        t,
        "target: <= 10 ms",
        10,
    );
    std::fs::remove_file(&manifest).unwrap();

    // What one more commit of everything costs, counted.
    change(2);
    count_commit(b, &d, n);
    keep(d);
}

/// The syscalls (`strace -f -c`, when installed) and tether's own syncs (its
/// sync log) of one `commit` of `n` changed objects.
fn count_commit(b: &Bench, d: &Dataset, n: usize) {
    let summary = d.tmp().join("strace.txt");
    let strace = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let mut cmd = if strace {
        let mut c = d.command("strace", &d.root());
        c.args(["-f", "-c", "-o"]).arg(&summary).arg(&b.exe);
        c
    } else {
        d.command(&b.exe, &d.root())
    };
    let out = cmd
        .args(["commit", "-m", "round 2"])
        .env("TETHER_CACHE_DIR", b.cache.path())
        .env("RUST_LOG", "tether::sync=debug")
        .output()
        .expect("run tether");
    assert!(out.status.success(), "{}", describe(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    let syncs = log.lines().filter(|l| l.contains("tether::sync")).count();
    let journal = log
        .lines()
        .filter(|l| l.contains("tether::sync") && l.contains("ops.jsonl"))
        .count();
    println!(
        "  commit of {n} changed objects: tether's own syncs {syncs} (journal {journal})   \
         target: a constant, not per object"
    );
    if !strace {
        println!("  syscall counts: SKIPPED: no strace on this machine");
        return;
    }
    let text = std::fs::read_to_string(&summary).unwrap_or_default();
    let (mut total, mut errors) = (0u64, 0u64);
    let mut calls = std::collections::BTreeMap::new();
    for line in text.lines() {
        // `% time seconds usecs/call calls [errors] syscall`
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[0].parse::<f64>().is_err() {
            continue;
        }
        let name = f[f.len() - 1];
        let count: u64 = f[3].parse().unwrap_or(0);
        let errs: u64 = if f.len() == 6 {
            f[4].parse().unwrap_or(0)
        } else {
            0
        };
        if name == "total" {
            total = count;
            errors = errs;
        } else {
            calls.insert(name.to_string(), (count, errs));
        }
    }
    let count =
        |names: &[&str]| -> u64 { names.iter().map(|n| calls.get(*n).map_or(0, |c| c.0)).sum() };
    let readlink_errors = ["readlink", "readlinkat"]
        .iter()
        .map(|n| calls.get(*n).map_or(0, |c| c.1))
        .sum::<u64>();
    println!(
        "  commit of {n} changed objects under strace -f -c: {total} syscalls ({:.1} per object, \
         {errors} failed), fsync/fdatasync/syncfs {}, failing readlink {readlink_errors}   \
         target: syncs a constant; was 283 syscalls and 3 fsyncs per object",
        total as f64 / n as f64,
        count(&["fsync", "fdatasync", "syncfs", "sync_file_range"]),
    );
}

/// Leave `d` on disk when `TETHER_BENCH_KEEP` is set (see the module doc).
fn keep(d: Dataset) {
    if switch("TETHER_BENCH_KEEP") {
        println!("  (kept: {})", d.root().display());
        std::mem::forget(d);
    }
}

/// Scenario 2, in a dataset of its own, handed back to live until the bench
/// ends: deleting its 100,000 files right before scenario 4 made scenario 4
/// pay for them (ext4 without a journal skips every recently freed inode
/// when it allocates one, so 10,000 new stores took 15 s instead of 2).
fn big_directory(b: &Bench) -> Option<Dataset> {
    let d = Dataset::init();
    let dir = d.data().join("big");
    let start = Instant::now();
    for i in 0..FILES {
        let sub = dir.join(format!("d{:03}", i / 1000));
        if i % 1000 == 0 {
            std::fs::create_dir_all(&sub).unwrap();
        }
        std::fs::write(sub.join(format!("f{i:06}.bin")), format!("file {i}\n")).unwrap();
    }
    println!(
        "  ({FILES} files written in {:.1} s)",
        start.elapsed().as_secs_f64()
    );
    b.ok(&d, &["add", "big", "--kind", "file", "../data/big"]);
    // Files modified within two seconds of now are always re-read.
    std::thread::sleep(Duration::from_millis(2100));
    // Cold: no hash cache, and no summary memo beside it.
    let caches = d.root().join(".tether/cache");
    let clear = || {
        for name in ["file-hashes.json", "file-summaries.json"] {
            let _ = std::fs::remove_file(caches.join(name));
        }
    };
    let t = b.median(&d, &["status", "--snapshot"], 3, 0, clear);
    report(
        &format!("status --snapshot, {FILES} files, cold (no hash cache)"),
        t,
        "no target",
        3,
    );
    let t = b.median(&d, &["status", "--snapshot"], 10, 0, || {});
    report(
        &format!("status --snapshot, {FILES} files, warm"),
        t,
        "target: <= 100 ms",
        10,
    );
    report_compiles(
        "tether status --snapshot",
        b.compiles(&d, &["status", "--snapshot"]),
    );
    // What the spec's stat-cache rule costs before tether does anything: one
    // `lstat` per file, the directories shared out over every core.
    let mut times: Vec<Duration> = (0..=10).map(|_| stat_every_file(&dir)).collect();
    times.remove(0);
    times.sort();
    report(
        &format!("  for reference: lstat of all {FILES} files, all cores"),
        times[times.len() / 2],
        "(no tether: the floor of a warm scan)",
        10,
    );
    if switch("TETHER_BENCH_KEEP") {
        keep(d);
        return None;
    }
    Some(d)
}

/// Wall time to `lstat` every entry under `dir` (its subdirectories shared
/// out over `available_parallelism` threads), as the warm scan must.
fn stat_every_file(dir: &Path) -> Duration {
    let start = Instant::now();
    let subdirs: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let stated = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                while let Some(sub) =
                    subdirs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    for e in std::fs::read_dir(sub).unwrap() {
                        // `DirEntry::metadata`: fstatat on the directory's fd, as tether's walk.
                        let md = e.unwrap().metadata().unwrap();
                        std::hint::black_box(md.len());
                        stated.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(stated.into_inner(), FILES, "every file stated");
    start.elapsed()
}

/// Scenario 1 on jj: the same dataset in a jj repository, its `status` beside
/// git's (`git_status`) and beside the same number of bare `jj` invocations.
fn jj_status(b: &Bench, git_status: Duration) {
    let d = Dataset::init_in(Vcs::Jj);
    for i in 0..OBJECTS {
        let s = d.memory_store(&format!("store{i}"));
        s.write(json!({"n": 0}), "first");
        let system = format!("system={}", s.root.display());
        b.ok(
            &d,
            &[
                "add",
                &format!("obj{i}"),
                "--kind",
                "memory",
                "--set",
                &system,
            ],
        );
    }
    b.ok(&d, &["commit", "-m", "baseline"]);
    let t = b.median(&d, &["status"], 50, 0, || {});

    // How many jj processes one status starts: a wrapper logs each.
    let counting = JjCallLog::new(&d.tmp().join("counting"));
    // The first run through the wrapper checks its version (remembered per
    // executable, as for the real jj the timed runs used): not counted.
    let mut calls = 0;
    for _ in 0..2 {
        let out = d
            .command(&b.exe, &d.root())
            .env("TETHER_JJ", &counting.wrapper)
            .env("TETHER_CACHE_DIR", b.cache.path())
            .arg("status")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        calls = counting.take().len();
    }
    let jj = tether_testkit::jj();

    // The same number of bare, cheap jj calls (no snapshot), timed as a sequence.
    let mut times = Vec::new();
    for i in 0..=50 {
        let start = Instant::now();
        for _ in 0..calls {
            let out = d
                .command(&jj, &d.root())
                .args([
                    "log",
                    "--ignore-working-copy",
                    "--no-graph",
                    "-r",
                    "@",
                    "-T",
                    "commit_id",
                ])
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", describe(&out));
        }
        if i > 0 {
            times.push(start.elapsed());
        }
    }
    times.sort();
    let bare = times[times.len() / 2];
    report(
        "status, 5 memory objects, cached snapshot, on jj",
        t,
        &format!(
            "git: {:.2} ms; {calls} bare jj call(s): {:.2} ms",
            ms(git_status),
            ms(bare)
        ),
        50,
    );
    // Beside a bare `jj status` of the same repository, in the same run.
    let mut times = Vec::new();
    for i in 0..=20 {
        let start = Instant::now();
        let out = d.command(&jj, &d.root()).arg("status").output().unwrap();
        assert!(out.status.success(), "{}", describe(&out));
        if i > 0 {
            times.push(start.elapsed());
        }
    }
    times.sort();
    let jj_status = times[times.len() / 2];
    // The bare `jj status` snapshots: measure tether again after it.
    let t = b.median(&d, &["status"], 50, 0, || {});
    println!(
        "  status on jj {:.2} ms against a bare `jj status` {:.2} ms: {:.2}x   target: <= 0.5x; \
         jj processes per status with jj's operation heads unchanged: {calls}   target: 0",
        ms(t),
        ms(jj_status),
        t.as_secs_f64() / jj_status.as_secs_f64()
    );
}
