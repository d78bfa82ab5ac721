//! The engine: what each command decides, one module per operation. The CLI
//! calls in here and prints what comes back; nothing here prints.

pub mod abandon;
pub mod add;
pub mod backends;
mod checker;
pub mod checkouts;
pub mod commit;
pub mod diff;
pub mod drop;
pub mod error;
pub mod forget_workspace;
pub mod fork;
pub mod gc;
pub mod history;
pub mod init;
pub mod log;
pub mod new;
pub mod open;
pub mod ops;
pub mod plugin_cmd;
pub mod promote;
pub mod pull;
pub mod recover;
pub mod remove;
pub mod repair;
pub mod repo;
pub mod restore;
pub mod set;
pub mod snapshot;
pub mod status;
pub mod undo;
pub mod verify;

pub use error::{Result, TetherError};
pub use repo::Repo;
