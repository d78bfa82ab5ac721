//! The end-to-end and integration suites, one module each, linked into one test
//! binary (as jj does) so wasmtime and the host are linked once, not per suite.
//! Run one suite with `cargo test -p tether --test runner -- SUITE::`.

#[macro_use]
mod support;

mod abi;
mod aws_credentials;
mod bad_input;
mod behind;
mod bounds;
mod branching;
mod cli_conventions;
mod cli_frame;
mod cli_gaps;
mod commit_rollback;
mod crash;
mod delta;
mod dolt;
mod ducklake;
mod file_cloud;
mod file_plugin;
mod file_s3;
mod git_plugin;
mod git_remote;
mod history_memo;
mod hostile_clone;
mod hostile_plugin;
mod iceberg;
mod icechunk_interop;
mod icechunk_s3;
mod immutable;
mod inspect;
mod install;
mod interrupted;
mod jj_vcs;
mod lance;
mod neon;
mod net_http;
mod net_sql;
mod pinning_loop;
mod plugin_dev;
mod plugin_meta;
mod plugins_lifecycle;
mod progress;
mod pull;
mod races;
mod reclaiming;
mod registry;
mod repair;
mod sandbox;
mod scale;
mod status_fast_path;
mod undo;
