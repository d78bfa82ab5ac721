//! A std-only stand-in for the read side of `filetime` 0.2, written for
//! tether's git plugin (`plugins/git`), which runs gix as a wasm32-wasip2
//! component: the real crate's backend for wasm targets panics (it has no
//! implementation there) when asked for a file's times, and gix-index asks for
//! the index file's mtime every time it opens `.git/index`
//! (research/formats.md §3.3).
//!
//! Times come from `std::fs::Metadata::{modified, accessed, created}`, which
//! WASI does provide. Setting times is not offered: nothing in the plugin
//! sets them, and a dependency that tried would fail to build rather than
//! silently do nothing.

use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time as seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileTime {
    seconds: i64,
    nanos: u32,
}

impl FileTime {
    /// The Unix epoch.
    pub const fn zero() -> FileTime {
        FileTime {
            seconds: 0,
            nanos: 0,
        }
    }

    /// The current time.
    pub fn now() -> FileTime {
        FileTime::from_system_time(SystemTime::now())
    }

    /// `seconds` and `nanos` since the Unix epoch (`nanos` below 10⁹).
    pub const fn from_unix_time(seconds: i64, nanos: u32) -> FileTime {
        FileTime { seconds, nanos }
    }

    pub fn from_system_time(time: SystemTime) -> FileTime {
        match time.duration_since(UNIX_EPOCH) {
            Ok(d) => FileTime {
                seconds: d.as_secs() as i64,
                nanos: d.subsec_nanos(),
            },
            Err(e) => {
                // Before the epoch: round towards negative infinity.
                let d = e.duration();
                let (mut seconds, mut nanos) = (-(d.as_secs() as i64), d.subsec_nanos());
                if nanos > 0 {
                    seconds -= 1;
                    nanos = 1_000_000_000 - nanos;
                }
                FileTime { seconds, nanos }
            }
        }
    }

    /// The last modification time in `meta` (the epoch when the platform
    /// does not say).
    pub fn from_last_modification_time(meta: &fs::Metadata) -> FileTime {
        meta.modified()
            .map(FileTime::from_system_time)
            .unwrap_or_default()
    }

    /// The last access time in `meta` (the epoch when the platform does not say).
    pub fn from_last_access_time(meta: &fs::Metadata) -> FileTime {
        meta.accessed()
            .map(FileTime::from_system_time)
            .unwrap_or_default()
    }

    /// The creation time in `meta`, when the platform records one.
    pub fn from_creation_time(meta: &fs::Metadata) -> Option<FileTime> {
        meta.created().ok().map(FileTime::from_system_time)
    }

    /// Whole seconds since the Unix epoch.
    pub const fn unix_seconds(&self) -> i64 {
        self.seconds
    }

    /// The same as [`FileTime::unix_seconds`]: there is no other epoch here.
    pub const fn seconds(&self) -> i64 {
        self.seconds
    }

    /// The sub-second part, in nanoseconds.
    pub const fn nanoseconds(&self) -> u32 {
        self.nanos
    }
}

impl From<SystemTime> for FileTime {
    fn from(time: SystemTime) -> FileTime {
        FileTime::from_system_time(time)
    }
}

impl std::fmt::Display for FileTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:09}s", self.seconds, self.nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn converts_system_times_on_both_sides_of_the_epoch() {
        let after = UNIX_EPOCH + Duration::new(5, 7);
        assert_eq!(FileTime::from(after), FileTime::from_unix_time(5, 7));
        let before = UNIX_EPOCH - Duration::new(1, 250_000_000);
        assert_eq!(
            FileTime::from(before),
            FileTime::from_unix_time(-2, 750_000_000)
        );
        assert!(FileTime::now() > FileTime::zero());
    }

    #[test]
    fn reads_a_files_mtime() {
        let meta = fs::metadata(std::env::temp_dir()).unwrap();
        let t = FileTime::from_last_modification_time(&meta);
        assert_eq!(t, FileTime::from_system_time(meta.modified().unwrap()));
    }
}
