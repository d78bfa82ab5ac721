//! Writing objects: gix computes commits, trees and merged blobs into its
//! in-memory object store (`Repository::with_object_memory`), and this module
//! persists them as loose objects the way git does (zlib of `<kind> <len>\0`
//! plus the content, at `objects/xx/yyyy…`, written to a temp file and renamed
//! into place). gix's own loose writer goes through gix-tempfile, which asks
//! for a process id WASI does not have.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::Path;

use flate2::Compression;
use flate2::write::ZlibEncoder;
use gix::ObjectId;
use gix::objs::Kind;
use tether_sdk::{Error, Result};

/// Persist every object `repo` holds in memory into `objects_dir`; returns
/// how many were new.
pub fn persist(repo: &mut gix::Repository, objects_dir: &Path) -> Result<usize> {
    let Some(memory) = repo.objects.take_object_memory() else {
        return Ok(0);
    };
    let mut written = 0;
    for (id, (kind, data)) in memory.iter() {
        if write_loose(objects_dir, *id, *kind, data)? {
            written += 1;
        }
    }
    Ok(written)
}

/// Write one loose object unless it exists; returns whether it was written.
pub fn write_loose(objects_dir: &Path, id: ObjectId, kind: Kind, data: &[u8]) -> Result<bool> {
    let hex = id.to_string();
    let dir = objects_dir.join(&hex[..2]);
    let path = dir.join(&hex[2..]);
    if path.exists() {
        return Ok(false);
    }
    let err =
        |verb: &str, e: std::io::Error| Error::backend(format!("cannot {verb} object {hex}: {e}"));
    fs::create_dir_all(&dir).map_err(|e| err("make the directory of", e))?;
    let mut encoder = ZlibEncoder::new(Vec::new(), Compression::default());
    encoder
        .write_all(format!("{} {}\0", kind, data.len()).as_bytes())
        .and_then(|()| encoder.write_all(data))
        .map_err(|e| err("compress", e))?;
    let compressed = encoder.finish().map_err(|e| err("compress", e))?;
    let tmp = dir.join(tether_sdk::kit::scratch_name("tmp_obj")?);
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.write_all(&compressed)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &path)
    })();
    match result {
        Ok(()) => Ok(true),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            // Another writer got there first with the same (content-addressed) bytes.
            if e.kind() == ErrorKind::AlreadyExists || path.exists() {
                Ok(false)
            } else {
                Err(err("write", e))
            }
        }
    }
}
