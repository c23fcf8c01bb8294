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
        /// Size of a symbolic dimension for --memory / --plan, as NAME=SIZE (repeat for each symbol).
        #[arg(long = "bind", value_name = "NAME=SIZE")]
        binds: Vec<String>,
        /// How the tensor-core GEMMs form their products: exact (f32 accuracy, 3xTF32) or tf32
        /// (operands rounded to TF32, one product: faster, about 1e-3 relative error).
        #[arg(long, default_value = "exact", value_name = "exact|tf32")]
        precision: String,
    },
    /// Runs a model (the bundled demo when MODEL is omitted) and prints its outputs.
    Run {
        /// The .onnx file; omitted: the bundled physics MLP on a sample input.
        model: Option<PathBuf>,
        /// An input as NAME=FILE (.npy or ONNX TensorProto .pb); repeat for each input.
        #[arg(long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Where to execute (default: the GPU when one is present, else the CPU reference).
        #[arg(long, value_enum)]
        device: Option<cli::run::Device>,
        /// Time N steady-state runs on the GPU (median and p95, graph replay on and off).
        #[arg(long, default_value_t = 0, value_name = "N")]
        repeat: usize,
        /// With --repeat, also profile each step of the plan (device time between events; for
        /// plans of up to 160 steps also what each step adds to the graph replay).
        #[arg(long)]
        profile: bool,
        /// Write each output to DIR/<output name>.npy.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// A GPU session option as NAME=true|false (repeat for each), e.g.
        /// `tensor_core_attention=false` (an unknown NAME lists the known ones).
        #[arg(long = "set", value_name = "NAME=BOOL")]
        options: Vec<String>,
        /// Most iterations one Loop node may run before the run fails naming it (GPU and CPU).
        #[arg(long, default_value_t = host::reference::MAX_LOOP_ITERATIONS, value_name = "N")]
        max_loop_iterations: u64,
        /// How the tensor-core GEMMs form their products: exact (f32 accuracy, 3xTF32) or tf32
        /// (operands rounded to TF32, one product: faster, about 1e-3 relative error).
        #[arg(long, default_value = "exact", value_name = "exact|tf32")]
        precision: String,
    },
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
        Command::Inspect { model, memory, plan, binds, precision } => report(
            precision_of(&precision)
                .and_then(|precision| cli::inspect::run(&model, memory, plan, &binds, precision)),
        ),
        Command::Run {
            model,
            inputs,
            device,
            out,
            repeat,
            profile,
            options,
            max_loop_iterations,
            precision,
        } => report(precision_of(&precision).and_then(|precision| {
            cli::run::run(cli::run::RunArgs {
                model,
                inputs,
                device,
                out,
                repeat,
                profile,
                options,
                precision,
                max_loop_iterations,
            })
        })),
    }
}

/// The `--precision` argument (an unknown name is an error listing the known ones).
fn precision_of(name: &str) -> anyhow::Result<host::Precision> {
    name.parse().map_err(|e| anyhow::anyhow!("--precision {name}: {e}"))
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
