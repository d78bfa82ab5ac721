//! `tether completion SHELL`: the shell's completion script, from clap's own
//! definition of the command line (so it cannot drift from it).

use anyhow::Result;

use super::output::Exit;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

pub fn run(args: Args) -> Result<Exit> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut super::command(), "tether", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    Ok(Exit::Ok)
}
