//! What a person at a terminal sees while tether waits on work of its own:
//! a bar while files are read for their hashes (the first snapshot of a
//! large directory reads every byte, which can take minutes), one bar per
//! directory being read, shown once the reading has gone on for
//! [`SHOW_AFTER`] (or `TETHER_PROGRESS_AFTER_MS`), cleared when it is done;
//! one line counting the calls of a large fan-out (`status --snapshot` of
//! 10,000 objects), the same way; and a line per plugin compiled on first use
//! (seconds each, on a fresh machine or after an upgrade). Only when stderr
//! is a terminal, and not with `-v` (log lines would tear the bar, and say
//! the same at info level).

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::plugin::tree::progress::{HashTask, HashWatcher, watch_hashing};
use crate::plugin::{FanOutTask, FanOutWatcher, watch_fan_outs};

/// Reads shorter than this show nothing: most are. `TETHER_PROGRESS_AFTER_MS`
/// sets another wait (0: show every bar at once).
const SHOW_AFTER: Duration = Duration::from_millis(500);

/// [`SHOW_AFTER`], or `TETHER_PROGRESS_AFTER_MS` when set to a number.
fn show_after() -> Duration {
    static AFTER: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *AFTER.get_or_init(|| {
        std::env::var("TETHER_PROGRESS_AFTER_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(SHOW_AFTER, Duration::from_millis)
    })
}

/// Show hashing progress and plugin compiles on stderr, when it is a
/// terminal and `verbose` is 0.
pub fn install(verbose: u8) {
    if verbose > 0 || !std::io::stderr().is_terminal() {
        return;
    }
    crate::plugin::on_compile(|plugin, cache| {
        eprintln!(
            "compiling the {plugin} plugin for this machine (once: kept in {})",
            cache.display()
        );
    });
    let bars = Arc::new(Bars {
        multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
    });
    watch_hashing(bars.clone());
    watch_fan_outs(bars);
}

/// The bars of one command.
struct Bars {
    multi: MultiProgress,
}

impl HashWatcher for Bars {
    fn start(&self, what: &str, files: u64, bytes: u64) -> Box<dyn HashTask> {
        let bar = ProgressBar::with_draw_target(Some(bytes), ProgressDrawTarget::hidden());
        // One line, however narrow the terminal: the message (a path, maybe
        // long) takes what the counts leave, and is cut to fit.
        if let Ok(style) = ProgressStyle::with_template(
            "{wide_msg} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
        ) {
            bar.set_style(style);
        }
        let noun = if files == 1 { "file" } else { "files" };
        bar.set_message(format!("hashing {files} {noun} in {what}"));
        Box::new(Bar {
            multi: self.multi.clone(),
            bar,
            started: Instant::now(),
            shown: AtomicBool::new(false),
        })
    }
}

impl FanOutWatcher for Bars {
    fn start(&self, total: usize) -> Box<dyn FanOutTask> {
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{wide_msg} {pos}/{len} eta {eta}") {
            bar.set_style(style);
        }
        bar.set_message("asking the stores");
        Box::new(Bar {
            multi: self.multi.clone(),
            bar,
            started: Instant::now(),
            shown: AtomicBool::new(false),
        })
    }
}

impl FanOutTask for Bar {
    fn advance(&self) {
        HashTask::advance(self, 1);
    }
}

/// One directory's bar (or one fan-out's line): hidden until the work has
/// gone on for a while.
struct Bar {
    multi: MultiProgress,
    bar: ProgressBar,
    started: Instant,
    shown: AtomicBool,
}

impl HashTask for Bar {
    fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
        if !self.shown.load(Ordering::Relaxed)
            && self.started.elapsed() >= show_after()
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            self.multi.add(self.bar.clone());
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        if *self.shown.get_mut() {
            self.bar.finish_and_clear();
            self.multi.remove(&self.bar);
        }
    }
}
