//! A cache file an adapter keeps in the VCS's own directory (`.jj/`, `.git/`),
//! which never comes with a clone: a first line naming what the body was
//! computed from (a tag for the format, then a key), and the body. The body is
//! used only while the caller's key is still the same. Best effort both ways:
//! a cache that cannot be read is recomputed, one that cannot be written is
//! not kept.

use std::path::PathBuf;

pub(crate) struct KeyedCache {
    /// The cache file.
    pub file: PathBuf,
    /// The first line's tag, before the key; a new format gets a new tag.
    pub tag: &'static str,
    /// The largest file read back (a bigger one is recomputed).
    pub max: u64,
}

impl KeyedCache {
    /// The body, when the file was written under `key`. Read without
    /// following a link and only up to `max` bytes.
    pub fn read(&self, key: &str) -> Option<String> {
        let bytes = crate::model::fsutil::read_nofollow_bounded(&self.file, self.max).ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (first, rest) = text.split_once('\n')?;
        (first.strip_prefix(self.tag)? == key).then(|| rest.to_owned())
    }

    /// Replace the cache with `body` under `key`: written beside it, then
    /// renamed, so a reader sees one whole cache or the previous one. Not
    /// synced: a cache lost in a crash is only recomputed. A key holding a
    /// line break is not kept.
    pub fn write(&self, key: &str, body: &str) {
        let (Some(dir), Some(name)) = (self.file.parent(), self.file.file_name()) else {
            return;
        };
        if key.contains('\n') {
            return;
        }
        let text = format!("{}{key}\n{body}", self.tag);
        let prefix = format!(".{}-", name.to_string_lossy());
        if let Ok(tmp) = crate::model::fsutil::temp_file_in(dir, &prefix, text.as_bytes()) {
            let _ = tmp.persist(&self.file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_read_back_only_under_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let cache = KeyedCache {
            file: dir.path().join("c"),
            tag: "c 1\t",
            max: 64,
        };
        assert_eq!(cache.read("k"), None);
        cache.write("k", "body\nmore");
        assert_eq!(cache.read("k").as_deref(), Some("body\nmore"));
        assert_eq!(cache.read("other"), None);
        // Another format's tag, a line break in a key, and too big a file.
        let old = KeyedCache {
            tag: "c 0\t",
            ..cache
        };
        assert_eq!(old.read("k"), None);
        let cache = KeyedCache {
            tag: "c 1\t",
            ..old
        };
        cache.write("a\nb", "x");
        assert_eq!(cache.read("k").as_deref(), Some("body\nmore"));
        cache.write("k", &"x".repeat(100));
        assert_eq!(cache.read("k"), None);
        // Never through a link.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&cache.file, &link).unwrap();
        cache.write("k", "small");
        let linked = KeyedCache {
            file: link,
            ..cache
        };
        assert_eq!(linked.read("k"), None);
        // Nothing is left beside it.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
