//! Append-only JSON Lines with crash-tolerant reads, shared by the journal and
//! the repository indexes.
//!
//! A writer appends one whole line in one `write` (O_APPEND) and syncs it before
//! returning, so a record the caller was told about is on disk. A process killed
//! mid-write can leave a torn last line with no newline; the next append then
//! starts with a newline, so the fragment stays a fragment instead of
//! swallowing the new record, and readers skip any line that does not decode.
//! A crash thus loses at most the line being written.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::fsutil::{self, TEMP_PREFIX, parent_dir, sync_file};

/// Append `record` as one line to `path` (created if missing) and sync it.
pub fn append(path: &Path, record: &Value) -> std::io::Result<()> {
    append_line(path, &record.to_string())
}

/// Append several records in one write, then sync once.
pub fn append_all(path: &Path, records: &[Value]) -> std::io::Result<()> {
    if records.is_empty() {
        return touch(path);
    }
    let text: Vec<String> = records.iter().map(Value::to_string).collect();
    append_line(path, &text.join("\n"))
}

/// Create `path` empty when it is missing (and sync the directory entry).
pub fn touch(path: &Path) -> std::io::Result<()> {
    let existed = path.exists();
    let file = open_append(path)?;
    if !existed {
        sync_file(&file, path, true)?;
        fsutil::sync_dir(parent_dir(path));
    }
    Ok(())
}

fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    debug_assert!(!line.ends_with('\n'));
    let existed = path.exists();
    let mut file = open_append(path)?;
    let mut buf = String::with_capacity(line.len() + 2);
    if !ends_with_newline(&mut file)? {
        buf.push('\n');
    }
    buf.push_str(line);
    buf.push('\n');
    file.write_all(buf.as_bytes())?;
    sync_file(&file, path, false)?;
    if !existed {
        // A new file is durable only once its directory entry is.
        fsutil::sync_dir(parent_dir(path));
    }
    Ok(())
}

/// An open log that takes many records, each in one `write` as it comes
/// (whole lines, O_APPEND, so concurrent writers' lines never interleave
/// within a line), synced once by [`Appender::sync`]. A record written is in
/// the file for every later reader, a killed writer's included: only a
/// machine crash before the sync can lose it, which is what one sync per
/// batch trades for not syncing per record.
#[derive(Debug)]
pub struct Appender {
    file: File,
    path: std::path::PathBuf,
    /// The file ended mid-line (a torn append) when opened: the first
    /// record starts with a newline.
    torn: bool,
}

impl Appender {
    /// Open the existing log `path` (never through a link).
    pub fn open(path: &Path) -> std::io::Result<Appender> {
        let mut file = open_append(path)?;
        let torn = !ends_with_newline(&mut file)?;
        Ok(Appender {
            file,
            path: path.to_path_buf(),
            torn,
        })
    }

    /// Append `record` as one line, in one write, unsynced.
    pub fn write(&mut self, record: &Value) -> std::io::Result<()> {
        let line = record.to_string();
        let mut buf = String::with_capacity(line.len() + 2);
        if std::mem::take(&mut self.torn) {
            buf.push('\n');
        }
        buf.push_str(&line);
        buf.push('\n');
        self.file.write_all(buf.as_bytes())
    }

    /// Make every record written so far durable.
    pub fn sync(&self) -> std::io::Result<()> {
        sync_file(&self.file, &self.path, false)
    }
}

/// Open `path` to append (and read), created if missing; never through a
/// symbolic link, and only a regular file: these logs live under `.tether/`,
/// which came with the clone.
fn open_append(path: &Path) -> std::io::Result<File> {
    let file =
        fsutil::nofollow(OpenOptions::new().read(true).create(true).append(true)).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Whether the file is empty or its last byte is a newline.
fn ends_with_newline(file: &mut File) -> std::io::Result<bool> {
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    // Reads follow the seek position; O_APPEND writes still go to the end.
    file.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// Every decodable record of `path`, oldest first; a missing file is empty. A
/// line that is not JSON (a torn append, a stray edit) is skipped with a
/// warning: these files are memory aids, and a damaged line must never fail
/// the command that happens to read one.
pub fn read(path: &Path) -> std::io::Result<Vec<Value>> {
    let file = match fsutil::open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    let mut reader = BufReader::new(file);
    let mut raw = Vec::new();
    let mut number = 0usize;
    loop {
        raw.clear();
        if reader.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        number += 1;
        // Not `lines()`: a torn write may have cut a UTF-8 sequence in half.
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) => out.push(v),
            Err(e) => tracing::warn!(
                "{}: line {number} is not a record ({e}); skipped",
                path.display()
            ),
        }
    }
    Ok(out)
}

/// The records of `path` that decode as `T`, oldest first (others skipped).
pub fn read_as<T: DeserializeOwned>(path: &Path) -> std::io::Result<Vec<T>> {
    Ok(read(path)?
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect())
}

/// Replace the whole file with `records`, atomically (a temporary file in the
/// same directory, synced, then renamed over it). For compaction; appends are
/// the normal way in.
pub fn rewrite(path: &Path, records: &[Value]) -> std::io::Result<()> {
    let mut text = String::new();
    for r in records {
        text.push_str(&r.to_string());
        text.push('\n');
    }
    fsutil::replace_file(path, TEMP_PREFIX, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn appends_are_lines_and_missing_files_are_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        assert!(read(&path).unwrap().is_empty());
        append(&path, &json!({"a": 1})).unwrap();
        append_all(&path, &[json!({"a": 2}), json!({"a": 3})]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n");
        assert_eq!(read(&path).unwrap().len(), 3);
    }

    #[test]
    fn a_torn_tail_is_skipped_and_the_next_record_starts_a_fresh_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        append(&path, &json!({"a": 1})).unwrap();
        // A crash half-way through the next append.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"a\": 2, \"tor").unwrap();
        drop(f);
        assert_eq!(read(&path).unwrap(), vec![json!({"a": 1})]);

        append(&path, &json!({"a": 3})).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"a\": 2, \"tor\n{\"a\":3}\n");
        assert_eq!(read(&path).unwrap(), vec![json!({"a": 1}), json!({"a": 3})]);

        // A torn multi-byte character is skipped too.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[b'{', b'"', 0xC3]).unwrap();
        drop(f);
        append(&path, &json!({"a": "é"})).unwrap();
        assert_eq!(read(&path).unwrap().len(), 3);
    }

    #[test]
    fn an_appender_writes_lines_as_they_come_after_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        append(&path, &json!({"a": 1})).unwrap();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"a\": 2, \"tor").unwrap();
        drop(f);
        let mut w = Appender::open(&path).unwrap();
        w.write(&json!({"b": 1})).unwrap();
        // Written is readable before any sync (what a killed process leaves).
        assert_eq!(read(&path).unwrap(), vec![json!({"a": 1}), json!({"b": 1})]);
        w.write(&json!({"b": 2})).unwrap();
        w.sync().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"a\": 2, \"tor\n{\"b\":1}\n{\"b\":2}\n");
    }

    #[test]
    fn rewrite_replaces_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        append(&path, &json!({"a": 1})).unwrap();
        rewrite(&path, &[json!({"b": 1})]).unwrap();
        assert_eq!(read(&path).unwrap(), vec![json!({"b": 1})]);
    }
}
