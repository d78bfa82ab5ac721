//! Pushing a git object's pin tags to a network remote (spec/11, `git`,
//! "Pin"; issue 26): with `remote` naming an ssh or https remote, a pin is a
//! pin only once its tag is there too, and `gc` deletes it there first.
//!
//! The git plugin pushes to a remote on this machine itself (through the
//! directory the host preopens); it has no network transport, and the user's
//! git credentials (credential helpers, ssh-agent, `~/.ssh`) must never
//! enter the sandbox. So for a network remote the host runs the user's own
//! `git push`, outside the sandbox, after the plugin made the local tag, and
//! takes the tag back when the push fails.
//!
//! Which remote is the user's choice, never a clone's: the locator may only
//! *name* a remote the repository's own config has (the plugin refuses a URL
//! there), and a URL comes only from `.tether/secrets.toml`. A name is pushed
//! to by name, so git applies the user's `pushurl`, `insteadOf` and
//! credential settings. The repository's hooks never run (the plugin can
//! write inside the repository; a hook it planted would run outside the
//! sandbox), and git never prompts: a push that needs credentials git cannot
//! find fails and says how to give them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

use crate::plugin::fs_grants::{git_remote_url, is_remote_name};

/// A network remote a git object's pins are pushed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRemote {
    /// The repository (a checkout or a bare one) whose tags are pushed.
    repo: PathBuf,
    /// The remote's name, or the URL secrets.toml gives.
    target: String,
    /// How messages name it (a secrets.toml URL is never printed: it may
    /// carry a token).
    label: String,
}

impl PinRemote {
    /// The network remote of a git object, from its locator (`path`, else
    /// `uri`; `remote`, a name) and its secrets.toml entry (`remote`, a URL
    /// or path, which wins); `None` when it has none, or it is on this
    /// machine (the plugin's own push).
    pub fn resolve(locator: &Value, secret: &Map<String, Value>) -> Option<PinRemote> {
        let repo = ["path", "uri"]
            .iter()
            .find_map(|k| locator.get(*k).and_then(Value::as_str))
            .filter(|p| p.starts_with('/'))?;
        let repo = PathBuf::from(repo);
        if let Some(url) = secret
            .get("remote")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            return is_network_url(url).then(|| PinRemote {
                repo,
                target: url.to_string(),
                label: "the remote .tether/secrets.toml gives this object".into(),
            });
        }
        let name = locator
            .get("remote")
            .and_then(Value::as_str)
            .filter(|n| is_remote_name(n))?;
        let url = git_remote_url(&repo, name)?;
        is_network_url(&url).then(|| PinRemote {
            repo,
            target: name.to_string(),
            label: format!("remote {name}"),
        })
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Push tag `name` (without `refs/tags/`) to the remote. Already there
    /// at the same commit is success; there at another is a failure (no
    /// force).
    pub async fn push_tag(&self, name: &str) -> Result<(), String> {
        let spec = format!("refs/tags/{name}:refs/tags/{name}");
        self.push(vec![spec], false).await
    }

    /// Delete tag `name` in the remote; absent is success.
    pub async fn delete_tag(&self, name: &str) -> Result<(), String> {
        self.push(vec![format!(":refs/tags/{name}")], true).await
    }

    /// The remote's tags, name (without `refs/tags/`) -> the commit each
    /// names (an annotated tag peeled), read with the user's own `git
    /// ls-remote`, as a push would reach the remote.
    pub async fn tags(&self) -> Result<BTreeMap<String, String>, String> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.tags_blocking())
            .await
            .map_err(|e| format!("the listing did not finish: {e}"))?
    }

    fn tags_blocking(&self) -> Result<BTreeMap<String, String>, String> {
        let out = self
            .git()
            .args(["ls-remote", "--tags"])
            .arg(&self.target)
            .output()
            .map_err(|e| format!("cannot run git to list the tags of {}: {e}", self.label))?;
        if !out.status.success() {
            return Err(format!(
                "git ls-remote of {} failed: {}",
                self.label,
                self.said(&String::from_utf8_lossy(&out.stderr), "")
            ));
        }
        let mut tags = BTreeMap::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Some((sha, name)) = line.split_once('\t') else {
                continue;
            };
            let Some(name) = name.strip_prefix("refs/tags/") else {
                continue;
            };
            match name.strip_suffix("^{}") {
                // An annotated tag's peeled line (after its own) names the commit.
                Some(tag) => {
                    tags.insert(tag.to_string(), sha.to_string());
                }
                None => {
                    tags.entry(name.to_string())
                        .or_insert_with(|| sha.to_string());
                }
            }
        }
        Ok(tags)
    }

    /// `git` in the repository, never prompting and running no hook.
    fn git(&self) -> Command {
        let mut c = Command::new("git");
        c.arg("-C")
            .arg(&self.repo)
            .args(["-c", "core.hooksPath=/dev/null"])
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ASKPASS", "")
            .env("SSH_ASKPASS", "")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .stdin(Stdio::null());
        c
    }

    /// What git said, on one line, escaped, and with a secrets.toml URL
    /// (which may carry a token) replaced.
    fn said(&self, stderr: &str, stdout: &str) -> String {
        let said: Vec<&str> = stderr
            .lines()
            .chain(stdout.lines())
            .map(str::trim)
            .filter(|l| !l.is_empty() && *l != "Done" && !l.starts_with("To "))
            .collect();
        let said = crate::model::display::escape_inline(&said.join("; ")).into_owned();
        if self.target.contains("://") {
            said.replace(&self.target, "REMOTE")
        } else {
            said
        }
    }

    async fn push(&self, refspecs: Vec<String>, deleting: bool) -> Result<(), String> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.push_blocking(&refspecs, deleting))
            .await
            .map_err(|e| format!("the push did not finish: {e}"))?
    }

    fn push_blocking(&self, refspecs: &[String], deleting: bool) -> Result<(), String> {
        let out = self
            .git()
            .args(["push", "--no-verify", "--porcelain"])
            .arg(&self.target)
            .args(refspecs)
            .output()
            .map_err(|e| format!("cannot run git to push to {}: {e}", self.label))?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        if deleting && stderr.contains("remote ref does not exist") {
            return Ok(());
        }
        let said = self.said(&stderr, &stdout);
        let auth = said.contains("Authentication failed")
            || said.contains("could not read Username")
            || said.contains("Permission denied")
            || said.contains("terminal prompts disabled");
        let hint = if auth {
            " (tether runs `git push` without prompting: give git the credentials through a \
             credential helper (`git config credential.helper`) or ssh-agent)"
        } else {
            ""
        };
        Err(format!("git push to {} failed: {said}{hint}", self.label))
    }
}

/// Whether `url` reaches another machine: a `scheme://` URL other than
/// `file://`, or scp-like `host:path` (the plugin's rule for what it cannot
/// push to itself).
pub fn is_network_url(url: &str) -> bool {
    if url.starts_with("file://") || url.starts_with('/') {
        return false;
    }
    if url.contains("://") {
        return true;
    }
    match url.split_once(':') {
        Some((host, _)) => !host.is_empty() && !host.contains('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_urls() {
        for url in [
            "https://example.invalid/x.git",
            "ssh://git@example.invalid/x.git",
            "git@example.invalid:x.git",
            "git://example.invalid/x",
        ] {
            assert!(is_network_url(url), "{url}");
        }
        for url in ["/srv/x.git", "file:///srv/x.git", "relative/x", "./a:b"] {
            assert!(!is_network_url(url), "{url}");
        }
    }
}
