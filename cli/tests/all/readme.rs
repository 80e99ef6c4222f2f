//! Every `tandem` command in the README's code blocks parses: the README cannot show a
//! subcommand or a flag the CLI no longer has.

use clap::Parser as _;
use tandem_cli::Cli;

/// The `tandem` commands of the README's code blocks, as words: `tandem ...` lines and the
/// arguments after `--` of `cargo run ... -p tandem-cli -- ...` (a line continued with `\`
/// joined to the next; a `#` comment dropped).
fn readme_commands() -> Vec<Vec<String>> {
    let readme = include_str!("../../../README.md");
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in readme.lines() {
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
        let command = std::mem::take(&mut pending);
        let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
        if words.first().is_some_and(|w| w == "tandem") {
            commands.push(words[1..].to_vec());
        } else if words.starts_with(&["cargo".to_owned(), "run".to_owned()])
            && words.iter().any(|w| w == "tandem-cli")
            && let Some(at) = words.iter().position(|w| w == "--")
        {
            commands.push(words[at + 1..].to_vec());
        }
    }
    commands
}

#[test]
fn every_tandem_command_of_the_readme_parses() {
    let commands = readme_commands();
    assert!(commands.len() >= 3, "{commands:?}");
    for words in commands {
        let parsed =
            Cli::try_parse_from(std::iter::once("tandem".to_owned()).chain(words.iter().cloned()));
        // `--version` and `--help` end parsing with their own output, not an error.
        let ok = match &parsed {
            Ok(_) => true,
            Err(error) => matches!(
                error.kind(),
                clap::error::ErrorKind::DisplayVersion | clap::error::ErrorKind::DisplayHelp
            ),
        };
        assert!(ok, "`tandem {}`: {parsed:?}", words.join(" "));
    }
}
