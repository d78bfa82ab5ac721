//! One worked example (or a few) per command, shown at the end of its
//! `--help`. Kept in one table so a test can check that every command has
//! one and that each example still parses.

/// `(command path, examples)`: the path as clap names it (`plugin add`),
/// the examples one per line, each a full `tether ...` line with a comment.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "init",
        "tether init                      # this git or jj repository becomes a dataset",
    ),
    (
        "backends",
        "tether backends --json           # kinds, tiers and capabilities",
    ),
    (
        "add",
        "tether add data/plates --kind file                       # key derived from the path\n\
         tether add db --kind neon --project-id p1 --database app  # a Neon database",
    ),
    (
        "set",
        "tether set data/ --file versioned  # every object under data/",
    ),
    (
        "remove",
        "tether remove db                   # the manifest goes; the store is untouched",
    ),
    (
        "status",
        "tether status                      # every object against its manifest\n\
         tether status --snapshot db        # fingerprint db now",
    ),
    (
        "snapshot",
        "tether snapshot zarr/             # cache the states of everything under zarr/",
    ),
    (
        "pull",
        "tether pull -m \"nightly load\"      # commit the upstream heads onto this bookmark",
    ),
    (
        "commit",
        "tether commit -m \"first rows\"       # pin every mutable object and commit\n\
         tether commit db -m \"db only\"       # only db's manifest",
    ),
    (
        "new",
        "tether new -b sweep                # a new bookmark, branches forked lazily\n\
         tether new main                    # back to the trunk",
    ),
    (
        "open",
        "tether open db --writable         # the working branch's address, on stdout",
    ),
    (
        "restore",
        "tether restore db --from HEAD~1   # db's working branch back to a commit's pin",
    ),
    (
        "promote",
        "tether promote --dry-run          # what landing this bookmark on the trunk would do",
    ),
    (
        "verify",
        "tether verify --all-history       # every pin history names still resolves",
    ),
    (
        "diff",
        "tether diff main sweep            # objects that differ between two revisions",
    ),
    (
        "log",
        "tether log db -n 5                # db's native history, newest first",
    ),
    (
        "gc",
        "tether gc                         # a dry run: what would be released\ntether gc --no-dry-run            # release it",
    ),
    (
        "abandon",
        "tether abandon HEAD --gc          # drop a commit, then collect what only it pinned",
    ),
    (
        "drop",
        "tether drop sweep --no-dry-run    # throw the sweep bookmark away",
    ),
    (
        "forget-workspace",
        "tether forget-workspace ../wt2    # retire another checkout",
    ),
    (
        "ops",
        "tether ops -n 5                   # the newest operations, ids as short prefixes",
    ),
    (
        "undo",
        "tether undo                       # reverse the newest operation\ntether undo 3f1c                  # reverse one by its id prefix",
    ),
    (
        "repair",
        "tether repair --dry-run           # what would be rebuilt",
    ),
    (
        "recover",
        "tether recover                    # what the stores hold of a lost dataset",
    ),
    (
        "export",
        "tether export tether.sqlite                        # every reachable commit\n\
         tether export dump/ --format parquet --listings    # one file per table + schema.json",
    ),
    (
        "publish",
        "tether publish --dry-run          # per-table row counts, nothing written",
    ),
    (
        "import",
        "tether import registry.csv --dry-run                 # the add/update plan\n\
         tether import snap.sqlite --sync --query \"SELECT key, kind, locator_json FROM objects_head\"",
    ),
    (
        "completion",
        "tether completion bash > ~/.local/share/bash-completion/completions/tether",
    ),
    (
        "man",
        "tether man --out ~/.local/share/man/man1   # then `man tether-status`",
    ),
    (
        "plugin add",
        "tether plugin add ./my_kind.wasm --kind mykind",
    ),
    (
        "plugin dev",
        "tether plugin dev ../my-kv/target/wasm32-wasip2/release/tether_plugin_my_kv.wasm   # run each rebuild\n\
         tether plugin dev --off my-kv   # back to the pinned plugin",
    ),
    (
        "plugin trust",
        "tether plugin trust sha256:<64 hex>   # let this checkout run it",
    ),
    ("plugin untrust", "tether plugin untrust sha256:<64 hex>"),
    (
        "plugin pin",
        "tether plugin pin --vendor        # pin every kind in use, components stored",
    ),
    (
        "plugin update",
        "tether plugin update --dry-run   # which pins this tether's built-ins would move\n\
         tether plugin update memory",
    ),
    (
        "plugin call",
        "tether plugin call memory describe\n\
         tether plugin call memory fingerprint --key m   # on object m, with its locator",
    ),
    ("plugin list", "tether plugin list --json"),
    (
        "plugin verify",
        "tether plugin verify              # every pin resolves, is trusted and loads",
    ),
    ("plugin remove", "tether plugin remove mykind"),
];

/// `cmd` with each command's examples as the end of its `--help`.
pub fn attach(mut cmd: clap::Command) -> clap::Command {
    for (path, text) in EXAMPLES {
        let names: Vec<&str> = path.split(' ').collect();
        cmd = attach_at(cmd, &names, text);
    }
    cmd
}

fn attach_at(cmd: clap::Command, names: &[&str], text: &'static str) -> clap::Command {
    match names {
        [] => cmd.after_help(format!("Examples:\n  {}", text.replace('\n', "\n  "))),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |sub| attach_at(sub, rest, text)),
    }
}
