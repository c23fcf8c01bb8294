//! The `ferrofuse` command-line tool.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// ferrofuse: ONNX inference on NVIDIA GPUs, written entirely in Rust.
#[derive(Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Checks the driver and device, loads the kernels and runs a quick GPU self-test against the
    /// CPU reference. Exits non-zero when there is no usable GPU or a check fails.
    Doctor {
        /// CUDA device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    match args.command {
        Command::Doctor { device } => cli::doctor::run(device),
    }
}
