//! The `tether` binary: everything lives in the library (`tether::cli`).

/// mimalloc rather than the system allocator: a command allocates most of
/// what it ever holds in its first milliseconds (a history of manifests, a
/// fan-out's replies on every worker thread), and glibc's per-thread arenas
/// met each with fresh pages, faulted in one at a time. `verify
/// --all-history` on 200 commits took 1,639 page faults with glibc and 666
/// with mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tether::cli::main()
}
