//! Hashing progress: a first snapshot of a large directory reads every byte,
//! and on a terminal `tether` shows a bar on stderr while it does. Nowhere
//! else: not when stderr is a pipe or a file, not with `-v`. The terminal is
//! a real pseudo-terminal, made by `script(1)`. Likewise one line counting
//! the objects a large `status --snapshot` has asked so far.

use std::process::Output;

use crate::support::{Dataset, describe};

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
    let command = format!("{} {args}", env!("CARGO_BIN_EXE_tether"));
    let out = d
        .command("script", &d.root())
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

/// `status --snapshot` of 1,000 objects (seconds in a test build): one line
/// counting the stores asked, on a terminal only.
#[test]
fn a_snapshot_of_many_objects_counts_them_on_one_line() {
    let d = Dataset::init();
    crate::scale::many(&d, 1000);
    let (out, shown) = on_a_terminal(&d, "status --snapshot");
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
