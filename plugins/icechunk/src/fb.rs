//! A small, bounds-checked flatbuffer reader.
//!
//! Icechunk's files are flatbuffers (`icechunk-format/flatbuffers/*.fbs`).
//! Writing goes through the `flatbuffers` crate's builder; reading goes
//! through this module instead of generated accessors, because the crate's
//! table API is `unsafe` and trusts offsets, while a repository on shared
//! storage may hold anything. Every access here checks its bounds and turns
//! a bad offset into [`Corrupt`], never a panic.
//!
//! Field slots are numbered as in the schema, counting a union as two slots
//! (its type byte, then its value).

/// A flatbuffer that does not hold what its schema says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt flatbuffer: {0}")]
pub struct Corrupt(pub String);

type R<T> = Result<T, Corrupt>;

fn corrupt(what: impl Into<String>) -> Corrupt {
    Corrupt(what.into())
}

fn slice(buf: &[u8], pos: usize, len: usize) -> R<&[u8]> {
    pos.checked_add(len)
        .and_then(|end| buf.get(pos..end))
        .ok_or_else(|| corrupt(format!("{len} bytes at offset {pos} are out of bounds")))
}

fn u16_at(buf: &[u8], pos: usize) -> R<u16> {
    Ok(u16::from_le_bytes(
        slice(buf, pos, 2)?.try_into().unwrap_or_default(),
    ))
}

fn u32_at(buf: &[u8], pos: usize) -> R<u32> {
    Ok(u32::from_le_bytes(
        slice(buf, pos, 4)?.try_into().unwrap_or_default(),
    ))
}

fn u64_at(buf: &[u8], pos: usize) -> R<u64> {
    Ok(u64::from_le_bytes(
        slice(buf, pos, 8)?.try_into().unwrap_or_default(),
    ))
}

/// Follow the unsigned offset stored at `pos` (offsets are relative to
/// where they are stored).
fn follow(buf: &[u8], pos: usize) -> R<usize> {
    let off = u32_at(buf, pos)? as usize;
    pos.checked_add(off)
        .filter(|p| *p < buf.len())
        .ok_or_else(|| corrupt(format!("offset at {pos} points out of the buffer")))
}

/// One table of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a> {
    buf: &'a [u8],
    pos: usize,
    vtable: usize,
    vtable_len: usize,
}

impl<'a> Table<'a> {
    /// The root table of a finished buffer.
    pub fn root(buf: &'a [u8]) -> R<Self> {
        Self::at(buf, follow(buf, 0)?)
    }

    fn at(buf: &'a [u8], pos: usize) -> R<Self> {
        // The table starts with a signed offset back (or forward) to its vtable.
        let soff = i64::from(u32_at(buf, pos)? as i32);
        let vtable = usize::try_from(pos as i64 - soff)
            .map_err(|_| corrupt(format!("vtable of the table at {pos} is out of bounds")))?;
        let vtable_len = u16_at(buf, vtable)? as usize;
        slice(buf, vtable, vtable_len)?;
        Ok(Self {
            buf,
            pos,
            vtable,
            vtable_len,
        })
    }

    /// Where field `slot` is stored, or `None` when absent (default value).
    fn field(&self, slot: usize) -> R<Option<usize>> {
        let entry = 4 + 2 * slot;
        if entry + 2 > self.vtable_len {
            return Ok(None);
        }
        match u16_at(self.buf, self.vtable + entry)? {
            0 => Ok(None),
            off => Ok(Some(self.pos + off as usize)),
        }
    }

    pub fn u8(&self, slot: usize, default: u8) -> R<u8> {
        match self.field(slot)? {
            Some(p) => Ok(slice(self.buf, p, 1)?[0]),
            None => Ok(default),
        }
    }

    pub fn bool(&self, slot: usize) -> R<bool> {
        Ok(self.u8(slot, 0)? != 0)
    }

    pub fn u16(&self, slot: usize, default: u16) -> R<u16> {
        self.field(slot)?
            .map_or(Ok(default), |p| u16_at(self.buf, p))
    }

    pub fn u32(&self, slot: usize, default: u32) -> R<u32> {
        self.field(slot)?
            .map_or(Ok(default), |p| u32_at(self.buf, p))
    }

    pub fn i32(&self, slot: usize, default: i32) -> R<i32> {
        Ok(self.u32(slot, default as u32)? as i32)
    }

    pub fn u64(&self, slot: usize, default: u64) -> R<u64> {
        self.field(slot)?
            .map_or(Ok(default), |p| u64_at(self.buf, p))
    }

    /// An inline struct of `N` bytes (the ids are `[uint8:N]` structs).
    pub fn array<const N: usize>(&self, slot: usize) -> R<Option<[u8; N]>> {
        match self.field(slot)? {
            Some(p) => Ok(Some(slice(self.buf, p, N)?.try_into().unwrap_or([0; N]))),
            None => Ok(None),
        }
    }

    pub fn table(&self, slot: usize) -> R<Option<Table<'a>>> {
        match self.field(slot)? {
            Some(p) => Ok(Some(Table::at(self.buf, follow(self.buf, p)?)?)),
            None => Ok(None),
        }
    }

    pub fn string(&self, slot: usize) -> R<Option<&'a str>> {
        match self.field(slot)? {
            Some(p) => Ok(Some(string_at(self.buf, follow(self.buf, p)?)?)),
            None => Ok(None),
        }
    }

    pub fn vector(&self, slot: usize) -> R<Option<Vector<'a>>> {
        match self.field(slot)? {
            Some(p) => Ok(Some(Vector::at(self.buf, follow(self.buf, p)?)?)),
            None => Ok(None),
        }
    }

    /// A `[uint8]` field as bytes.
    pub fn bytes(&self, slot: usize) -> R<Option<&'a [u8]>> {
        match self.vector(slot)? {
            Some(v) => Ok(Some(slice(self.buf, v.start, v.len)?)),
            None => Ok(None),
        }
    }

    /// A required field that is missing.
    pub fn required<T>(value: Option<T>, what: &str) -> R<T> {
        value.ok_or_else(|| corrupt(format!("required field {what} is missing")))
    }
}

fn string_at(buf: &[u8], pos: usize) -> R<&str> {
    let len = u32_at(buf, pos)? as usize;
    std::str::from_utf8(slice(buf, pos + 4, len)?)
        .map_err(|_| corrupt(format!("string at {pos} is not UTF-8")))
}

/// A vector: its elements start right after the length.
#[derive(Debug, Clone, Copy)]
pub struct Vector<'a> {
    buf: &'a [u8],
    start: usize,
    len: usize,
}

impl<'a> Vector<'a> {
    fn at(buf: &'a [u8], pos: usize) -> R<Self> {
        Ok(Self {
            buf,
            start: pos + 4,
            len: u32_at(buf, pos)? as usize,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Element `i` of a vector of tables.
    pub fn table(&self, i: usize) -> R<Table<'a>> {
        let p = self.start + 4 * i;
        Table::at(self.buf, follow(self.buf, p)?)
    }

    /// Element `i` of a vector of strings.
    pub fn string(&self, i: usize) -> R<&'a str> {
        let p = self.start + 4 * i;
        string_at(self.buf, follow(self.buf, p)?)
    }

    /// Element `i` of a vector of `N`-byte structs.
    pub fn array<const N: usize>(&self, i: usize) -> R<[u8; N]> {
        Ok(slice(self.buf, self.start + N * i, N)?
            .try_into()
            .unwrap_or([0; N]))
    }

    /// Element `i` of a `[uint16]`.
    pub fn u16(&self, i: usize) -> R<u16> {
        u16_at(self.buf, self.start + 2 * i)
    }

    /// Element `i` of a `[uint32]`.
    pub fn u32(&self, i: usize) -> R<u32> {
        u32_at(self.buf, self.start + 4 * i)
    }

    /// Every table of a vector of tables.
    pub fn tables(&self) -> R<Vec<Table<'a>>> {
        (0..self.len).map(|i| self.table(i)).collect()
    }

    /// Every string of a vector of strings.
    pub fn strings(&self) -> R<Vec<&'a str>> {
        (0..self.len).map(|i| self.string(i)).collect()
    }
}
