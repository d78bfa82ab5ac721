//! The command line: parse, call the engine, print. One file per command;
//! `output` holds what every command shares (JSON vs text, errors, exit codes).

mod backends;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use output::Exit;

/// Version control for datasets that span several storage systems.
#[derive(Debug, Parser)]
#[command(name = "tether", version, about, propagate_version = true)]
struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List backend kinds with their maturity, tier, and capabilities.
    Backends(backends::Args),
}

/// Parse the command line, run the command, and turn its outcome into the
/// spec's exit code (0 ok, 1 error, 2 usage, 3 partial).
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return output::fail(&anyhow::anyhow!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Backends(args) => backends::run(args).await,
        }
    });
    match result {
        Ok(exit) => exit.into(),
        Err(e) => output::fail(&e),
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .try_init();
}
