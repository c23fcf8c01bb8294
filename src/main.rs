//! The `ferrofuse` command-line tool.

mod cli;

use std::path::PathBuf;
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
        /// Also time compiling every kernel into an empty cache when the kernel cache is filled.
        #[arg(long)]
        cold: bool,
    },
    /// Fills the kernel cache ahead of the first run (for container images): every kernel of the
    /// GPU's PTX flavour, or with MODEL only those of its plan for the --bind sizes.
    Warmup {
        /// The .onnx file; omitted: every kernel.
        model: Option<PathBuf>,
        /// Size of a symbolic dimension, as NAME=SIZE (repeat for each symbol).
        #[arg(long = "bind", value_name = "NAME=SIZE")]
        binds: Vec<String>,
    },
    /// Summarises an ONNX model: inputs and outputs (with symbolic dims), opsets, operator
    /// histogram, parameter count, and every unsupported operator.
    Inspect {
        /// The .onnx file.
        model: PathBuf,
        /// Also plan the intermediate-memory arena and print its statistics and biggest slots.
        #[arg(long)]
        memory: bool,
        /// Also compile the GPU plan and print it, one line per step (or every node without a
        /// GPU kernel).
        #[arg(long)]
        plan: bool,
        /// Also compile the GPU plan and print what fusion made of the model: the exporter
        /// patterns lifted to one operator (unrolled recurrences as scans, unrolled maps rolled
        /// up) and every step that computes more than one node.
        #[arg(long)]
        fusion: bool,
        /// Size of a symbolic dimension for --memory / --plan / --fusion, as NAME=SIZE (repeat for each symbol).
        #[arg(long = "bind", value_name = "NAME=SIZE")]
        binds: Vec<String>,
        /// exact (f32 accuracy, 3xTF32), tf32, f16 or bf16: the large-tile tensor-core GEMMs with
        /// operands rounded to that type, one product, f32 accumulation (faster; about 1e-3 relative
        /// error in tf32 and f16, 1e-2 in bf16); other kernels stay f32.
        #[arg(long, default_value = "exact", value_name = "exact|tf32|f16|bf16")]
        precision: String,
        /// A GPU session option for --memory / --plan / --fusion as NAME=true|false (repeat for
        /// each), as `run --set` takes it; `fusion=false` switches every fusion pass off.
        #[arg(long = "set", value_name = "NAME=BOOL")]
        options: Vec<String>,
    },
    /// Runs a model (the bundled demo when MODEL is omitted) and prints its outputs.
    Run(cli::run::RunArgs),
    /// Benchmarks a model on the GPU over a sweep of its symbolic sizes: cold start, steady-state
    /// latency percentiles with CUDA graphs on and off and fusion on and off, copies, throughput,
    /// memory and utilisation (NVML), the per-step profile; `--json FILE` keeps every figure.
    Bench(cli::bench::BenchArgs),
}

fn main() -> ExitCode {
    // Output piped into a reader that stops early (`ferrofuse inspect --plan | head -1`): end
    // quietly, as other command-line tools do, instead of panicking on the failed write.
    #[cfg(unix)]
    // SAFETY: restores the default disposition of SIGPIPE before any other thread exists; no
    // handler is installed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = Args::parse();
    match args.command {
        Command::Doctor { device, cold } => cli::doctor::run(device, cold),
        Command::Warmup { model, binds } => report(cli::warmup::run(model.as_deref(), &binds)),
        Command::Inspect { model, memory, plan, fusion, binds, precision, options } => {
            let show = cli::inspect::Show { memory, plan, fusion };
            let options = cli::precision_of(&precision).and_then(|precision| {
                Ok(host::SessionOptions { precision, ..cli::run::session_options(&options)? })
            });
            report(options.and_then(|options| cli::inspect::run(&model, show, &binds, options)))
        }
        Command::Run(args) => report(cli::run::run(args)),
        Command::Bench(args) => report(cli::bench::run(args)),
    }
}

/// Prints an error with its chain of causes and maps it to exit status 1.
fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Library errors often quote their source already; print a cause only when it adds text.
            let mut line = String::new();
            for cause in e.chain().map(|c| c.to_string()) {
                if !line.contains(&cause) {
                    line = if line.is_empty() { cause } else { format!("{line}: {cause}") };
                }
            }
            eprintln!("error: {line}");
            ExitCode::FAILURE
        }
    }
}
