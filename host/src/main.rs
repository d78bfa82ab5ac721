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
    let code = tether::cli::main();
    // mimalloc's exit handler collects its heaps and returns their freed
    // pages to the system one `madvise` at a time: pages the kernel takes
    // back with the whole process a moment later. That purge was a twentieth
    // of a cached `status` (`perf record`); a negative delay turns it off.
    // SAFETY: setting an option is safe at any time; this one is only read
    // when mimalloc decides whether to purge.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    code
}

/// `mi_option_purge_delay`, which the bindings leave unnamed (they name only
/// the options they call stable and pass the rest by number, as mimalloc's
/// documentation does): the sixteenth option of v2 and v3 alike.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_named() {
        // Its default (1000 ms in v3, 10 in v2) between its neighbours',
        // `eager_commit_delay` (1) and `use_numa_nodes` (0): a renumbered
        // enum would not read so unless the environment set them.
        let set = ["PURGE_DELAY", "EAGER_COMMIT_DELAY", "USE_NUMA_NODES"];
        if set
            .iter()
            .any(|o| std::env::var_os(format!("MIMALLOC_{o}")).is_some())
        {
            return;
        }
        // SAFETY: reading an option is safe at any time.
        let read = |o| unsafe { libmimalloc_sys::mi_option_get(o) };
        let at = super::MI_OPTION_PURGE_DELAY;
        let (before, it, after) = (read(at - 1), read(at), read(at + 1));
        assert!(
            (before, after) == (1, 0) && matches!(it, 10 | 1000),
            "options {before}, {it}, {after}"
        );
    }
}
