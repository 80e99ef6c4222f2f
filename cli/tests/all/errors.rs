//! Errors as the user reads them: the file at fault first, and each cause printed once.

use super::{stderr, tandem};

/// Runs `tandem` with `args`, expects exit code `code`, and returns the error it printed.
fn error_of(args: &[&str], code: i32) -> String {
    let output = tandem(args);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}: {}",
        stderr(&output)
    );
    stderr(&output)
}

#[test]
fn a_missing_catalog_names_the_file_and_its_cause_once() {
    let missing = "/nonexistent/catalog.json";
    for args in [
        &["eval", "pairs", "--catalog", missing][..],
        &["simulate", "--catalog", missing],
        &[
            "trace",
            "synthetic",
            "--catalog",
            missing,
            "--out",
            "/nonexistent/t.csv",
        ],
    ] {
        let printed = error_of(args, 2);
        assert!(
            printed.starts_with("error: /nonexistent/catalog.json: cannot read the file: "),
            "{args:?}: {printed}"
        );
        assert_eq!(
            printed.matches("No such file or directory").count(),
            1,
            "{args:?}: {printed}"
        );
    }
}

#[test]
fn a_report_that_cannot_be_written_says_why_once() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the report should go: the final rename fails.
    let printed = error_of(
        &[
            "simulate",
            "--policies",
            "exclusive-fifo",
            "--report",
            dir.path().to_str().unwrap(),
        ],
        1,
    );
    assert!(printed.contains("cannot write "), "{printed}");
    assert_eq!(printed.matches("Is a directory").count(), 1, "{printed}");
}
