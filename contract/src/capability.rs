//! The capability names: one enum, one spelling.
//!
//! Capabilities cross the WIT boundary as `list<string>` so the set can grow
//! without breaking old plugins; these are the names the contract defines,
//! spelled as the spec spells them (`spec/13-writing-a-backend.md`,
//! `Capability.FINGERPRINT`): upper case with underscores. `tether backends
//! --json`, the SDK's descriptors and the conformance report all print
//! [`Capability::as_str`]. A name this enum lacks (from a newer plugin) is
//! kept as a string by whoever receives it, and parses to `None` here.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A capability a backend declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Capability {
    Fingerprint,
    Addressable,
    Pin,
    Fork,
    CheapFingerprint,
    RetentionBound,
    NeedsQuiescence,
    AtomicRef,
    ConditionalRef,
    Diff,
    History,
    BranchIsStorage,
    Promote,
    Merge,
    Create,
}

impl Capability {
    /// Every capability the contract defines, in the spec's order.
    pub const ALL: [Capability; 15] = [
        Capability::Fingerprint,
        Capability::Addressable,
        Capability::Pin,
        Capability::Fork,
        Capability::CheapFingerprint,
        Capability::RetentionBound,
        Capability::NeedsQuiescence,
        Capability::AtomicRef,
        Capability::ConditionalRef,
        Capability::Diff,
        Capability::History,
        Capability::BranchIsStorage,
        Capability::Promote,
        Capability::Merge,
        Capability::Create,
    ];

    /// The name as it crosses the boundary and is printed (`CONDITIONAL_REF`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Capability::Fingerprint => "FINGERPRINT",
            Capability::Addressable => "ADDRESSABLE",
            Capability::Pin => "PIN",
            Capability::Fork => "FORK",
            Capability::CheapFingerprint => "CHEAP_FINGERPRINT",
            Capability::RetentionBound => "RETENTION_BOUND",
            Capability::NeedsQuiescence => "NEEDS_QUIESCENCE",
            Capability::AtomicRef => "ATOMIC_REF",
            Capability::ConditionalRef => "CONDITIONAL_REF",
            Capability::Diff => "DIFF",
            Capability::History => "HISTORY",
            Capability::BranchIsStorage => "BRANCH_IS_STORAGE",
            Capability::Promote => "PROMOTE",
            Capability::Merge => "MERGE",
            Capability::Create => "CREATE",
        }
    }

    /// The capability named exactly `name`; `None` for a name this contract
    /// does not define.
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The names of `caps`, as a descriptor lists them.
    pub fn names(caps: &[Capability]) -> Vec<String> {
        caps.iter().map(|c| c.as_str().to_owned()).collect()
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for Capability {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// An unknown capability name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCapability(pub String);

impl fmt::Display for UnknownCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown capability {:?}", self.0)
    }
}

impl std::error::Error for UnknownCapability {}

impl FromStr for Capability {
    type Err = UnknownCapability;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::from_name(s).ok_or_else(|| UnknownCapability(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_for_names_serde_and_display() {
        for c in Capability::ALL {
            assert_eq!(c.to_string(), c.as_str());
            assert_eq!(
                serde_json::to_string(&c).unwrap(),
                format!("\"{}\"", c.as_str())
            );
            assert_eq!(c.as_str().parse::<Capability>(), Ok(c));
        }
        assert_eq!(Capability::ConditionalRef.as_str(), "CONDITIONAL_REF");
        assert!(Capability::from_name("conditional_ref").is_none());
        assert!("TELEPORT".parse::<Capability>().is_err());
    }
}
