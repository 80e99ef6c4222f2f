//! What a Slurm job is called before it is keyed.
//!
//! A job's identity is `slurm-uid-<uid>/<name>`, where `<name>` is what its user chose with
//! `--tandem-name` (every run of a recurring job shares what was learned about it), or, without
//! one, a name unique to the submission (the job is then new to the engine). The engine and the
//! stored knowledge base see only the identity keyed with the cluster's secret
//! ([`tandem_adapter_core::JobKeys`]); a node profiler keys the same identity to post a job's
//! profile. Slurm's job name, script, command and user name are never read.

/// Longest name accepted.
pub const MAX_NAME: usize = 64;

/// The namespace of a user's jobs.
pub fn namespace(uid: u32) -> String {
    format!("slurm-uid-{uid}")
}

/// Checks a user-chosen name: 1 to [`MAX_NAME`] letters, digits, `.`, `_`, `-` or `~` (the
/// `<workload>~<n>` form names an instance of a recurring workload).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!(
            "a Tandem job name has 1 to {MAX_NAME} characters, this one {}",
            name.len()
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '~')))
    {
        return Err(format!(
            "a Tandem job name has letters, digits, `.`, `_`, `-` or `~`, not {bad:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("resnet50~3").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(&"a".repeat(65)).is_err());
        assert!(check_name("a b").unwrap_err().contains("' '"));
        assert_eq!(namespace(1000), "slurm-uid-1000");
    }
}
