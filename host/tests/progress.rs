//! No silent waits. Hashing progress: a first snapshot of a large directory
//! reads every byte, and on a terminal `tether` shows a bar on stderr while
//! it does; likewise one line counting the objects a large `status
//! --snapshot` has asked so far. Compiling: a plugin run for the first time
//! is compiled (seconds), and on a terminal `tether` says so. Nowhere else:
//! not when stderr is a pipe or a file, not with `-v` (where the log says
//! it). The terminal is a real pseudo-terminal, made by `script(1)`.

use std::path::Path;
use std::process::Output;

use crate::support::{Dataset, describe, stderr};

/// 2 GiB read from a sparse file (no disk used): seconds of hashing, well
/// past the half second after which the bar shows.
const BIG: u64 = 2 << 30;

/// A dataset with the directory object `big` holding a sparse file of
/// [`BIG`] bytes and a small one.
fn dataset() -> Dataset {
    let d = Dataset::init();
    let dir = d.data().join("big");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::File::create(dir.join("sparse.bin"))
        .unwrap()
        .set_len(BIG)
        .unwrap();
    std::fs::write(dir.join("small.txt"), b"small").unwrap();
    d.ok(&["add", "big", "--kind", "file", "../data/big"]);
    d
}

/// Forget every hash, so the next snapshot reads every byte again.
fn forget_hashes(d: &Dataset) {
    for name in ["file-hashes.json", "file-summaries.json"] {
        let _ = std::fs::remove_file(d.root().join(".tether/cache").join(name));
    }
}

/// `tether ARGS` with stdout and stderr on a pseudo-terminal (80 columns):
/// what the terminal showed.
fn on_a_terminal(d: &Dataset, args: &str) -> (Output, String) {
    on_a_terminal_with(d, args, &tether_testkit::cache_dir())
}

/// [`on_a_terminal`] with `cache` as the compiled-plugin cache.
fn on_a_terminal_with(d: &Dataset, args: &str, cache: &Path) -> (Output, String) {
    on_a_terminal_with_env(d, args, cache, &[])
}

/// [`on_a_terminal_with`] with `env` set for tether too.
fn on_a_terminal_with_env(
    d: &Dataset,
    args: &str,
    cache: &Path,
    env: &[(&str, &str)],
) -> (Output, String) {
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_tether"));
    let out = d
        .command("script", &d.root())
        .envs(env.iter().copied())
        .env("TETHER_CACHE_DIR", cache)
        .args(["--quiet", "--return", "--command", &command, "/dev/null"])
        // The report's labels plain, as the assertions read them.
        .env("NO_COLOR", "1")
        .output()
        .expect("run script(1) from util-linux");
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, shown)
}

#[test]
fn a_long_hash_shows_a_bar_on_a_terminal_and_nowhere_else() {
    let d = dataset();
    // The start of the line: the directory's path is cut to fit 80 columns.
    let bar = "hashing 2 files in /";

    forget_hashes(&d);
    let (out, shown) = on_a_terminal(&d, "status --snapshot");
    assert!(out.status.success(), "{}", describe(&out));
    assert!(shown.contains(bar), "no bar on the terminal:\n{shown}");
    assert!(
        shown.contains("/2.00 GiB"),
        "the bar counts bytes:\n{shown}"
    );
    // The report itself follows the bar, which is cleared first.
    assert!(shown.contains("new big [file/observed]"), "{shown}");

    // Piped: the report only.
    forget_hashes(&d);
    let out = d.tether(&["status", "--snapshot"]);
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("hashing"), "a bar on a pipe:\n{stderr}");

    // With -v, log lines own stderr.
    forget_hashes(&d);
    let (out, shown) = on_a_terminal(&d, "-v status --snapshot");
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !shown.contains("hashing 2 files"),
        "a bar with -v:\n{shown}"
    );
}

/// The compiled form of the built-in `kind` in `cache`, if it is there.
fn compiled_builtin(d: &Dataset, cache: &Path, kind: &str) -> Option<std::path::PathBuf> {
    let rows = d.json(&["backends"], 0);
    let digest = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .and_then(|r| r["digest"].as_str())
        .unwrap()
        .trim_start_matches("sha256:")
        .to_string();
    crate::support::files_under(cache, cache)
        .into_iter()
        .find(|f| f.ends_with(&format!("{digest}.cwasm")))
        .map(|f| cache.join(f))
}

/// The first command on an empty compile cache says, on a terminal, which
/// plugins it compiles; the next compiles nothing and says nothing. Piped,
/// nothing is said; `-vv` logs the compile among tether's own decisions and
/// none of wasmtime's or Cranelift's internals.
#[test]
fn a_first_run_says_which_plugins_it_compiles_on_a_terminal() {
    let d = Dataset::init();
    let cache = d.tmp().join("fresh-cache");

    let (out, shown) = on_a_terminal_with(&d, "backends", &cache);
    assert!(out.status.success(), "{}", describe(&out));
    for kind in ["memory", "file", "git"] {
        assert!(
            shown.contains(&format!(
                "compiling the built-in {kind} plugin for this machine (once: kept in "
            )),
            "no compile notice for {kind}:\n{shown}"
        );
    }
    assert!(shown.contains("KIND"), "the listing follows:\n{shown}");

    let (out, shown) = on_a_terminal_with(&d, "backends", &cache);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!shown.contains("compiling"), "compiled again:\n{shown}");

    // One plugin's compiled form gone: piped, it is compiled without a word.
    let memory = compiled_builtin(&d, &cache, "memory").expect("memory was compiled");
    std::fs::remove_file(&memory).unwrap();
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("TETHER_CACHE_DIR", &cache)
        .args(["backends"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!stderr(&out).contains("compiling"), "{}", describe(&out));
    assert!(memory.is_file(), "memory was not compiled again");

    // -vv: tether's decisions (the compile among them), no library internals.
    std::fs::remove_file(&memory).unwrap();
    let out = d
        .command(env!("CARGO_BIN_EXE_tether"), &d.root())
        .env("TETHER_CACHE_DIR", &cache)
        .args(["-vv", "backends"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let log = stderr(&out);
    assert!(
        log.lines()
            .any(|l| l.contains("compiling plugin") && l.contains("built-in memory")),
        "{log}"
    );
    assert!(
        log.contains("DEBUG tether::"),
        "no debug line of tether's:\n{log}"
    );
    let levels = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
    for line in log.lines() {
        let mut words = line.split_whitespace();
        if words.next().is_some_and(|w| levels.contains(&w))
            && let Some(target) = words.next()
        {
            assert!(
                target.starts_with("tether"),
                "a library's line at -vv: {line}\n{log}"
            );
        }
    }
}

/// `status --snapshot` of 1,000 objects (seconds in a test build): one line
/// counting the stores asked, on a terminal only.
#[test]
fn a_snapshot_of_many_objects_counts_them_on_one_line() {
    let d = Dataset::init();
    crate::scale::many(&d, 1000);
    // Shown at once: whether 1,000 objects take the usual half second to
    // ask depends on the machine, and a fast one showed nothing.
    let (out, shown) = on_a_terminal_with_env(
        &d,
        "status --snapshot",
        &tether_testkit::cache_dir(),
        &[("TETHER_PROGRESS_AFTER_MS", "0")],
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        shown.contains("asking the stores") && shown.contains("/1000"),
        "no progress line on the terminal:\n{shown}"
    );
    assert!(shown.contains("o00999 [memory/"), "{shown}");

    let out = d.tether(&["status", "--snapshot"]);
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("asking"), "a line on a pipe:\n{stderr}");
}
