//! The engine: what each command decides, one module per operation. The CLI
//! calls in here and prints what comes back; nothing here prints.
//!
//! Two layers, and imports go down only:
//!
//! - **Services** ([`SERVICES`]): the opened dataset ([`repo`]), history
//!   ([`history`]), forking and branch heads ([`fork`]), plan precondition
//!   checks (`checker`), the live checkouts ([`checkouts`]), what `verify`
//!   and `repair` share ([`checks`]), and the errors ([`error`]). A service
//!   imports other services and the lower modules (`model`, `vcs`, `plan`,
//!   `oplog`, `plugin`), never a command.
//! - **Commands** (every other module): one per operation, plus [`facade`],
//!   the `impl Repo` methods that run commands for a library caller in one
//!   call. A command may use services and other commands (`drop` plans a
//!   `new` and a `gc`).
//!
//! The unit test below reads the services' sources and fails when one names
//! a command module, or when a module is added without being placed.

// Services.
mod checker;
pub mod checkouts;
pub mod checks;
pub mod error;
pub mod fork;
pub mod history;
pub mod repo;

// Commands.
pub mod abandon;
pub mod add;
pub mod backends;
pub mod commit;
pub mod diff;
pub mod drop;
pub mod export;
pub mod facade;
pub mod forget_workspace;
pub mod gc;
pub mod import;
pub mod init;
pub mod log;
pub mod new;
pub mod open;
pub mod ops;
pub mod plugin_cmd;
pub mod promote;
pub mod publish;
pub mod pull;
pub mod recover;
pub mod remove;
pub mod repair;
pub mod restore;
pub mod set;
pub mod snapshot;
pub mod status;
pub mod undo;
pub mod verify;

pub use error::{Result, TetherError};
pub use repo::Repo;

/// The service modules: the layer the commands build on, which imports no
/// command.
pub const SERVICES: [&str; 7] = [
    "checker",
    "checkouts",
    "checks",
    "error",
    "fork",
    "history",
    "repo",
];

#[cfg(test)]
mod layering {
    use std::collections::BTreeSet;

    use super::SERVICES;

    /// Each service's source, read when the test is built.
    const SOURCES: [(&str, &str); 7] = [
        ("checker", include_str!("checker.rs")),
        ("checkouts", include_str!("checkouts.rs")),
        ("checks", include_str!("checks.rs")),
        ("error", include_str!("error.rs")),
        ("fork", include_str!("fork.rs")),
        ("history", include_str!("history.rs")),
        ("repo", include_str!("repo.rs")),
    ];

    /// The command modules: every other module of the engine.
    const COMMANDS: [&str; 29] = [
        "abandon",
        "add",
        "backends",
        "commit",
        "diff",
        "drop",
        "export",
        "facade",
        "forget_workspace",
        "gc",
        "import",
        "init",
        "log",
        "new",
        "open",
        "ops",
        "plugin_cmd",
        "promote",
        "publish",
        "pull",
        "recover",
        "remove",
        "repair",
        "restore",
        "set",
        "snapshot",
        "status",
        "undo",
        "verify",
    ];

    /// Every engine module, from the directory.
    fn modules() -> BTreeSet<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
        std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".rs")
                    .filter(|m| *m != "mod")
                    .map(str::to_string)
            })
            .collect()
    }

    /// The engine modules a source names: the first segment after each
    /// `super::` or `crate::engine::`, and each one a `super::{a, b::c}`
    /// group opens with.
    fn named_modules(source: &str) -> BTreeSet<String> {
        let mut named = BTreeSet::new();
        for prefix in ["super::", "crate::engine::"] {
            for (at, _) in source.match_indices(prefix) {
                let rest = &source[at + prefix.len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for item in group.split(',') {
                        let first = item.trim().split("::").next().unwrap_or_default();
                        named.insert(first.trim().to_string());
                    }
                } else {
                    let end = rest
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    named.insert(rest[..end].to_string());
                }
            }
        }
        named
    }

    #[test]
    fn no_service_imports_a_command() {
        let modules = modules();
        let services: BTreeSet<String> = SERVICES.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            SOURCES
                .iter()
                .map(|(m, _)| m.to_string())
                .collect::<BTreeSet<_>>(),
            services,
            "SOURCES reads every service"
        );
        let commands: BTreeSet<String> = COMMANDS.iter().map(|s| s.to_string()).collect();
        let placed: BTreeSet<String> = services.union(&commands).cloned().collect();
        assert_eq!(
            modules, placed,
            "every engine module is a service or a command (SERVICES, COMMANDS)"
        );
        assert!(services.is_disjoint(&commands));
        for (service, source) in SOURCES {
            let bad: Vec<String> = named_modules(source)
                .into_iter()
                .filter(|m| commands.contains(m))
                .collect();
            assert!(
                bad.is_empty(),
                "service module engine/{service}.rs names command module(s) {bad:?}: \
                 move what it needs down into a service"
            );
        }
    }

    #[test]
    fn the_check_sees_imports_in_every_form() {
        let named = named_modules(
            "use super::gc::{self, X};\nuse super::{fork, open::Opened};\n\
             crate::engine::verify::pin_ref(m);\nsuper::add::add(self, req)",
        );
        for m in ["gc", "fork", "open", "verify", "add"] {
            assert!(named.contains(m), "{m} in {named:?}");
        }
    }
}
