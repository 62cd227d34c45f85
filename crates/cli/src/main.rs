//! `storage-operator`: the one binary of the storage operator stack.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod commands;
mod logging;
mod migration;
mod render;
mod run;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let log = logging::init(cli.log_format, &cli.log_level);
    match commands::run(cli.command, log) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
