//! Crash injection for the crash suite (`host/tests/crash.rs`): a named point
//! at each side effect, where a test build can make the process die.
//!
//! [`point`] marks the moment right after one side effect has landed and
//! before anything that follows it. In a normal build it is an empty inline
//! function: the hook exists only with the `fault-injection` feature *and*
//! debug assertions. The package's dev-dependency on itself turns the feature
//! on for `cargo test` and `cargo clippy --all-targets`; `cargo build
//! --release` leaves it off, and `cargo bench` (whose release profile also
//! builds dev-dependencies) has no debug assertions, so neither binary holds
//! it.
//!
//! With the hook compiled in, two environment variables drive it:
//!
//! - `TETHER_FAULT=NAME` or `NAME#N`: at the first (or `N`th) time the process
//!   reaches point `NAME`, it sends itself SIGKILL: no unwinding, no
//!   destructors, no buffered output flushed, exactly what `kill -9` leaves.
//! - `TETHER_FAULT_TRACE=FILE`: append each point's name to `FILE` as it is
//!   reached, one per line (how the suite learns which points a command
//!   reaches, and how often, before killing it at each).
//!
//! ## Points
//!
//! Every name passed to [`point`] is listed here; the crash suite reads this
//! list and requires each point to be reached (and survived) by one of its
//! scenarios, so a new side effect comes with a test.
//!
//! - `journal.started`: an operation's `started` record is on disk, before its first effect.
//! - `journal.progress`: one `progress` record (an effect that landed) is on disk.
//! - `journal.done`: an operation's completion mark is on disk.
//! - `store.pin`: a store created (or found) a pin ref.
//! - `store.unpin`: a store deleted a pin ref.
//! - `store.fork`: a store created or reset a working ref.
//! - `store.move`: a store moved a branch by promote or merge.
//! - `store.delete-ref`: a store deleted a working ref.
//! - `store.delete-store`: a store tether created was deleted.
//! - `index.add`: records were appended to a repository index (pinned, created, touched).
//! - `index.remove`: removal marks were appended to a repository index.
//! - `manifest.write`: an object's manifest was written (or removed) in the working tree.
//! - `listing.write`: a listing file was written under `.tether/listings/`.
//! - `listing.delete`: a listing file was deleted.
//! - `workspace.write`: `.tether/workspace.toml` was written.
//! - `vcs.commit`: a dataset commit was made (and its bookmark moved).
//! - `vcs.bookmark`: a bookmark (git branch) was created, moved or deleted.
//! - `vcs.switch`: the working copy moved to another bookmark or commit.
//! - `vcs.reset`: the working copy's bookmark was reset to an earlier commit, its files kept.

/// The side effect named `name` has just landed. Dies here when a test build
/// was asked to (see the module docs); otherwise does nothing.
#[inline(always)]
pub fn point(name: &'static str) {
    #[cfg(all(feature = "fault-injection", debug_assertions))]
    armed::reached(name);
    #[cfg(not(all(feature = "fault-injection", debug_assertions)))]
    let _ = name;
}

/// [`point`] when `result` is `Ok` (the effect landed); `result` unchanged.
#[inline(always)]
pub fn on_ok<T, E>(name: &'static str, result: Result<T, E>) -> Result<T, E> {
    if result.is_ok() {
        point(name);
    }
    result
}

#[cfg(all(feature = "fault-injection", debug_assertions))]
mod armed {
    use std::io::Write;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The point to die at and at which of its hits (1-based).
    struct Fault {
        name: String,
        nth: u64,
    }

    fn fault() -> &'static Option<Fault> {
        static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
        FAULT.get_or_init(|| {
            let spec = std::env::var("TETHER_FAULT").ok()?;
            let (name, nth) = match spec.split_once('#') {
                Some((name, n)) => (name, n.trim().parse().ok()?),
                None => (spec.as_str(), 1),
            };
            Some(Fault {
                name: name.trim().to_string(),
                nth,
            })
        })
    }

    pub(super) fn reached(name: &'static str) {
        if let Some(path) = std::env::var_os("TETHER_FAULT_TRACE") {
            // A test-only record; a failure to write it shows as a missing point.
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                // One write per line: `writeln!` writes the name and the line
                // feed apart, and a fan-out's threads interleaved them.
                let _ = f.write_all(format!("{name}\n").as_bytes());
            }
        }
        let Some(fault) = fault() else { return };
        if fault.name != name {
            return;
        }
        static HITS: AtomicU64 = AtomicU64::new(0);
        if HITS.fetch_add(1, Ordering::SeqCst) + 1 == fault.nth {
            let _ = rustix::process::kill_process(
                rustix::process::getpid(),
                rustix::process::Signal::KILL,
            );
            // SIGKILL to oneself is delivered before kill returns; never go on.
            loop {
                std::thread::park();
            }
        }
    }
}
