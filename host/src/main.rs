//! The `tether` binary: everything lives in the library (`tether::cli`).

fn main() -> std::process::ExitCode {
    tether::cli::main()
}
