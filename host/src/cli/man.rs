//! `tether man --out DIR`: the manual pages (`tether.1`, `tether-status.1`,
//! `tether-plugin-add.1`, ...), rendered by clap_mangen from clap's own
//! definition of the command line, so they cannot drift from `--help`.
//! Hidden from `--help`: it is for installers and packagers (`cargo xtask
//! docs` writes them to `target/man/`).

use std::path::PathBuf;

use anyhow::{Context as _, Result};

use super::output::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The directory to write the pages into (created when missing), e.g.
    /// `~/.local/share/man/man1`.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(args: Args) -> Result<Exit> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    clap_mangen::generate_to(super::command(), &args.out)
        .with_context(|| format!("cannot write the manual pages into {}", args.out.display()))?;
    outln!("wrote the manual pages into {}", args.out.display());
    Ok(Exit::Ok)
}
