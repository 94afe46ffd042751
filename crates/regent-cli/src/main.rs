//! The `regent` binary: everything is in the library (`regent_cli`), so
//! that its tests and the benchmark harness use the same code.

fn main() -> std::process::ExitCode {
    regent_cli::main()
}
