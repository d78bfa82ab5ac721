//! Lance's protobuf messages, as far as this plugin needs them
//! (research/formats.md §1.4): hand-written message structs holding only the
//! fields read (prost's derive; every other field is skipped on decode), and
//! [`wire`], a field-preserving view of a message for the one place a
//! manifest is rewritten (a branch's clone manifest), where fields no public
//! `.proto` declares must survive byte for byte.
//!
//! Field numbers are Lance's (`lance.table.Manifest`, `DataFragment`,
//! `DataFile`, `DeletionFile`, `BasePath`, `lance.file.Field`, and the
//! operation numbers of `Transaction`); the structs are ours.

use prost::Message;

/// The manifest fields a metadata-only reader needs.
#[derive(Clone, PartialEq, Message)]
pub struct Manifest {
    /// The flattened schema, nested fields included.
    #[prost(message, repeated, tag = "1")]
    pub fields: Vec<Field>,
    #[prost(message, repeated, tag = "2")]
    pub fragments: Vec<DataFragment>,
    #[prost(uint64, tag = "3")]
    pub version: u64,
    /// File offset of the index section (present when the version has indices).
    #[prost(uint64, optional, tag = "6")]
    pub index_section: Option<u64>,
    #[prost(message, optional, tag = "7")]
    pub timestamp: Option<Timestamp>,
    #[prost(uint64, tag = "9")]
    pub reader_feature_flags: u64,
    #[prost(uint64, tag = "10")]
    pub writer_feature_flags: u64,
    /// `{read_version}-{uuid}.txn` under the branch root's `_transactions/`.
    #[prost(string, tag = "12")]
    pub transaction_file: String,
    #[prost(message, repeated, tag = "18")]
    pub base_paths: Vec<BasePath>,
    /// Unset on `main`.
    #[prost(string, optional, tag = "20")]
    pub branch: Option<String>,
    /// The inline transaction's offset (older writers).
    #[prost(uint64, optional, tag = "21")]
    pub transaction_section_old: Option<u64>,
    /// The inline transaction's offset (what pylance 14 writes).
    #[prost(uint64, optional, tag = "23")]
    pub transaction_section: Option<u64>,
}

impl Manifest {
    /// Where the inline transaction starts, if the manifest says.
    pub fn transaction_offset(&self) -> Option<u64> {
        self.transaction_section.or(self.transaction_section_old)
    }
}

/// `google.protobuf.Timestamp`.
#[derive(Clone, PartialEq, Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `lance.file.Field`: one schema field.
#[derive(Clone, PartialEq, Message)]
pub struct Field {
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(int32, tag = "3")]
    pub id: i32,
    /// −1 for a top-level field.
    #[prost(int32, tag = "4")]
    pub parent_id: i32,
    #[prost(string, tag = "5")]
    pub logical_type: String,
    #[prost(bool, tag = "6")]
    pub nullable: bool,
}

/// `DataFragment`.
#[derive(Clone, PartialEq, Message)]
pub struct DataFragment {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(message, repeated, tag = "2")]
    pub files: Vec<DataFile>,
    #[prost(message, optional, tag = "3")]
    pub deletion_file: Option<DeletionFile>,
    /// Rows in the data files, deleted ones included.
    #[prost(uint64, tag = "4")]
    pub physical_rows: u64,
}

impl DataFragment {
    /// Rows not deleted.
    pub fn live_rows(&self) -> u64 {
        let deleted = self
            .deletion_file
            .as_ref()
            .map_or(0, |d| d.num_deleted_rows);
        self.physical_rows.saturating_sub(deleted)
    }
}

/// `DataFile`: one file of a fragment, relative to `data/` of its base.
#[derive(Clone, PartialEq, Message)]
pub struct DataFile {
    #[prost(string, tag = "1")]
    pub path: String,
    #[prost(int32, repeated, tag = "2")]
    pub fields: Vec<i32>,
    #[prost(uint32, optional, tag = "7")]
    pub base_id: Option<u32>,
}

/// `DeletionFile`.
#[derive(Clone, PartialEq, Message)]
pub struct DeletionFile {
    /// 0: Arrow array (`.arrow`), 1: bitmap (`.bin`).
    #[prost(int32, tag = "1")]
    pub file_type: i32,
    #[prost(uint64, tag = "2")]
    pub read_version: u64,
    #[prost(uint64, tag = "3")]
    pub id: u64,
    #[prost(uint64, tag = "4")]
    pub num_deleted_rows: u64,
    #[prost(uint32, optional, tag = "7")]
    pub base_id: Option<u32>,
}

impl DeletionFile {
    /// The file's name under `_deletions/` of its base.
    pub fn file_name(&self, fragment_id: u64) -> String {
        let ext = if self.file_type == 1 { "bin" } else { "arrow" };
        format!("{fragment_id}-{}-{}.{ext}", self.read_version, self.id)
    }
}

/// `BasePath`: another root data files may live under (a branch's parents).
#[derive(Clone, PartialEq, Message)]
pub struct BasePath {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(bool, tag = "3")]
    pub is_dataset_root: bool,
    #[prost(string, tag = "4")]
    pub path: String,
}

/// The name of a transaction's operation: the `oneof` member set, by its
/// field number in `Transaction` (empty when none is known).
pub fn operation_name(txn: &[u8]) -> &'static str {
    let Ok(fields) = wire::parse(txn) else {
        return "";
    };
    fields
        .iter()
        .find_map(|f| {
            Some(match f.number {
                100 => "append",
                101 => "delete",
                102 => "overwrite",
                103 => "create index",
                104 => "rewrite",
                105 => "merge",
                106 => "restore",
                107 => "reserve fragments",
                108 => "update",
                109 => "project",
                110 => "update config",
                111 => "data replacement",
                112 => "update mem-wal state",
                113 => "clone",
                114 => "update bases",
                _ => return None,
            })
        })
        .unwrap_or("")
}

/// Protobuf at the wire level: a message as its fields, in order, each
/// value kept as it was, so a rewrite changes only what it touches.
pub mod wire {
    use prost::bytes::Buf;
    use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};

    /// One field of a message.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WireField {
        pub number: u32,
        pub value: Value,
    }

    /// A field's value, as encoded.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum Value {
        Varint(u64),
        Fixed64([u8; 8]),
        Fixed32([u8; 4]),
        Bytes(Vec<u8>),
    }

    impl WireField {
        pub fn varint(number: u32, v: u64) -> Self {
            Self {
                number,
                value: Value::Varint(v),
            }
        }

        pub fn bytes(number: u32, b: impl Into<Vec<u8>>) -> Self {
            Self {
                number,
                value: Value::Bytes(b.into()),
            }
        }

        #[cfg(test)]
        pub fn as_varint(&self) -> Option<u64> {
            match self.value {
                Value::Varint(v) => Some(v),
                _ => None,
            }
        }
    }

    /// A message that is not valid protobuf.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Malformed(pub String);

    /// The fields of `buf`, in wire order.
    pub fn parse(mut buf: &[u8]) -> Result<Vec<WireField>, Malformed> {
        let bad = |e: &dyn std::fmt::Display| Malformed(e.to_string());
        let mut out = Vec::new();
        while buf.has_remaining() {
            let (number, wire_type) = decode_key(&mut buf).map_err(|e| bad(&e))?;
            let value = match wire_type {
                WireType::Varint => Value::Varint(decode_varint(&mut buf).map_err(|e| bad(&e))?),
                WireType::SixtyFourBit => {
                    let mut v = [0u8; 8];
                    if buf.remaining() < 8 {
                        return Err(Malformed("truncated fixed64".into()));
                    }
                    buf.copy_to_slice(&mut v);
                    Value::Fixed64(v)
                }
                WireType::ThirtyTwoBit => {
                    let mut v = [0u8; 4];
                    if buf.remaining() < 4 {
                        return Err(Malformed("truncated fixed32".into()));
                    }
                    buf.copy_to_slice(&mut v);
                    Value::Fixed32(v)
                }
                WireType::LengthDelimited => {
                    let len = decode_varint(&mut buf).map_err(|e| bad(&e))?;
                    let len = usize::try_from(len)
                        .ok()
                        .filter(|l| *l <= buf.len())
                        .ok_or_else(|| Malformed("truncated length-delimited field".into()))?;
                    let v = buf[..len].to_vec();
                    buf.advance(len);
                    Value::Bytes(v)
                }
                WireType::StartGroup | WireType::EndGroup => {
                    return Err(Malformed("groups are not used by Lance".into()));
                }
            };
            out.push(WireField { number, value });
        }
        Ok(out)
    }

    /// The bytes of `fields`, in the order given.
    pub fn encode(fields: &[WireField]) -> Vec<u8> {
        let mut out = Vec::new();
        for f in fields {
            match &f.value {
                Value::Varint(v) => {
                    encode_key(f.number, WireType::Varint, &mut out);
                    encode_varint(*v, &mut out);
                }
                Value::Fixed64(v) => {
                    encode_key(f.number, WireType::SixtyFourBit, &mut out);
                    out.extend_from_slice(v);
                }
                Value::Fixed32(v) => {
                    encode_key(f.number, WireType::ThirtyTwoBit, &mut out);
                    out.extend_from_slice(v);
                }
                Value::Bytes(v) => {
                    encode_key(f.number, WireType::LengthDelimited, &mut out);
                    encode_varint(v.len() as u64, &mut out);
                    out.extend_from_slice(v);
                }
            }
        }
        out
    }

    /// Set the single varint field `number` to `v` (added when absent).
    pub fn set_varint(fields: &mut Vec<WireField>, number: u32, v: u64) {
        set(fields, WireField::varint(number, v));
    }

    /// Replace every occurrence of `field.number` with `field` (added when absent).
    pub fn set(fields: &mut Vec<WireField>, field: WireField) {
        match fields.iter().position(|f| f.number == field.number) {
            Some(i) => {
                fields[i] = field.clone();
                let number = field.number;
                let mut seen = 0;
                fields.retain(|f| {
                    if f.number != number {
                        return true;
                    }
                    seen += 1;
                    seen == 1
                });
            }
            None => fields.push(field),
        }
    }

    /// Sort by field number, keeping the order of repeated fields: the order
    /// protobuf encoders (prost among them) write.
    pub fn canonical_order(fields: &mut [WireField]) {
        fields.sort_by_key(|f| f.number);
    }
}

#[cfg(test)]
mod tests {
    use super::wire::{self, WireField};
    use super::*;

    #[test]
    fn wire_round_trip_keeps_unknown_fields() {
        let mut m = Manifest {
            version: 7,
            branch: Some("b".into()),
            ..Default::default()
        };
        m.fields.push(Field {
            name: "id".into(),
            id: 0,
            parent_id: -1,
            logical_type: "int64".into(),
            nullable: true,
        });
        let mut bytes = m.encode_to_vec();
        // A field no struct here declares.
        bytes.extend(wire::encode(&[WireField::varint(99, 5)]));
        let fields = wire::parse(&bytes).unwrap();
        assert_eq!(wire::encode(&fields), bytes);
        assert!(fields.iter().any(|f| f.number == 99));
        let back = Manifest::decode(bytes.as_slice()).unwrap();
        assert_eq!(back.version, 7);
        assert_eq!(back.fields[0].parent_id, -1);
    }

    #[test]
    fn set_replaces_or_appends() {
        let mut f = vec![WireField::varint(3, 1), WireField::varint(9, 0)];
        wire::set_varint(&mut f, 9, 16);
        wire::set_varint(&mut f, 20, 2);
        assert_eq!(f[1].as_varint(), Some(16));
        assert_eq!(f[2].number, 20);
    }

    #[test]
    fn operation_names() {
        let txn = wire::encode(&[
            WireField::bytes(2, b"uuid".to_vec()),
            WireField::bytes(100, Vec::new()),
        ]);
        assert_eq!(operation_name(&txn), "append");
        assert_eq!(operation_name(b"\xff"), "");
    }

    #[test]
    fn live_rows_subtract_deletions() {
        let f = DataFragment {
            physical_rows: 5,
            deletion_file: Some(DeletionFile {
                num_deleted_rows: 2,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(f.live_rows(), 3);
        assert_eq!(
            f.deletion_file.unwrap().file_name(4),
            "4-0-0.arrow".to_string()
        );
    }
}
