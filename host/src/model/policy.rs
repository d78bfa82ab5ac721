//! Per-object policy (`[policy]` in a manifest, `[defaults]` in
//! `tether.toml`). Whether writes fork is not a policy: that is which
//! bookmark the working copy is on.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `file`: what drift of a `file` object means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileMode {
    /// Any drift is an error at `status` (the default).
    #[default]
    Immutable,
    /// A single object in a versioned bucket is Addressable by version id.
    Versioned,
}

/// `pin`: whether `commit` creates a native ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PinMode {
    /// Create `tether.<pin_id>` (the default).
    #[default]
    Native,
    /// Record the state only; recoverable while the system keeps it.
    Record,
}

/// An object's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Policy {
    /// `immutable` | `versioned`.
    pub file: FileMode,
    /// `native` | `record`.
    pub pin: PinMode,
}

impl FileMode {
    /// The spelling in files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            FileMode::Immutable => "immutable",
            FileMode::Versioned => "versioned",
        }
    }
}

impl PinMode {
    /// The spelling in files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PinMode::Native => "native",
            PinMode::Record => "record",
        }
    }
}

impl fmt::Display for FileMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for PinMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FileMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "immutable" => Ok(FileMode::Immutable),
            "versioned" => Ok(FileMode::Versioned),
            _ => Err(format!(
                "file policy {s:?} is not \"immutable\" or \"versioned\""
            )),
        }
    }
}

impl FromStr for PinMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "native" => Ok(PinMode::Native),
            "record" => Ok(PinMode::Record),
            _ => Err(format!("pin policy {s:?} is not \"native\" or \"record\"")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        assert_eq!(Policy::default().file, FileMode::Immutable);
        assert_eq!(Policy::default().pin, PinMode::Native);
        assert_eq!(
            "versioned".parse::<FileMode>().unwrap(),
            FileMode::Versioned
        );
        assert_eq!("record".parse::<PinMode>().unwrap().to_string(), "record");
        assert!(
            "eager"
                .parse::<PinMode>()
                .unwrap_err()
                .contains("\"eager\"")
        );
    }
}
