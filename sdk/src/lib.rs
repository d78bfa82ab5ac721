//! # tether-sdk: write a tether storage backend
//!
//! A tether backend is a WebAssembly component (`wasm32-wasip2`) implementing
//! the `tether:backend@0.1.5` contract in `wit/`. This crate turns that
//! contract into Rust: implement [`Backend`] (and, for the conformance suite,
//! [`Harness`]), then call [`export!`] once.
//!
//! - [`Backend`]: every protocol member, with the spec's defaults; the
//!   backend's own [`Backend::Locator`] type, parsed once per call by the glue
//!   (a bad locator is refused as `invalid`); states and configs are
//!   [`serde_json::Value`]s.
//! - [`kit`]: the protocol around a format, written once: conditional ref
//!   moves with retries ([`kit::move_ref`]), pin generations
//!   ([`kit::pin_slot`]), `verify`'s decision table ([`kit::PinCheck`]), the
//!   owner guard of `delete_store` ([`kit::guard_delete`]), RFC 3339 times and
//!   random scratch names.
//! - [`contract`]: what the host computes too (canonical JSON, content
//!   states, pin ids, listing names, ref names, [`Capability`]), from the
//!   `tether-contract` crate the host itself uses.
//! - [`Error`]: the contract's error cases ([`Error::RefMoved`],
//!   [`Error::MergeConflict`], ...).
//! - [`json`]: [`canonical_json`] and typed parsing ([`locator`], [`state`]).
//! - [`expected`]: [`check_expected`] for conditional ref moves.
//! - [`diff`]: the [`ObjectDiff`] builder (exact counts, capped entries).
//! - [`storage`]: [`storage::Bucket`], the host's object storage with JSON
//!   and conditional-put helpers.
//! - [`tree`]: local directories walked, stat'ed and hashed natively by the
//!   host (locator keys named in `tree_keys`).
//! - [`http`]: a blocking `wasi:http` client for the origins the host grants
//!   the object (`describe-net`'s HTTP grants); the host adds credentials.
//! - [`sql`]: databases the host connects to for the plugin
//!   ([`sql::Connection`], since 0.1.3; keys named by [`DescribeNet`]).
//! - [`log`]: log lines to the host ([`info!`], [`debug!`], ...).
//! - [`meta`]: the plugin's name, version and authors (`describe-meta`),
//!   from its Cargo.toml.
//! - [`bindings`]: the raw generated bindings, when a wrapper is missing.
//!
//! ## A small backend
//!
//! A backend whose system is one JSON object `state.json` in a bucket (its
//! `root` locator key), pinned by copying it to `pins/<id>.json`:
//!
//! ```no_run
//! use serde::Deserialize;
//! use serde_json::{Value, json};
//! use tether_sdk::storage::{Bucket, PutMode, StorageError};
//! use tether_sdk::{Backend, Descriptor, Error, PinRef, Result, cap, descriptor};
//!
//! #[derive(Deserialize)]
//! struct Locator {
//!     root: String,
//! }
//!
//! #[derive(Default)]
//! struct OneFile;
//!
//! impl Backend for OneFile {
//!     type Locator = Locator;
//!
//!     fn describe(&self) -> Descriptor {
//!         Descriptor {
//!             storage_keys: vec!["root".into()],
//!             ..descriptor("one-file", &[cap::FINGERPRINT, cap::PIN, cap::ATOMIC_REF])
//!         }
//!     }
//!
//!     fn identity(&self, loc: &Locator) -> Result<Value> {
//!         Ok(json!({ "root": loc.root }))
//!     }
//!
//!     fn fingerprint(&self, loc: &Locator, _working_ref: Option<&str>) -> Result<Value> {
//!         let bucket = Bucket::open(&loc.root)?;
//!         let meta = bucket.head("state.json")?.ok_or_else(|| Error::not_found("no state.json"))?;
//!         Ok(json!({ "etag": meta.etag }))
//!     }
//!
//!     fn pin(&self, loc: &Locator, _state: &Value, pin_id: &str) -> Result<PinRef> {
//!         let bucket = Bucket::open(&loc.root)?;
//!         let key = format!("pins/{pin_id}.json");
//!         // A real backend would also compare the copy with `state`.
//!         let created = match bucket.copy("state.json", &key, false) {
//!             Ok(_) => true,
//!             Err(StorageError::AlreadyExists(_)) => false,
//!             Err(e) => return Err(e.into()),
//!         };
//!         tether_sdk::info!("pinned {pin_id} (created: {created})");
//!         Ok(PinRef { id: pin_id.into(), ref_: format!("tether.{pin_id}"), created })
//!     }
//! }
//!
//! tether_sdk::export!(OneFile);
//! # fn main() {}
//! ```
//!
//! Every member not written returns a capability error (or the spec's
//! default), so the plugin declares only what it implements.
//!
//! ## Exporting
//!
//! - `tether_sdk::export!(MyBackend)` exports the `backend` interface (world
//!   `backend-plugin`); the component has no `harness` export.
//! - `tether_sdk::export!(MyBackend, harness: MyHarness)` also exports the
//!   conformance `harness` (world `backend-plugin-with-harness`).
//! - Either form may end with a list of optional interfaces the backend
//!   implements: `export!(MyBackend, [describe_ext])`,
//!   `export!(MyBackend, harness: MyHarness, [describe_ext, describe_fs])`.
//!   `describe_ext` (since 0.1.1) is answered by [`DescribeExt`],
//!   `describe_fs` (since 0.1.2) by [`DescribeFs`], `describe_net` (since
//!   0.1.3) by [`DescribeNet`]. An interface left out is
//!   not exported, and the host treats its answers as not given, as for a
//!   plugin built before it existed.
//! - Every form also exports `describe-meta` (since 0.1.5): the plugin's
//!   name, version, authors, description, homepage and license from its
//!   crate's Cargo.toml, plus what [`Backend::meta`] adds (what it was
//!   tested against). See [`meta`].
//!
//! Call it once, in the crate that builds the component (`crate-type =
//! ["cdylib"]`). A library that other plugins wrap should put its call behind a
//! cargo feature, as `tether-plugin-memory` does.
//!
//! Build with `cargo build --release --target wasm32-wasip2`; the `.wasm` is a
//! component. `wasm-tools component wit X.wasm` shows what it imports and
//! exports. Panic locations carry source paths (this crate's included), so
//! builds meant to be reproducible remap them (`--remap-path-prefix` for the
//! repository root and the cargo home), as tether's own build does.

// Lets the generated code and `export!` name this crate as `tether_sdk` from
// inside it too.
extern crate self as tether_sdk;

pub mod backend;
pub mod diff;
pub mod error;
pub mod expected;
pub mod harness;
pub mod http;
pub mod json;
pub mod kit;
pub mod log;
pub mod meta;
pub mod sql;
pub mod storage;
pub mod tree;

mod glue;

/// Bindings generated from `wit/` for world `backend-plugin`: the imported
/// `storage`, `tree`, `log` and `sql` interfaces, the shared `types`, and the `backend`
/// export. Plugins normally use the wrappers instead.
pub mod bindings {
    wit_bindgen::generate!({
        world: "backend-plugin",
        path: "wit",
        // The export macro is invoked by plugins (through `export!`), and only
        // its invocation links the world's exports into a component. So a plugin
        // that never names the harness world never gets a harness export.
        pub_export_macro: true,
        export_macro_name: "export_backend_plugin",
        default_bindings_module: "tether_sdk::bindings",
        additional_derives: [PartialEq, Eq],
        // `sql`'s cells hold floats, which are not `Eq`.
        additional_derives_ignore: ["value", "rows"],
    });
}

/// Bindings for the `harness` export alone, reusing [`bindings`]' types.
///
/// `backend-plugin-with-harness` cannot be generated next to `backend-plugin`
/// in one crate (both would define the `backend` export glue), so this module
/// generates a helper world that exports only `harness`. `export!(.., harness:
/// ..)` invokes both worlds' export macros, and wit-component merges the two
/// into `backend-plugin-with-harness`.
#[doc(hidden)]
pub mod harness_bindings {
    wit_bindgen::generate!({
        path: "wit",
        inline: "
            package tether-sdk:glue;
            world harness-only {
                export tether:backend/harness@0.1.5;
            }
        ",
        world: "tether-sdk:glue/harness-only",
        with: {
            "tether:backend/types@0.1.5": crate::bindings::tether::backend::types,
        },
        pub_export_macro: true,
        export_macro_name: "export_harness_only",
        default_bindings_module: "tether_sdk::harness_bindings",
    });
}

/// Bindings for the optional `describe-ext` export alone (since 0.1.1), in a
/// helper world for the same reason as [`harness_bindings`]: only plugins whose
/// `export!` names `describe_ext` invoke its export macro, so the others stay
/// without the export.
#[doc(hidden)]
pub mod describe_ext_bindings {
    wit_bindgen::generate!({
        path: "wit",
        inline: "
            package tether-sdk:glue-ext;
            world describe-ext-only {
                export tether:backend/describe-ext@0.1.5;
            }
        ",
        world: "tether-sdk:glue-ext/describe-ext-only",
        pub_export_macro: true,
        export_macro_name: "export_describe_ext_only",
        default_bindings_module: "tether_sdk::describe_ext_bindings",
    });
}

/// Bindings for the optional `describe-fs` export alone (since 0.1.2), in a
/// helper world like [`describe_ext_bindings`].
#[doc(hidden)]
pub mod describe_fs_bindings {
    wit_bindgen::generate!({
        path: "wit",
        inline: "
            package tether-sdk:glue-fs;
            world describe-fs-only {
                export tether:backend/describe-fs@0.1.5;
            }
        ",
        world: "tether-sdk:glue-fs/describe-fs-only",
        pub_export_macro: true,
        export_macro_name: "export_describe_fs_only",
        default_bindings_module: "tether_sdk::describe_fs_bindings",
    });
}

/// Bindings for the optional `describe-net` export alone (since 0.1.3), in a
/// helper world like [`describe_ext_bindings`].
#[doc(hidden)]
pub mod describe_net_bindings {
    wit_bindgen::generate!({
        path: "../wit",
        inline: "
            package tether-sdk:glue-net;
            world describe-net-only {
                export tether:backend/describe-net@0.1.5;
            }
        ",
        world: "tether-sdk:glue-net/describe-net-only",
        pub_export_macro: true,
        export_macro_name: "export_describe_net_only",
        default_bindings_module: "tether_sdk::describe_net_bindings",
        additional_derives: [PartialEq, Eq],
    });
}

/// Bindings for the `describe-meta` export alone (since 0.1.5), in a helper
/// world like [`describe_ext_bindings`]. Unlike the others, [`export!`] always
/// exports it, filled from the plugin crate's Cargo metadata ([`meta`]).
#[doc(hidden)]
pub mod describe_meta_bindings {
    wit_bindgen::generate!({
        path: "wit",
        inline: "
            package tether-sdk:glue-meta;
            world describe-meta-only {
                export tether:backend/describe-meta@0.1.5;
            }
        ",
        world: "tether-sdk:glue-meta/describe-meta-only",
        pub_export_macro: true,
        export_macro_name: "export_describe_meta_only",
        default_bindings_module: "tether_sdk::describe_meta_bindings",
    });
}

/// Bindings for the `verify-many` export alone (since 0.1.5), in a helper
/// world like [`harness_bindings`], reusing [`bindings`]' types. Unlike the
/// `describe-*` interfaces every SDK plugin exports it: its default answers
/// with [`Backend::verify`] item by item.
#[doc(hidden)]
pub mod verify_many_bindings {
    wit_bindgen::generate!({
        path: "wit",
        inline: "
            package tether-sdk:glue-verify;
            world verify-many-only {
                export tether:backend/verify-many@0.1.5;
            }
        ",
        world: "tether-sdk:glue-verify/verify-many-only",
        with: {
            "tether:backend/types@0.1.5": crate::bindings::tether::backend::types,
        },
        pub_export_macro: true,
        export_macro_name: "export_verify_many_only",
        default_bindings_module: "tether_sdk::verify_many_bindings",
    });
}

pub use backend::{
    ABI_VERSION, Backend, Capability, DescribeExt, DescribeFs, DescribeNet, Descriptor, Expected,
    Handle, HistoryEntry, HttpGrant, PIN_REF_PREFIX, PinRef, Target, VerifyItem, VerifyReport,
    VerifyStatus, WORKING_REF_PREFIX, cap, descriptor,
};
pub use diff::{Change, MAX_DIFF_ENTRIES, ObjectDiff};
pub use error::{Error, Result};
pub use expected::{check_expected, content_state, same_content};
pub use harness::Harness;
pub use json::{canonical_json, locator, state};
pub use meta::Meta;
/// What the host computes too: canonical JSON, content states, pin ids,
/// listing names, ref names and generations, capability names (the
/// `tether-contract` crate, shared with the host and the conformance suite).
pub use tether_contract as contract;

/// What [`export!`] expands to; not API.
#[doc(hidden)]
pub mod __private {
    pub use crate::glue::{Exported, NoHarness};
}

/// Export a backend (and optionally a conformance harness and optional
/// interfaces) from this component.
///
/// ```text
/// tether_sdk::export!(MyBackend);                      // world backend-plugin
/// tether_sdk::export!(MyBackend, harness: MyHarness);  // world backend-plugin-with-harness
/// // Either, plus optional interfaces (MyBackend: DescribeExt, DescribeFs, DescribeNet):
/// tether_sdk::export!(MyBackend, [describe_ext]);
/// tether_sdk::export!(MyBackend, harness: MyHarness, [describe_ext, describe_fs]);
/// ```
///
/// A new optional interface is one more name the list accepts (an arm of
/// `__export_optional!`), not more arms here.
#[macro_export]
macro_rules! export {
    ($backend:ty $(, harness: $harness:ty)? $(, [$($optional:ident),* $(,)?])? $(,)?) => {
        #[doc(hidden)]
        type __TetherExported = $crate::__private::Exported<$backend $(, $harness)?>;
        $crate::bindings::export_backend_plugin!(__TetherExported with_types_in $crate::bindings);
        // Every plugin: its default is `verify` item by item.
        $crate::verify_many_bindings::export_verify_many_only!(
            __TetherExported with_types_in $crate::verify_many_bindings
        );
        $( $crate::__export_harness!($harness); )?
        $($( $crate::__export_optional!($optional); )*)?
        $crate::__export_meta!($backend);
    };
}

/// `export!`'s `describe-meta` (since 0.1.5), exported from every plugin:
/// expanded in the plugin crate, so `env!` reads that crate's Cargo
/// metadata, which the backend may amend ([`Backend::meta`]); not API.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_meta {
    ($backend:ty) => {
        #[doc(hidden)]
        struct __TetherMeta;
        impl $crate::describe_meta_bindings::exports::tether::backend::describe_meta::Guest
            for __TetherMeta
        {
            fn meta()
            -> $crate::describe_meta_bindings::exports::tether::backend::describe_meta::PluginMeta
            {
                $crate::meta::answer::<$backend>($crate::meta::from_cargo(
                    ::core::env!("CARGO_PKG_NAME"),
                    ::core::env!("CARGO_PKG_VERSION"),
                    ::core::env!("CARGO_PKG_AUTHORS"),
                    ::core::env!("CARGO_PKG_DESCRIPTION"),
                    ::core::env!("CARGO_PKG_HOMEPAGE"),
                    ::core::env!("CARGO_PKG_REPOSITORY"),
                    ::core::env!("CARGO_PKG_LICENSE"),
                ))
            }
        }
        $crate::describe_meta_bindings::export_describe_meta_only!(
            __TetherMeta with_types_in $crate::describe_meta_bindings
        );
    };
}

/// `export!`'s harness: `backend` comes from one world, `harness` from the
/// other (see `harness_bindings`); not API.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_harness {
    ($harness:ty) => {
        $crate::harness_bindings::export_harness_only!(
            __TetherExported with_types_in $crate::harness_bindings
        );
    };
}

/// `export!`'s optional interfaces, one arm each; not API.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_optional {
    (describe_ext) => {
        $crate::describe_ext_bindings::export_describe_ext_only!(
            __TetherExported with_types_in $crate::describe_ext_bindings
        );
    };
    (describe_fs) => {
        $crate::describe_fs_bindings::export_describe_fs_only!(
            __TetherExported with_types_in $crate::describe_fs_bindings
        );
    };
    (describe_net) => {
        $crate::describe_net_bindings::export_describe_net_only!(
            __TetherExported with_types_in $crate::describe_net_bindings
        );
    };
}
