//! `cargo xtask docs`: the documentation points at things that exist.
//!
//! In the README, every Markdown file under `docs/` and the chart's, and the Rust sources that
//! hold `--help` texts (the doc comments of the `clap` definitions), it checks:
//!
//! - every relative Markdown link (`[text](path)`, the `#anchor` aside) names a file or folder
//!   of the repository, relative to the file that links;
//! - every repository path written in code spans (`` `kube-adapter/src/http.rs` ``) and in code
//!   blocks — a word that starts with one of the repository's top-level folders and a `/` —
//!   exists, relative to the repository root.
//!
//! Placeholders (`<image>`, `*`, `{...}`, `...`) and paths under `target/` are not checked. No
//! network: links to other sites are left alone. The commands in the README's code blocks
//! ([`shell_commands`]) are checked by the tests of the programs that parse them (`cargo xtask`
//! and `tandem`).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// One reference that names nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The file that holds it, relative to the repository root.
    pub file: PathBuf,
    /// Its line, from 1.
    pub line: usize,
    /// What it names.
    pub target: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: `{}` does not exist",
            self.file.display(),
            self.line,
            self.target
        )
    }
}

/// The files checked: the README, CONTRIBUTING, every Markdown file under `docs/` and the
/// chart, and the sources of the programs' `--help`.
pub fn documents(root: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for name in ["README.md", "CONTRIBUTING.md"] {
        if root.join(name).is_file() {
            files.push(PathBuf::from(name));
        }
    }
    for dir in ["docs", "deploy", "data", "examples"] {
        markdown_under(root, Path::new(dir), &mut files)?;
    }
    for source in [
        "cli/src/lib.rs",
        "cli/src/args.rs",
        "kube-adapter/src/options.rs",
        "kube-common/src/options.rs",
        "volcano-adapter/src/options.rs",
        "slurm-adapter/src/options.rs",
        "profiler/src/options.rs",
        "node/src/options.rs",
        "xtask/src/main.rs",
    ] {
        if root.join(source).is_file() {
            files.push(PathBuf::from(source));
        }
    }
    Ok(files)
}

fn markdown_under(root: &Path, dir: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    let Ok(entries) = fs::read_dir(root.join(dir)) else {
        return Ok(());
    };
    let mut entries: Vec<_> = entries.collect::<Result<_, _>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = dir.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            markdown_under(root, &path, files)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    Ok(())
}

/// Every broken reference in the documents of the repository at `root`.
pub fn check(root: &Path) -> Result<Vec<Broken>> {
    let folders = top_level_folders(root)?;
    let mut broken = Vec::new();
    for file in documents(root)? {
        let text = fs::read_to_string(root.join(&file))
            .with_context(|| format!("cannot read {}", file.display()))?;
        broken.extend(check_text(root, &file, &text, &folders));
    }
    Ok(broken)
}

/// The repository's top-level folders (not hidden, not `target`): a word starting with one of
/// them and a `/` is taken for a repository path.
/// The shell commands of a Markdown text's code blocks, each as its words: a line continued
/// with `\` is joined to the next, and a ` #` comment is dropped. The tests of the programs the
/// README shows read their own commands from it with this, so the README cannot show a
/// subcommand or a flag a program no longer has.
pub fn shell_commands(markdown: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let code = line.split(" #").next().unwrap_or_default().trim_end();
        pending.push_str(code.trim_end_matches('\\'));
        pending.push(' ');
        if code.ends_with('\\') {
            continue;
        }
        let words: Vec<String> = std::mem::take(&mut pending)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if !words.is_empty() {
            commands.push(words);
        }
    }
    commands
}

fn top_level_folders(root: &Path) -> Result<Vec<String>> {
    let mut folders = Vec::new();
    for entry in fs::read_dir(root).with_context(|| format!("cannot list {}", root.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() && !name.starts_with('.') && name != "target" {
            folders.push(name);
        }
    }
    Ok(folders)
}

/// The broken references of `text`, the contents of `file`.
fn check_text(root: &Path, file: &Path, text: &str, folders: &[String]) -> Vec<Broken> {
    let base = file.parent().unwrap_or(Path::new(""));
    let markdown = file.extension().is_some_and(|e| e == "md");
    let mut broken = Vec::new();
    let mut in_block = false;
    for (index, line) in text.lines().enumerate() {
        let mut report = |target: &str| {
            broken.push(Broken {
                file: file.to_path_buf(),
                line: index + 1,
                target: target.to_owned(),
            });
        };
        if markdown && line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if markdown && !in_block {
            for target in links(line) {
                let path = target.split('#').next().unwrap_or_default();
                if !path.is_empty() && !root.join(base).join(path).exists() {
                    report(target);
                }
            }
        }
        let words: Vec<&str> = if in_block {
            line.split_whitespace().collect()
        } else {
            code_spans(line)
        };
        for word in words {
            if let Some(path) = repository_path(word, folders)
                && !root.join(path).exists()
            {
                report(path);
            }
        }
    }
    broken
}

/// The targets of the relative Markdown links on `line`.
fn links(line: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].trim();
        if !target.contains("://") && !target.starts_with('#') && !target.starts_with("mailto:") {
            targets.push(target);
        }
        rest = &rest[end..];
    }
    targets
}

/// The contents of the code spans (`` `...` ``) on `line`, split into words.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`')
        .skip(1)
        .step_by(2)
        .flat_map(str::split_whitespace)
        .collect()
}

/// `word` as a repository path, if it is one: a top-level folder, a `/`, and no placeholder.
fn repository_path<'a>(word: &'a str, folders: &[String]) -> Option<&'a str> {
    let word = word
        .trim_matches(|c: char| matches!(c, '(' | ')' | ',' | ';' | ':' | '"' | '\'' | '`'))
        .trim_end_matches('.');
    let word = word.split('#').next().unwrap_or_default();
    let (first, rest) = word.split_once('/')?;
    if rest.is_empty() && !folders.iter().any(|f| f == first) {
        return None;
    }
    let placeholder = word.contains(['<', '>', '*', '{', '}', '$', '[', ']', '=', '|'])
        || word.contains("...")
        || word.contains("::");
    (folders.iter().any(|f| f == first) && !placeholder).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_commands_join_continued_lines_and_drop_comments() {
        let markdown = "Run:\n\n```bash\ncargo xtask demo   # the demo\ntandem eval pairs \\\n  --objective balanced\n\n```\n\n`tandem outside` a block\n";
        assert_eq!(
            shell_commands(markdown),
            [
                vec!["cargo", "xtask", "demo"],
                vec!["tandem", "eval", "pairs", "--objective", "balanced"],
            ]
        );
    }

    fn repository() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask is in the repository")
            .to_path_buf()
    }

    #[test]
    fn the_repository_documents_name_only_what_exists() {
        let broken = check(&repository()).unwrap();
        let listed: Vec<String> = broken.iter().map(ToString::to_string).collect();
        assert!(
            listed.is_empty(),
            "broken references:\n{}",
            listed.join("\n")
        );
    }

    #[test]
    fn a_broken_link_a_stale_path_and_a_moved_file_are_found() {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir_all(root.path().join("docs")).unwrap();
        fs::create_dir_all(root.path().join("deploy/helm")).unwrap();
        fs::write(root.path().join("docs/GUIDE.md"), "# Guide\n").unwrap();
        fs::write(
            root.path().join("README.md"),
            "See [the guide](docs/GUIDE.md#top) and [the chart](deploy/helm).\n\
             Also [gone](docs/GONE.md), [a site](https://example.com/x) and [here](#top).\n\
             The manifests are in `deploy/kube/10-adapter.yaml`; images in `<dir>/x.tar`.\n\
             ```sh\n\
             helm install tandem deploy/helm -n tandem-system\n\
             kubectl apply -f deploy/volcano/00-rbac.yaml\n\
             ```\n",
        )
        .unwrap();
        let broken: Vec<String> = check(root.path())
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            broken,
            [
                "README.md:2: `docs/GONE.md` does not exist",
                "README.md:3: `deploy/kube/10-adapter.yaml` does not exist",
                "README.md:6: `deploy/volcano/00-rbac.yaml` does not exist",
            ]
        );
    }

    #[test]
    fn only_words_that_start_with_a_top_level_folder_are_paths() {
        let folders = vec!["docs".to_owned(), "deploy".to_owned()];
        assert_eq!(repository_path("docs/A.md.", &folders), Some("docs/A.md"));
        assert_eq!(
            repository_path("(deploy/helm)", &folders),
            Some("deploy/helm")
        );
        assert_eq!(repository_path("nvidia.com/gpu", &folders), None);
        assert_eq!(repository_path("~/.cache/tandem", &folders), None);
        assert_eq!(repository_path("deploy/<image>.tar", &folders), None);
        assert_eq!(repository_path("docs/", &folders), Some("docs/"));
    }
}
