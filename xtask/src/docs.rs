//! `cargo xtask docs`: the documentation's link check.
//!
//! Every relative link and `#anchor` in `README.md` and `docs/**/*.md` must
//! resolve inside the repository (a page that exists, a heading that exists in
//! it), every page under `docs/guide/` must be listed in its `SUMMARY.md`, and
//! every command of `tether --help` (and every backend `tether backends`
//! lists) must have its page in the guide. Each problem is reported by file
//! and line; the task fails if there is any.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use pulldown_cmark::{BrokenLink, CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Where the guide lives, and its pages per command and per backend.
const GUIDE: &str = "docs/guide";
const COMMANDS: &str = "docs/guide/commands";
const BACKENDS: &str = "docs/guide/backends";

/// One Markdown page: its headings' anchors and the links it makes.
#[derive(Debug, Default)]
struct Page {
    anchors: BTreeSet<String>,
    links: Vec<Link>,
    /// Reference-style links (`[text][name]`) whose definition is missing.
    broken_refs: Vec<(usize, String)>,
}

#[derive(Debug)]
struct Link {
    line: usize,
    dest: String,
}

/// What the CLI says exists, for the per-command and per-backend pages.
#[derive(Debug, Default)]
pub struct Cli {
    /// Top-level commands, each with its subcommands (empty for most).
    pub commands: BTreeMap<String, Vec<String>>,
    /// Backend kinds `tether backends` lists.
    pub backends: Vec<String>,
}

/// Run the whole check against the repository at `root`, with the `tether`
/// binary at `tether` telling which commands and backends exist.
pub fn run(root: &Path, tether: &Path) -> Result<()> {
    let cli = read_cli(tether)?;
    let mut problems = check(root, &cli)?;
    let man = root.join("target").join("man");
    problems.extend(man_pages(tether, &man, &cli)?);
    if problems.is_empty() {
        eprintln!(
            "docs: every link resolves; {} commands and {} backends have their pages; \
             manual pages in {}",
            cli.commands.len(),
            cli.backends.len(),
            man.display()
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("{p}");
    }
    bail!("docs: {} problem(s) in the documentation", problems.len())
}

/// Write the manual pages with `tether man --out DIR` (a fresh DIR) and
/// return a problem for each command or subcommand left without a page.
fn man_pages(tether: &Path, dir: &Path, cli: &Cli) -> Result<Vec<String>> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    let out = Command::new(tether)
        .current_dir(std::env::temp_dir())
        .arg("man")
        .arg("--out")
        .arg(dir)
        .output()
        .with_context(|| format!("cannot run {}", tether.display()))?;
    if !out.status.success() {
        bail!(
            "`tether man` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut pages = vec!["tether.1".to_string()];
    for (command, subs) in &cli.commands {
        pages.push(format!("tether-{command}.1"));
        pages.extend(subs.iter().map(|sub| format!("tether-{command}-{sub}.1")));
    }
    Ok(pages
        .into_iter()
        .filter(|page| !dir.join(page).is_file())
        .map(|page| format!("{}: no manual page {page}", dir.display()))
        .collect())
}

/// Ask the built binary for its commands (`tether --help`, then `tether CMD
/// --help` for the ones with subcommands) and its backend kinds.
pub fn read_cli(tether: &Path) -> Result<Cli> {
    let help = |args: &[&str]| -> Result<String> {
        // Outside any dataset, so `backends` lists what the binary has.
        let out = Command::new(tether)
            .current_dir(std::env::temp_dir())
            .args(args)
            .output()
            .with_context(|| format!("cannot run {}", tether.display()))?;
        if !out.status.success() {
            bail!(
                "`tether {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut cli = Cli::default();
    for name in help_commands(&help(&["--help"])?) {
        let subs = help_commands(&help(&[&name, "--help"])?);
        cli.commands.insert(name, subs);
    }
    if cli.commands.is_empty() {
        bail!("`tether --help` lists no commands; has its format changed?");
    }
    let listing = help(&["backends", "--json"])?;
    let json: serde_json::Value =
        serde_json::from_str(&listing).context("`tether backends --json` is not JSON")?;
    let rows = json
        .get("backends")
        .and_then(|b| b.as_array())
        .or_else(|| json.as_array())
        .context("`tether backends --json` has no list of backends")?;
    for row in rows {
        if let Some(kind) = row.get("kind").and_then(|k| k.as_str()) {
            cli.backends.push(kind.to_string());
        }
    }
    Ok(cli)
}

/// The command names of a clap help text's `Commands:` section, less `help`.
fn help_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every problem in the documentation at `root`, one line each, as
/// `path:line: what`. Empty when all is well.
pub fn check(root: &Path, cli: &Cli) -> Result<Vec<String>> {
    let mut files = vec![PathBuf::from("README.md")];
    markdown_files(root, Path::new("docs"), &mut files)?;
    let mut pages = BTreeMap::new();
    for rel in &files {
        let text = std::fs::read_to_string(root.join(rel))
            .with_context(|| format!("reading {}", rel.display()))?;
        pages.insert(rel.clone(), parse(&text));
    }

    let mut problems = Vec::new();
    for (rel, page) in &pages {
        for (line, name) in &page.broken_refs {
            problems.push(format!(
                "{}:{line}: link reference [{name}] has no definition",
                rel.display()
            ));
        }
        for link in &page.links {
            if let Err(why) = resolve(root, rel, &link.dest, &pages) {
                problems.push(format!(
                    "{}:{}: broken link `{}`: {why}",
                    rel.display(),
                    link.line,
                    link.dest
                ));
            }
        }
    }

    // Every guide page is reachable from the table of contents.
    let summary = PathBuf::from(GUIDE).join("SUMMARY.md");
    match pages.get(&summary) {
        None => problems.push(format!("{}: missing", summary.display())),
        Some(toc) => {
            let listed: BTreeSet<PathBuf> = toc
                .links
                .iter()
                .filter_map(|l| target_path(&summary, &l.dest))
                .collect();
            for rel in pages.keys() {
                if rel.starts_with(GUIDE) && *rel != summary && !listed.contains(rel) {
                    problems.push(format!(
                        "{}: not listed in {}",
                        rel.display(),
                        summary.display()
                    ));
                }
            }
        }
    }

    for (name, subs) in &cli.commands {
        let rel = PathBuf::from(COMMANDS).join(format!("{name}.md"));
        let Some(page) = pages.get(&rel) else {
            problems.push(format!(
                "{}: missing: `tether {name}` has no page",
                rel.display()
            ));
            continue;
        };
        for sub in subs {
            let anchor = slug(&format!("tether {name} {sub}"));
            if !page.anchors.contains(&anchor) {
                problems.push(format!(
                    "{}: no heading `tether {name} {sub}` (#{anchor})",
                    rel.display()
                ));
            }
        }
    }
    for kind in &cli.backends {
        let rel = PathBuf::from(BACKENDS).join(format!("{kind}.md"));
        if !pages.contains_key(&rel) {
            problems.push(format!(
                "{}: missing: backend `{kind}` has no page",
                rel.display()
            ));
        }
    }
    Ok(problems)
}

/// Markdown files under `root/dir`, as paths relative to `root`, sorted.
fn markdown_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let rel = dir.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            markdown_files(root, &rel, out)?;
        } else if kind.is_file() && rel.extension().is_some_and(|e| e == "md") {
            out.push(rel);
        }
    }
    Ok(())
}

/// A page's anchors (GitHub's heading slugs, or an explicit `{#id}`) and links.
fn parse(text: &str) -> Page {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let mut broken = Vec::new();
    let mut on_broken = |link: BrokenLink<'_>| {
        // `[x]` alone is ordinary prose as often as a link (`[objects."KEY"]`);
        // `[x][y]` and `[x][]` are always meant as links.
        if link.link_type != LinkType::Shortcut {
            broken.push((link.span.start, link.reference.to_string()));
        }
        None::<(CowStr<'_>, CowStr<'_>)>
    };
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH;
    let parser = Parser::new_with_broken_link_callback(text, options, Some(&mut on_broken));

    let mut page = Page::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    // The heading being read: its explicit id, and its text so far.
    let mut heading: Option<(Option<String>, String)> = None;
    for (event, range) in parser.into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some((id.map(|i| i.to_string()), String::new()));
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((id, title)) = heading.take() {
                    let anchor = id.unwrap_or_else(|| {
                        // GitHub numbers repeated slugs: `x`, `x-1`, `x-2`.
                        let base = slug(&title);
                        let n = seen.entry(base.clone()).or_insert(0);
                        let anchor = if *n == 0 { base } else { format!("{base}-{n}") };
                        *n += 1;
                        anchor
                    });
                    page.anchors.insert(anchor);
                }
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, title)) = heading.as_mut() {
                    title.push_str(&t);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                page.links.push(Link {
                    line: line_of(range.start),
                    dest: dest_url.to_string(),
                });
            }
            _ => {}
        }
    }
    page.broken_refs = broken
        .into_iter()
        .map(|(offset, name)| (line_of(offset), name))
        .collect();
    page
}

/// GitHub's anchor for a heading: lowercase, letters, digits, `-` and `_`
/// kept, spaces turned into `-`, everything else dropped.
pub fn slug(title: &str) -> String {
    title
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c == ' ' {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}

/// Whether a link's destination is outside this check: a URL with a scheme.
fn is_external(dest: &str) -> bool {
    let end = dest.find(['/', '#', '?']).unwrap_or(dest.len());
    dest[..end].contains(':')
}

/// The repository-relative path a relative link from `from` names (without
/// its anchor), or `None` for an external link or a pure `#anchor`.
fn target_path(from: &Path, dest: &str) -> Option<PathBuf> {
    if is_external(dest) {
        return None;
    }
    let path = dest.split('#').next().unwrap_or_default();
    if path.is_empty() {
        return None;
    }
    let base = from.parent().unwrap_or(Path::new(""));
    normalize(&base.join(percent_decode(path)))
}

/// `a/./b/../c` as `a/c`; `None` when it climbs out of the repository.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Check one link from page `from`: `Err(why)` when it does not resolve.
fn resolve(
    root: &Path,
    from: &Path,
    dest: &str,
    pages: &BTreeMap<PathBuf, Page>,
) -> std::result::Result<(), String> {
    if is_external(dest) {
        return Ok(());
    }
    if dest.starts_with('/') {
        return Err("an absolute path; link relative to this page".into());
    }
    let (path, anchor) = match dest.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (dest, None),
    };
    let target = if path.is_empty() {
        from.to_path_buf()
    } else {
        let Some(target) = target_path(from, dest) else {
            return Err("it leaves the repository".into());
        };
        let on_disk = root.join(&target);
        if std::fs::symlink_metadata(&on_disk).is_err() {
            return Err(format!("{} does not exist", target.display()));
        }
        target
    };
    let Some(anchor) = anchor else {
        return Ok(());
    };
    match pages.get(&target) {
        Some(page) if page.anchors.contains(&percent_decode(anchor)) => Ok(()),
        Some(_) => Err(format!("no heading #{anchor} in {}", target.display())),
        None if target.extension().is_some_and(|e| e == "md") => Err(format!(
            "{} is not a checked page, so #{anchor} cannot be checked",
            target.display()
        )),
        // An anchor into source code (`#L10`) or another format: the file is enough.
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A small repository whose documentation is complete for `cli()`.
    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "README.md",
            "# tether\n\nSee [the guide](docs/guide/SUMMARY.md) and \
             [its start](docs/guide/getting-started.md#install-it).\n",
        );
        write(
            root,
            "docs/guide/SUMMARY.md",
            "# Summary\n\n- [Getting started](getting-started.md)\n\
             - [status](commands/status.md)\n- [plugin](commands/plugin.md)\n\
             - [file](backends/file.md)\n",
        );
        write(
            root,
            "docs/guide/getting-started.md",
            "# Getting started\n\n## Install it\n\n## Install it\n\n\
             Back to [the top](#getting-started), [again](#install-it-1), \
             [status](commands/status.md#exit-codes), [code](../../host/src/main.rs#L3), \
             [web](https://example.invalid/x#y).\n",
        );
        write(
            root,
            "docs/guide/commands/status.md",
            "# `tether status`\n\n## Exit codes {#exit-codes}\n",
        );
        write(
            root,
            "docs/guide/commands/plugin.md",
            "# tether plugin\n\n## `tether plugin add`\n",
        );
        write(root, "docs/guide/backends/file.md", "# file\n");
        write(root, "host/src/main.rs", "fn main() {}\n");
        dir
    }

    fn cli() -> Cli {
        Cli {
            commands: [
                ("status".to_string(), vec![]),
                ("plugin".to_string(), vec!["add".to_string()]),
            ]
            .into(),
            backends: vec!["file".to_string()],
        }
    }

    #[test]
    fn a_complete_tree_passes() {
        let dir = repo();
        assert_eq!(check(dir.path(), &cli()).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn a_broken_link_is_named_with_its_line() {
        let dir = repo();
        write(
            dir.path(),
            "docs/guide/getting-started.md",
            "# Getting started\n\nSee [gone](commands/gone.md).\n",
        );
        assert_eq!(
            check(dir.path(), &cli()).unwrap(),
            vec![
                "README.md:3: broken link `docs/guide/getting-started.md#install-it`: \
                 no heading #install-it in docs/guide/getting-started.md",
                "docs/guide/getting-started.md:3: broken link `commands/gone.md`: \
                 docs/guide/commands/gone.md does not exist",
            ]
        );
    }

    #[test]
    fn a_broken_anchor_in_the_same_page_is_named() {
        let dir = repo();
        write(
            dir.path(),
            "docs/guide/backends/file.md",
            "# file\n\n## Locator\n\n[x](#locater) [y](#locator)\n",
        );
        assert_eq!(
            check(dir.path(), &cli()).unwrap(),
            vec![
                "docs/guide/backends/file.md:5: broken link `#locater`: \
                 no heading #locater in docs/guide/backends/file.md"
            ]
        );
    }

    #[test]
    fn links_out_of_the_repository_and_missing_references_fail() {
        let dir = repo();
        write(
            dir.path(),
            "docs/extra.md",
            "[spec](../../shared/spec/README.md) [ref][nowhere] and [prose] \
             [abs](/etc/passwd)\n",
        );
        assert_eq!(
            check(dir.path(), &cli()).unwrap(),
            vec![
                "docs/extra.md:1: link reference [nowhere] has no definition",
                "docs/extra.md:1: broken link `../../shared/spec/README.md`: it leaves the repository",
                "docs/extra.md:1: broken link `/etc/passwd`: an absolute path; link relative to this page",
            ]
        );
    }

    #[test]
    fn a_command_or_backend_without_a_page_fails() {
        let dir = repo();
        let mut cli = cli();
        cli.commands.insert("verify".into(), vec![]);
        cli.commands.get_mut("plugin").unwrap().push("trust".into());
        cli.backends.push("git".into());
        assert_eq!(
            check(dir.path(), &cli).unwrap(),
            vec![
                "docs/guide/commands/plugin.md: no heading `tether plugin trust` (#tether-plugin-trust)",
                "docs/guide/commands/verify.md: missing: `tether verify` has no page",
                "docs/guide/backends/git.md: missing: backend `git` has no page",
            ]
        );
    }

    #[test]
    fn a_guide_page_missing_from_the_summary_fails() {
        let dir = repo();
        write(dir.path(), "docs/guide/orphan.md", "# Orphan\n");
        assert_eq!(
            check(dir.path(), &cli()).unwrap(),
            vec!["docs/guide/orphan.md: not listed in docs/guide/SUMMARY.md"]
        );
    }

    #[test]
    fn slugs_follow_github() {
        assert_eq!(slug("Exit codes and errors"), "exit-codes-and-errors");
        assert_eq!(
            slug("Trust boundary: `.tether/secrets.toml`"),
            "trust-boundary-tethersecretstoml"
        );
        assert_eq!(slug("`tether plugin add`"), "tether-plugin-add");
        assert_eq!(slug("A -- B"), "a----b");
    }

    #[test]
    fn the_help_texts_commands_are_read() {
        let help = "Usage: tether [OPTIONS] <COMMAND>\n\nCommands:\n  init      Make one\n  \
                    forget-workspace  Retire\n  help      Print this\n\nOptions:\n  -C <DIR>\n";
        assert_eq!(help_commands(help), vec!["init", "forget-workspace"]);
    }
}
