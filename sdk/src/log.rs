//! Log lines to the host's `tracing` output (`tether -v`, `RUST_LOG`).
//!
//! Plain functions take a message; the crate-root macros ([`crate::info!`],
//! [`crate::debug!`], ...) take `format!` arguments.

use crate::bindings::tether::backend::log as wit;

pub use wit::Level;

/// Send one line at `level`.
pub fn log(level: Level, message: &str) {
    wit::log(level, message);
}

/// Send one `trace` line.
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Send one `debug` line.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Send one `info` line.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Send one `warn` line.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Send one `error` line.
pub fn error(message: &str) {
    log(Level::Error, message);
}

/// `trace!("fmt", args..)`: a trace line to the host.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => { $crate::log::trace(&::std::format!($($arg)*)) };
}

/// `debug!("fmt", args..)`: a debug line to the host.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::debug(&::std::format!($($arg)*)) };
}

/// `info!("fmt", args..)`: an info line to the host.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::info(&::std::format!($($arg)*)) };
}

/// `warn!("fmt", args..)`: a warning line to the host.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::warn(&::std::format!($($arg)*)) };
}

/// `error!("fmt", args..)`: an error line to the host.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log::error(&::std::format!($($arg)*)) };
}
