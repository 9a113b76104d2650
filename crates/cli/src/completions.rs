//! `mltrace completions SHELL`: the shell completion script, from the
//! same clap definition as the commands themselves.

use std::io;

use clap::CommandFactory;

/// The shells we promise; clap_complete knows more, but these are tested.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

pub fn run(shell: Shell) -> anyhow::Result<i32> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut cmd = crate::Cli::command();
    clap_complete::generate(shell, &mut cmd, "mltrace", &mut io::stdout().lock());
    Ok(0)
}
