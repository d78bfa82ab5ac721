//! The `tether` binary: everything lives in the library (`tether::cli`).

/// mimalloc rather than glibc's allocator: a command allocates most of what
/// it ever holds in its first milliseconds (a history of manifests, the
/// fan-out's replies on every worker thread) and frees it all at the end,
/// which mimalloc does faster. `verify --all-history` on 200 commits x 5
/// objects went from 21.1 to 19.3-19.7 ms and a cached `status` stayed at
/// about 4 ms (`perf stat -r 40`). Transparent huge pages are off (the
/// `no_thp` feature): with them mimalloc took a third of the page faults but
/// zeroed whole 2 MiB pages, which cost a short command like `status` more
/// than it saved.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tether::cli::main()
}
