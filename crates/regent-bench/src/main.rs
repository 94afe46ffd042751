//! The `regent-bench` binary: everything is in the library
//! (`regent_bench`), whose crate docs say what it measures and how.

fn main() -> std::process::ExitCode {
    regent_bench::main()
}
