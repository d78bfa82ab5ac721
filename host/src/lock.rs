//! The checkout lock and the repository lock (spec 14, "One writer per
//! checkout, one per repository").
//!
//! - `.tether/lock` serialises writers in one checkout: every writing command
//!   takes it, so two commands never interleave their `workspace.toml`,
//!   manifest and journal writes.
//! - `tether.lock` in the VCS's shared directory (`.git/` or `.jj/repo/`) is
//!   shared by every checkout of the repository. `commit`, `pull`, `new`,
//!   `restore`, `gc`, `drop`, `abandon`, `undo`, `repair` and a writable
//!   `open`'s lazy fork take it too, so a `gc` here cannot race a commit in
//!   another workspace, and two checkouts cannot both find a branch absent and
//!   fork over each other. It also guards the indexes beside it.
//!
//! Both are exclusive advisory file locks (`flock` through `fs4`). A flock
//! belongs to the open file description, so two threads of one process that
//! each open the file contend exactly like two processes ("threads sharing one
//! `Repo` take turns the same way"). A command that finds the lock held polls,
//! backing off, up to a timeout (30 s checkout, 60 s repository;
//! `TETHER_LOCK_TIMEOUT` seconds overrides both), then fails with
//! [`LockError::Timeout`] naming the lock file.
//!
//! **Lock order: checkout, then repository.** A command that needs both takes
//! the checkout lock first and releases in reverse ([`lock_both`] does exactly
//! that). Every command following one order is what rules out two commands
//! each holding one lock and waiting for the other. Locks are not re-entrant:
//! pass the guard down rather than locking again in a callee, which would wait
//! on itself until the timeout.
//!
//! Separate clones share no lock: their shared directories differ.
//!
//! **What the checkout lock guards**: `workspace.toml`, `ops.jsonl` and the
//! manifests. A command holding the locks reads `workspace.toml` after taking
//! them and writes it with `Repo::save_workspace`, which asks for the guard;
//! a command that does not (a snapshot caching its fingerprints, a plan
//! giving the checkout its id) goes through `Repo::update_workspace`, which
//! takes the checkout lock, re-reads the file and changes only its own
//! fields. The memos under `.tether/cache/` need no lock: each is replaced
//! whole, atomically, and checked against its key on every read.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The checkout lock's file name, under `.tether/`.
pub const CHECKOUT_LOCK: &str = "lock";
/// The repository lock's file name, in the VCS's shared directory.
pub const REPOSITORY_LOCK: &str = "tether.lock";
/// How long a command waits for the checkout lock.
pub const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a command waits for the repository lock.
pub const REPOSITORY_TIMEOUT: Duration = Duration::from_secs(60);
/// Seconds (a decimal is allowed) that replace both timeouts; for tests.
pub const TIMEOUT_ENV: &str = "TETHER_LOCK_TIMEOUT";

/// Which of the two locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Checkout,
    Repository,
}

impl LockKind {
    /// The default wait, before `TETHER_LOCK_TIMEOUT`.
    pub fn default_timeout(self) -> Duration {
        match self {
            LockKind::Checkout => CHECKOUT_TIMEOUT,
            LockKind::Repository => REPOSITORY_TIMEOUT,
        }
    }

    /// The wait in effect: `TETHER_LOCK_TIMEOUT` when set and valid.
    pub fn timeout(self) -> Duration {
        timeout_from(
            self.default_timeout(),
            std::env::var(TIMEOUT_ENV).ok().as_deref(),
        )
    }

    fn place(self) -> &'static str {
        match self {
            LockKind::Checkout => "this checkout",
            LockKind::Repository => "this repository (perhaps in another checkout of it)",
        }
    }

    fn name(self) -> &'static str {
        match self {
            LockKind::Checkout => "checkout lock",
            LockKind::Repository => "repository lock",
        }
    }
}

/// `default`, or the seconds `env` gives. An unreadable value is ignored
/// rather than fatal: a lock wait is no reason to refuse a command.
pub fn timeout_from(default: Duration, env: Option<&str>) -> Duration {
    env.and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(default)
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another tether held the lock for the whole wait.
    #[error(
        "another tether is running in {place}{holder}: gave up after {waited:?} waiting for the \
         {name} {path}. Let it finish, then run the command again",
        place = kind.place(),
        name = kind.name(),
        path = path.display(),
        holder = holder.map(|p| format!(" (process {p})")).unwrap_or_default(),
    )]
    Timeout {
        kind: LockKind,
        path: PathBuf,
        waited: Duration,
        /// The pid the holder wrote into the lock file, when readable.
        holder: Option<u32>,
    },

    /// The lock file could not be opened or locked.
    #[error("cannot take the {name} {path}: {source}", name = kind.name(), path = path.display())]
    Io {
        kind: LockKind,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A held lock, released when dropped (closing the file releases the flock
/// even if the explicit unlock is skipped, as when the process dies).
#[derive(Debug)]
pub struct LockGuard {
    file: File,
    path: PathBuf,
    kind: LockKind,
}

impl LockGuard {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn kind(&self) -> LockKind {
        self.kind
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Err(e) = fs4::FileExt::unlock(&self.file) {
            tracing::warn!("releasing {}: {e}", self.path.display());
        }
    }
}

/// Both locks, in the documented order. Fields drop in declaration order, so
/// the repository lock is released before the checkout lock.
#[derive(Debug)]
pub struct Locks {
    pub repository: LockGuard,
    pub checkout: LockGuard,
}

/// Take the checkout lock `.tether/lock` (`tether_dir` is the `.tether`
/// directory), waiting up to the checkout timeout.
pub fn lock_checkout(tether_dir: &Path) -> Result<LockGuard, LockError> {
    let kind = LockKind::Checkout;
    acquire(&tether_dir.join(CHECKOUT_LOCK), kind, kind.timeout())
}

/// Take the repository lock `tether.lock` in `shared_dir` (the VCS's shared
/// directory), waiting up to the repository timeout. Take the checkout lock
/// first when a command needs both.
pub fn lock_repository(shared_dir: &Path) -> Result<LockGuard, LockError> {
    let kind = LockKind::Repository;
    acquire(&shared_dir.join(REPOSITORY_LOCK), kind, kind.timeout())
}

/// Take both locks: the checkout's, then the repository's.
pub fn lock_both(tether_dir: &Path, shared_dir: &Path) -> Result<Locks, LockError> {
    let checkout = lock_checkout(tether_dir)?;
    let repository = lock_repository(shared_dir)?;
    Ok(Locks {
        repository,
        checkout,
    })
}

/// Take the lock at `path`, polling with backoff (10 ms doubling to 250 ms) for
/// up to `timeout`. The file is created if missing (never through a symbolic
/// link, and only a regular file is used) and never truncated before the lock
/// is held; once held, this process's pid is written into it so a
/// waiter's message can name the holder.
pub fn acquire(path: &Path, kind: LockKind, timeout: Duration) -> Result<LockGuard, LockError> {
    let io = |source: std::io::Error| LockError::Io {
        kind,
        path: path.to_path_buf(),
        source,
    };
    // Never through a link: `.tether/` came with the clone, and a committed
    // `lock` pointing at any file would otherwise be truncated below.
    let file = crate::model::fsutil::nofollow(
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )
    .open(path)
    .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => break,
            Err(fs4::TryLockError::WouldBlock) => {}
            Err(fs4::TryLockError::Error(e)) => return Err(io(e)),
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(LockError::Timeout {
                kind,
                path: path.to_path_buf(),
                waited: timeout,
                holder: read_holder(&file),
            });
        }
        if pause == Duration::from_millis(10) {
            // Once, on the first wait: a silent pause looks like a hang.
            let holder = read_holder_info(&file);
            let notice = wait_notice(kind, path, holder.as_ref());
            tracing::info!("{notice}");
            if let Some(tell) = WAIT_NOTICE.get() {
                tell(&notice);
            }
        }
        std::thread::sleep(pause.min(timeout - waited));
        pause = (pause * 2).min(Duration::from_millis(250));
    }
    // Best effort: the pid and command line are only for messages. The pid
    // is written over the old one at a fixed width, so a waiter reading
    // meanwhile finds one pid or the other, never an empty file or a mix.
    let mut f = &file;
    let mut line: String = std::env::args()
        .enumerate()
        .map(|(i, a)| match i {
            // The program by its name, not the path it was started by.
            0 => Path::new(&a)
                .file_name()
                .map_or(a.clone(), |n| n.to_string_lossy().into_owned()),
            _ => a,
        })
        .collect::<Vec<_>>()
        .join(" ");
    truncate_chars(&mut line, HOLDER_COMMAND_MAX);
    let text = format!("{:<10}\n{}\n", std::process::id(), line.replace('\n', " "));
    let _ = f
        .seek(SeekFrom::Start(0))
        .and_then(|_| f.write_all(text.as_bytes()))
        .and_then(|_| f.set_len(text.len() as u64));
    Ok(LockGuard {
        file,
        path: path.to_path_buf(),
        kind,
    })
}

/// The most of the holder's command line the lock file keeps.
const HOLDER_COMMAND_MAX: usize = 200;

fn truncate_chars(s: &mut String, max: usize) {
    if let Some((at, _)) = s.char_indices().nth(max) {
        s.truncate(at);
        s.push('…');
    }
}

/// Who holds a lock, as its file says: `PID\nCOMMAND LINE\n` (older
/// versions wrote the pid only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// The holder's command line, when it wrote one; escaped for a terminal
    /// (the file sits in the clone-controlled `.tether/`).
    pub command: Option<String>,
}

fn read_holder_info(file: &File) -> Option<Holder> {
    let mut f = file;
    let mut bytes = Vec::new();
    f.seek(SeekFrom::Start(0)).ok()?;
    // Bounded: the pid line, and the command line the holder kept short.
    f.take(HOLDER_COMMAND_MAX as u64 * 4 + 64)
        .read_to_end(&mut bytes)
        .ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    let pid = lines.next()?.trim().parse().ok()?;
    let command = lines
        .next()
        .map(|c| c.chars().flat_map(char::escape_debug).collect::<String>())
        .map(|mut c| {
            truncate_chars(&mut c, HOLDER_COMMAND_MAX);
            c
        })
        .filter(|c| !c.trim().is_empty());
    Some(Holder { pid, command })
}

fn read_holder(file: &File) -> Option<u32> {
    read_holder_info(file).map(|h| h.pid)
}

/// What a command says when it starts waiting for a lock, like cargo's
/// "Blocking waiting for file lock": the lock, and who holds it when the
/// file says.
pub fn wait_notice(kind: LockKind, path: &Path, holder: Option<&Holder>) -> String {
    let who = match holder {
        Some(Holder {
            pid,
            command: Some(command),
        }) => format!(", held by process {pid} (`{command}`)"),
        Some(Holder { pid, command: None }) => format!(", held by process {pid}"),
        None => String::new(),
    };
    format!(
        "Blocking waiting for the {} {}{who}",
        kind.name(),
        path.display()
    )
}

/// Where [`wait_notice`]s go besides the log: the CLI sends them to stderr
/// ([`on_wait`]); a library user hears nothing unless it asks.
static WAIT_NOTICE: std::sync::OnceLock<fn(&str)> = std::sync::OnceLock::new();

/// Have `tell` called with the notice each time a lock wait begins (once per
/// process; later calls are ignored).
pub fn on_wait(tell: fn(&str)) {
    let _ = WAIT_NOTICE.set(tell);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::mpsc;

    const SHORT: Duration = Duration::from_millis(200);
    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn timeout_override_is_read_from_the_environment_value() {
        let d = Duration::from_secs(30);
        assert_eq!(timeout_from(d, None), d);
        assert_eq!(timeout_from(d, Some("2")), Duration::from_secs(2));
        assert_eq!(timeout_from(d, Some("0.5")), Duration::from_millis(500));
        assert_eq!(timeout_from(d, Some("soon")), d);
        assert_eq!(timeout_from(d, Some("-1")), d);
        assert_eq!(
            LockKind::Checkout.default_timeout(),
            Duration::from_secs(30)
        );
        assert_eq!(
            LockKind::Repository.default_timeout(),
            Duration::from_secs(60)
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_lock_file_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(CHECKOUT_LOCK)).unwrap();
        let err = lock_checkout(dir.path()).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err}");
        assert!(err.to_string().contains("checkout lock"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        // A dangling link is not created through either.
        std::fs::remove_file(dir.path().join(CHECKOUT_LOCK)).unwrap();
        std::os::unix::fs::symlink(dir.path().join("made"), dir.path().join(CHECKOUT_LOCK))
            .unwrap();
        assert!(lock_checkout(dir.path()).is_err());
        assert!(!dir.path().join("made").exists());
    }

    #[test]
    fn a_free_lock_is_taken_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let guard = lock_checkout(dir.path()).unwrap();
        assert_eq!(guard.path(), dir.path().join("lock"));
        drop(guard);
        let again = acquire(&dir.path().join("lock"), LockKind::Checkout, SHORT).unwrap();
        drop(again);
        let both = lock_both(dir.path(), dir.path()).unwrap();
        assert_eq!(both.repository.path(), dir.path().join("tether.lock"));
    }

    #[test]
    fn two_threads_contend_and_the_timeout_names_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(REPOSITORY_LOCK);
        let (held_tx, held_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let p = path.clone();
        let holder = std::thread::spawn(move || {
            let guard = acquire(&p, LockKind::Repository, LONG).unwrap();
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            drop(guard);
        });
        held_rx.recv().unwrap();

        let err = acquire(&path, LockKind::Repository, SHORT).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LockError::Timeout { .. }), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains("another tether is running"), "{msg}");
        assert!(msg.contains("repository lock"), "{msg}");
        assert!(
            msg.contains(&format!("(process {})", std::process::id())),
            "{msg}"
        );

        // A waiter with a generous timeout gets it once the holder lets go.
        let p = path.clone();
        let waiter = std::thread::spawn(move || acquire(&p, LockKind::Repository, LONG).is_ok());
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        assert!(waiter.join().unwrap());
    }

    const CHILD_ENV: &str = "TETHER_LOCK_TEST_CHILD_DIR";

    /// Not a test of its own: the body of the child process the two-process
    /// test starts (re-executing this test binary). Without the variable it
    /// does nothing.
    #[test]
    fn child_process_holds_the_checkout_lock() {
        let Some(dir) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let dir = PathBuf::from(dir);
        let _guard = acquire(&dir.join(CHECKOUT_LOCK), LockKind::Checkout, LONG).unwrap();
        std::fs::write(dir.join("held"), b"").unwrap();
        let start = Instant::now();
        while !dir.join("release").exists() && start.elapsed() < LONG {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn two_processes_contend() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "lock::tests::child_process_holds_the_checkout_lock",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while !dir.path().join("held").exists() {
            assert!(start.elapsed() < LONG, "the child never took the lock");
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the child exited early: {status}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }

        let path = dir.path().join(CHECKOUT_LOCK);
        let err = acquire(&path, LockKind::Checkout, SHORT).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("another tether is running in this checkout"),
            "{msg}"
        );
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(msg.contains(&format!("(process {})", child.id())), "{msg}");
        // The file names the holder's command line too, for the wait notice.
        let file = File::open(&path).unwrap();
        let holder = read_holder_info(&file).unwrap();
        assert_eq!(holder.pid, child.id());
        let command = holder.command.unwrap();
        assert!(
            command.contains("child_process_holds_the_checkout_lock"),
            "{command}"
        );
        let notice = wait_notice(
            LockKind::Checkout,
            &path,
            Some(&Holder {
                pid: 7,
                command: Some("tether commit".into()),
            }),
        );
        assert_eq!(
            notice,
            format!(
                "Blocking waiting for the checkout lock {}, held by process 7 (`tether commit`)",
                path.display()
            )
        );

        std::fs::write(dir.path().join("release"), b"").unwrap();
        let _guard = acquire(&path, LockKind::Checkout, LONG).unwrap();
        assert!(child.wait().unwrap().success());
    }
}
