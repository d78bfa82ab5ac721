//! A heap-backed stand-in for the read-only part of `memmap2` 0.9, written for
//! tether's git plugin (`plugins/git`), which runs gix as a wasm32-wasip2
//! component: WASI has no `mmap`, and the real crate's stub for such targets
//! fails every map with `Unsupported` (research/formats.md §3.3).
//!
//! A "map" here reads the requested range into a `Vec<u8>`. That costs memory
//! (a pack is read whole) but nothing else changes for the reader: the bytes
//! are immutable, `Deref<Target = [u8]>`, `Send` and `Sync`. The file's cursor
//! is put back where it was, since gix keeps reading the same handle after
//! mapping it (`gix-index` checks its trailer that way).
//!
//! Only what gix calls is here: `MmapOptions::{new, offset, len,
//! map_copy_read_only, map}` and `Mmap::map`. Anything writable is absent on
//! purpose, so a dependency that wanted a shared writable map fails to build
//! rather than silently writing to a private copy.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Deref;

/// A read-only "mapping": the bytes of a file range, read into memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mmap {
    data: Vec<u8>,
}

impl Mmap {
    /// The whole file.
    ///
    /// # Safety
    ///
    /// Safe in this implementation (the bytes are a private copy); `unsafe`
    /// only to keep memmap2's signature.
    pub unsafe fn map(file: &File) -> io::Result<Mmap> {
        read_range(file, 0, None)
    }

    /// The number of bytes mapped.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether nothing was mapped.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl Deref for Mmap {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl AsRef<[u8]> for Mmap {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// Which range of a file to "map".
#[derive(Debug, Clone, Default)]
pub struct MmapOptions {
    offset: u64,
    len: Option<usize>,
}

impl MmapOptions {
    pub fn new() -> MmapOptions {
        MmapOptions::default()
    }

    /// Start this many bytes into the file.
    pub fn offset(&mut self, offset: u64) -> &mut Self {
        self.offset = offset;
        self
    }

    /// Map this many bytes (the rest of the file when not set).
    pub fn len(&mut self, len: usize) -> &mut Self {
        self.len = Some(len);
        self
    }

    /// A private, read-only copy of the range.
    ///
    /// # Safety
    ///
    /// See [`Mmap::map`].
    pub unsafe fn map_copy_read_only(&self, file: &File) -> io::Result<Mmap> {
        read_range(file, self.offset, self.len)
    }

    /// The same as [`MmapOptions::map_copy_read_only`]: every map is read-only.
    ///
    /// # Safety
    ///
    /// See [`Mmap::map`].
    pub unsafe fn map(&self, file: &File) -> io::Result<Mmap> {
        read_range(file, self.offset, self.len)
    }
}

/// Read `len` bytes (or to the end) from `offset`, leaving the cursor where
/// it was.
fn read_range(file: &File, offset: u64, len: Option<usize>) -> io::Result<Mmap> {
    let mut handle = file;
    let position = handle.stream_position()?;
    let result = (|| {
        handle.seek(SeekFrom::Start(offset))?;
        let mut data = Vec::new();
        match len {
            Some(len) => {
                data.resize(len, 0);
                handle.read_exact(&mut data)?;
            }
            None => {
                handle.read_to_end(&mut data)?;
            }
        }
        Ok(Mmap { data })
    })();
    handle.seek(SeekFrom::Start(position))?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_a_range_and_restores_the_cursor() {
        let path = std::env::temp_dir().join(format!("memmap2-shim-{}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(b"0123456789")
            .unwrap();
        let mut file = File::open(&path).unwrap();
        file.seek(SeekFrom::Start(3)).unwrap();
        let whole = unsafe { MmapOptions::new().map_copy_read_only(&file) }.unwrap();
        assert_eq!(&*whole, b"0123456789");
        let part = unsafe { MmapOptions::new().offset(2).len(4).map(&file) }.unwrap();
        assert_eq!(&*part, b"2345");
        assert_eq!(file.stream_position().unwrap(), 3);
        std::fs::remove_file(&path).unwrap();
    }
}
