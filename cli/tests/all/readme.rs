//! Every `tandem` command in the README's code blocks parses: the README cannot show a
//! subcommand or a flag the CLI no longer has.

use clap::Parser as _;
use tandem_cli::Cli;

/// The `tandem` commands of the README's code blocks, as words: `tandem ...` lines and the
/// arguments after `--` of `cargo run ... -p tandem-cli -- ...`.
fn readme_commands() -> Vec<Vec<String>> {
    tandem_xtask::docs::shell_commands(include_str!("../../../README.md"))
        .into_iter()
        .filter_map(|words| {
            if words.first().is_some_and(|w| w == "tandem") {
                Some(words[1..].to_vec())
            } else if words.starts_with(&["cargo".to_owned(), "run".to_owned()])
                && words.iter().any(|w| w == "tandem-cli")
            {
                let at = words.iter().position(|w| w == "--")?;
                Some(words[at + 1..].to_vec())
            } else {
                None
            }
        })
        .collect()
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
