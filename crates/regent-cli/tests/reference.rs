//! The generated reference cannot drift: `regent __reference` writes the
//! man pages, the completion scripts and the command and store references
//! afresh, and every one must equal the file committed under `docs/` (and
//! nothing generated may be committed that the code no longer writes).
//! `scripts/reference` writes them again after a change.
//!
//! The files also work: groff renders every man page without a warning
//! (UTF-8 through preconv, as `man` reads them; lines it cannot justify
//! are typesetting, not errors),
//! and bash's completion of `regent ru` is `run`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::REGENT;

/// The repository's `docs/`.
fn docs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// The directories under `docs/` that hold generated files only.
const GENERATED_DIRS: [&str; 2] = ["man", "completions"];

/// Writes the reference into a fresh directory; returns it and the files'
/// paths relative to it.
fn generate() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(REGENT)
        .arg("__reference")
        .arg(dir.path())
        .output()
        .expect("run regent __reference");
    assert!(
        out.status.success(),
        "regent __reference failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let files = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| Path::new(l).strip_prefix(dir.path()).unwrap().to_owned())
        .collect();
    (dir, files)
}

#[test]
fn the_committed_reference_is_what_the_code_generates() {
    let (dir, files) = generate();
    let mut stale = Vec::new();
    for file in &files {
        let fresh = std::fs::read(dir.path().join(file)).unwrap();
        let committed = std::fs::read(docs().join(file)).unwrap_or_default();
        if fresh != committed {
            stale.push(file.display().to_string());
        }
    }
    // A page of a command that is gone, or a script of a shell dropped.
    let written: BTreeSet<&Path> = files.iter().map(PathBuf::as_path).collect();
    let mut extra = Vec::new();
    for sub in GENERATED_DIRS {
        for entry in std::fs::read_dir(docs().join(sub)).unwrap() {
            let path = Path::new(sub).join(entry.unwrap().file_name());
            if !written.contains(path.as_path()) {
                extra.push(path.display().to_string());
            }
        }
    }
    assert!(
        stale.is_empty() && extra.is_empty(),
        "the reference under docs/ is not what the code generates: run scripts/reference \
         and commit the result.\n  differ or missing: {stale:?}\n  no longer generated: {extra:?}"
    );
}

#[test]
fn regent_completions_prints_the_committed_scripts() {
    for (shell, file) in [
        ("bash", "regent.bash"),
        ("zsh", "_regent"),
        ("fish", "regent.fish"),
    ] {
        let out = Command::new(REGENT)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let (dir, _) = generate();
        let generated = std::fs::read(dir.path().join("completions").join(file)).unwrap();
        assert_eq!(out.stdout, generated, "{shell}");
    }
    let out = Command::new(REGENT)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn bash_completes_commands_and_store_flags() {
    let (dir, _) = generate();
    let script = dir.path().join("completions/regent.bash");
    let complete = |words: &str| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}'; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
                 _regent regent \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .expect("bash");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let got = complete("regent ru");
    assert_eq!(got.trim(), "run", "{got}");
    let got = complete("regent run --redis-ca");
    assert_eq!(got.trim(), "--redis-cacert", "{got}");
}

#[test]
fn groff_renders_every_man_page_without_a_warning() {
    let (dir, files) = generate();
    let pages: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "1"))
        .collect();
    assert!(pages.len() >= 9, "{pages:?}");
    for page in pages {
        let out = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-Wbreak"])
            .arg(dir.path().join(page))
            .output()
            .unwrap_or_else(|e| {
                panic!("groff ({e}): install it with scripts/install-engines (groff-base)")
            });
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.trim().is_empty(),
            "{}: {stderr}",
            page.display()
        );
        // grotty's bold and underline are overstrikes: `N\bN`.
        let mut text = String::new();
        for c in String::from_utf8_lossy(&out.stdout).chars() {
            if c == '\u{8}' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        let name = page.file_stem().unwrap().to_string_lossy();
        assert!(text.contains("NAME"), "{}: {text}", page.display());
        assert!(
            text.contains(&*name),
            "{} names itself: {text}",
            page.display()
        );
    }
}
