fn main() -> std::process::ExitCode {
    tether::cli::main()
}
