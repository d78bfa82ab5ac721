//! The engine: what each command decides, one module per operation. The CLI
//! calls in here and prints what comes back; nothing here prints.

pub mod backends;
