//! `storage-operator`: the one binary of the storage operator stack.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod diagnose;
mod logging;
mod migration;
mod render;
mod run;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let log = logging::init(cli.log_format, &cli.log_level);
    let failure = commands::failure_code(&cli.command);
    match commands::run(cli.command, log) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", report(&error));
            failure
        }
    }
}

/// The error and its causes, each said once: many errors (kube's among them) already include
/// their source in their own message, which `{:#}` would repeat.
fn report(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::report;

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Inner;

    #[test]
    fn each_cause_is_said_once() {
        let error = anyhow::Error::new(Outer(Inner)).context("starting");
        assert_eq!(report(&error), "starting: outer: inner");
    }
}
