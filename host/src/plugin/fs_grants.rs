//! Which directories a `describe-fs` plugin gets for one object, decided by
//! the host from the object's locator and `.tether/secrets.toml`, never by
//! the plugin (DESIGN §4).
//!
//! For each of the plugin's filesystem keys, the value `.tether/secrets.toml`
//! gives the object under that key wins over the locator's (a clone cannot
//! choose it; it reaches the plugin in its config). The value is then:
//!
//! - an absolute path or a `file://` URL: that directory;
//! - a bare name (a git object's `remote = "origin"`): a remote of the git
//!   repository granted under an earlier key, looked up in that
//!   repository's own config file, read-only (`remote.<name>.pushurl`, else
//!   `remote.<name>.url`; nothing runs, and no system or global file is
//!   read, as in the plugin). The remote's directory is granted when
//!   its URL is an absolute path or a `file://` URL naming a git repository
//!   (a checkout or a bare one, so a name never grants any other kind of
//!   directory; and the plugin cannot repoint the name, since
//!   [`super::git_guard`] puts back a config it changed), under that
//!   spelling, so the plugin, reading the same entry, opens the same path;
//! - anything else (another URL, a relative path): nothing.
//!
//! Whatever is named is then preopened only when it is an existing directory
//! ([`super::host::Preopens::for_paths`]).

use std::path::Path;

use serde_json::{Map, Value};

/// The directories to preopen for an object, as (filesystem key, absolute
/// path), in key order.
pub(crate) fn directories(
    filesystem_keys: &[String],
    locator: &Value,
    secret: &Map<String, Value>,
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for key in filesystem_keys {
        let Some(value) = secret
            .get(key)
            .or_else(|| locator.get(key))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let dir = if let Some(dir) = local_dir(value) {
            Some(dir)
        } else if is_remote_name(value) {
            // Only a git repository: the repository's config is writable by
            // the plugin, so a name never grants an arbitrary directory.
            out.iter()
                .find_map(|(_, repo)| git_remote_url(Path::new(repo), value))
                .and_then(|url| local_dir(&url))
                .filter(|dir| is_git_repository(Path::new(dir)))
        } else {
            None
        };
        if let Some(dir) = dir {
            out.push((key.clone(), dir));
        }
    }
    out
}

/// The path an absolute path or `file:///` URL names; `None` for anything
/// else.
fn local_dir(value: &str) -> Option<String> {
    let path = value.strip_prefix("file://").unwrap_or(value);
    (path.starts_with('/') && !path.contains("://")).then(|| path.to_string())
}

/// Whether `value` is a remote name rather than a path or URL (the git
/// plugin's rule, `plugins/git/src/remote.rs`).
pub(crate) fn is_remote_name(value: &str) -> bool {
    !value.is_empty()
        && !value.contains(':')
        && !value.contains('\\')
        && !value.starts_with(['/', '.', '~'])
}

/// Whether `dir` is a git checkout (`.git` directory) or a bare repository.
fn is_git_repository(dir: &Path) -> bool {
    dir.join(".git").is_dir()
        || (dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").is_dir())
}

/// The push URL of remote `name` of the repository at `repo` (a checkout or
/// a bare repository), from its own config file only.
pub(crate) fn git_remote_url(repo: &Path, name: &str) -> Option<String> {
    let dot_git = repo.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        repo.to_path_buf()
    };
    let file = git_dir.join("config");
    if !file.is_file() {
        return None;
    }
    let config = git2::Config::open(&file).ok()?;
    ["pushurl", "url"]
        .iter()
        .find_map(|field| config.get_string(&format!("remote.{name}.{field}")).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_urls_and_remote_names() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("code");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let t = tmp.path().to_str().unwrap();
        for bare in ["origin.git", "m"] {
            for sub in ["objects", "refs"] {
                std::fs::create_dir_all(tmp.path().join(bare).join(sub)).unwrap();
            }
            std::fs::write(tmp.path().join(bare).join("HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        std::fs::create_dir_all(tmp.path().join("plain")).unwrap();
        std::fs::write(
            repo.join(".git/config"),
            format!(
                "[remote \"origin\"]\n\turl = {t}/origin.git\n\
                 [remote \"mirror\"]\n\turl = https://example.invalid/x.git\n\tpushurl = file://{t}/m\n\
                 [remote \"gh\"]\n\turl = git@example.invalid:x.git\n\
                 [remote \"plain\"]\n\turl = {t}/plain\n"
            ),
        )
        .unwrap();
        let keys = ["path".to_string(), "remote".to_string()];
        let path = repo.to_str().unwrap();
        let dirs = |remote: &str, secret: Map<String, Value>| {
            directories(&keys, &json!({"path": path, "remote": remote}), &secret)
        };
        let none = Map::new();
        assert_eq!(
            dirs("origin", none.clone()),
            [
                ("path".to_string(), path.to_string()),
                ("remote".to_string(), format!("{t}/origin.git"))
            ]
        );
        assert_eq!(
            dirs("mirror", none.clone())[1].1,
            format!("{t}/m"),
            "pushurl first"
        );
        for nothing in [
            "gh",
            "plain",
            "missing",
            "https://example.invalid/x",
            "../x",
        ] {
            assert_eq!(dirs(nothing, none.clone()).len(), 1, "{nothing}");
        }
        let mut secret = Map::new();
        secret.insert("remote".into(), json!("file:///srv/secret"));
        assert_eq!(dirs("origin", secret)[1].1, "/srv/secret", "secrets win");
    }
}
