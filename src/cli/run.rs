//! `ferrofuse run [MODEL] --input NAME=FILE ... [--device cpu|cuda] [--out DIR]`: runs a model on
//! the given inputs and prints (and optionally writes) its outputs. With no MODEL it runs the
//! bundled demo on a deterministic sample input.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use host::{HostTensor, TensorData};

use super::tensor_io::{output_files, read_tensor, write_output};

/// Where to execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// The CPU reference executor.
    Cpu,
    /// The GPU.
    Cuda,
}

/// Options of `ferrofuse run`.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The .onnx file; omitted: the bundled physics MLP on a sample input.
    pub model: Option<PathBuf>,
    /// An input as NAME=FILE (.npy or ONNX TensorProto .pb); repeat for each input.
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<String>,
    /// Where to execute (default: the GPU when one is present, else the CPU reference).
    #[arg(long, value_enum)]
    pub device: Option<Device>,
    /// Time N steady-state runs on the GPU (median and p95, graph replay on and off).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub repeat: usize,
    /// With --repeat, also profile each step of the plan (device time between events; for
    /// plans of up to 160 steps also what each step adds to the graph replay).
    #[arg(long)]
    pub profile: bool,
    /// Write each output to DIR/<output name>.npy.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// On the GPU, after the run: launch every step of the plan alone, wait for it and write the
    /// values it wrote to DIR/<step>-<value name>.npy (what `inspect --plan` lists as its
    /// output), to find the first step where two runs part. Each file is its named value whole:
    /// one several steps write (a Concat's parts) after the last of them; a GEMM result written
    /// in its transpose's layout as that transpose's value.
    #[arg(long, value_name = "DIR")]
    pub dump_steps: Option<PathBuf>,
    /// A GPU session option as NAME=true|false (repeat for each), e.g.
    /// `tensor_core_attention=false` (an unknown NAME lists the known ones).
    #[arg(long = "set", value_name = "NAME=BOOL")]
    pub options: Vec<String>,
    /// Most iterations one Loop node may run before the run fails naming it (GPU and CPU).
    #[arg(long, default_value_t = host::reference::MAX_LOOP_ITERATIONS, value_name = "N")]
    pub max_loop_iterations: u64,
    /// exact (f32 accuracy, 3xTF32), tf32, f16 or bf16: the large-tile tensor-core GEMMs with
    /// operands rounded to that type, one product, f32 accumulation (faster; about 1e-3 relative
    /// error in tf32 and f16, 1e-2 in bf16); other kernels stay f32.
    #[arg(long, default_value = "exact", value_name = "exact|tf32|f16|bf16")]
    pub precision: String,
    /// Most memory the run may hold, e.g. 512M or 8G (K, M, G, T are powers of 1024): on the
    /// CPU reference its tensors (default: three quarters of the machine's memory), on the GPU
    /// the session's device memory (default: the device's). Past it the run fails naming the node
    /// or buffer.
    #[arg(long, value_name = "SIZE", value_parser = host::budget::parse_size)]
    pub max_memory: Option<u64>,
}

/// The session options with each `NAME=BOOL` of `specs` applied.
pub(crate) fn session_options(specs: &[String]) -> Result<host::SessionOptions> {
    let mut o = host::SessionOptions::default();
    for spec in specs {
        let (name, value) = spec
            .split_once('=')
            .with_context(|| format!("--set {spec:?}: expected NAME=true or NAME=false"))?;
        let on = match value {
            "true" | "on" | "1" => true,
            "false" | "off" | "0" => false,
            _ => bail!("--set {spec:?}: the value is true or false"),
        };
        o.set(name, on).map_err(|e| anyhow::anyhow!("--set {spec:?}: {e}"))?;
    }
    Ok(o)
}

pub(crate) fn parse_input(spec: &str) -> Result<(String, HostTensor)> {
    let (name, file) = spec
        .split_once('=')
        .with_context(|| format!("--input {spec:?}: expected NAME=FILE (a .npy or .pb file)"))?;
    Ok((name.to_owned(), read_tensor(Path::new(file)).with_context(|| format!("input `{name}`"))?))
}

fn preview(t: &HostTensor) -> String {
    let shown: Vec<String> = match t.data() {
        host::TensorData::String(v) => v.iter().take(6).map(|s| format!("{s:?}")).collect(),
        d => d.to_f64s().iter().take(6).map(|v| format!("{v:.6}")).collect(),
    };
    let more = if t.len() > 6 { ", ..." } else { "" };
    format!("{} {:?} [{}{more}]", t.dtype(), t.shape(), shown.join(", "))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs the graph in a GPU session; with `repeat`, also times steady-state executions (graph
/// replay on and off, device time from CUDA events; full runs with host copies, wall clock).
fn run_cuda(
    (ctx, opened): (host::Context, std::time::Duration),
    graph: planner::Graph,
    inputs: &[(String, HostTensor)],
    (repeat, profile, dump): (usize, bool, Option<&std::path::Path>),
    options: host::SessionOptions,
    ahead: Option<host::session::PlanAhead>,
) -> Result<Vec<(String, HostTensor)>> {
    println!("gpu: {} ({} flavour), precision {}", ctx.info().name, ctx.flavour().name(), options.precision);
    let mut session = host::Session::new(&ctx, graph, options)?;
    let adopted = ahead.is_some_and(|a| session.adopt_plan(a));
    let first = Instant::now();
    let outputs = session.run(inputs).map_err(|e| match e {
        host::HostError::Plan(p @ planner::PlanError::NoKernel { .. }) => {
            anyhow::anyhow!("{p}\n(run with --device cpu to use the CPU reference executor)")
        }
        other => other.into(),
    })?;
    let first = first.elapsed();
    if let Some(dir) = dump {
        dump_steps(&mut session, dir)?;
    }
    if let Some(p) = session.prepare_report() {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        let in_run = if adopted { std::time::Duration::ZERO } else { p.plan };
        let rest = first.saturating_sub(in_run + p.kernels_and_upload);
        println!(
            "first run: context {:.1} ms, plan {:.1} ms{}, kernels {:.1} ms ({}) alongside the upload {:.1} ms (both {:.1} ms), execution (eager, then graph capture) {:.1} ms",
            ms(opened),
            ms(p.plan),
            if adopted { " (compiled while the context opened)" } else { "" },
            ms(p.kernels.wall),
            super::doctor::load_line(&p.kernels),
            ms(p.upload),
            ms(p.kernels_and_upload),
            ms(rest)
        );
        if let Some((eager, capture)) = p.first_execution {
            println!(
                "first execution: eager launches with a wait after each step {:.1} ms, graph capture and instantiation {:.1} ms",
                ms(eager),
                ms(capture)
            );
        }
        println!("kernel cache: {}", super::doctor::cache_line(ctx.kernel_cache()));
    }
    if repeat > 0 {
        for _ in 0..10 {
            session.run(inputs)?;
        }
        let allocations = session.allocation_count();
        let report = |name: &str, mut t: Vec<f64>| {
            t.sort_by(f64::total_cmp);
            println!(
                "{name:<34} median {:>9.2} us   p95 {:>9.2} us   ({} runs)",
                percentile(&t, 0.5),
                percentile(&t, 0.95),
                t.len()
            );
        };
        report("compute, CUDA graph replay", session.time_executions(repeat, true)?);
        report("compute, eager launches", session.time_executions(repeat, false)?);
        if ctx.programmatic_launch() {
            // The same without programmatic dependent launch (the graph is captured again).
            session.set_programmatic_launch(false);
            session.execute()?;
            report("compute, CUDA graph replay, no PDL", session.time_executions(repeat, true)?);
            report("compute, eager launches, no PDL", session.time_executions(repeat, false)?);
            session.set_programmatic_launch(true);
            session.execute()?;
        }
        let mut wall = Vec::with_capacity(repeat);
        for _ in 0..repeat {
            let t = Instant::now();
            session.run(inputs)?;
            wall.push(t.elapsed().as_secs_f64() * 1e6);
        }
        report("full run (copies in/out, wall)", wall);
        println!(
            "session device memory: {:.3} MiB (weights, arena, inputs/outputs); allocations after warm-up: {}",
            session.device_bytes() as f64 / (1u64 << 20) as f64,
            session.allocation_count() - allocations
        );
        match session.last_plan() {
            None => {
                let r = session.region_stats();
                println!(
                    "runs in stages (data-dependent shapes), no single plan to profile; run-time region {:.3} MiB (peak use {:.3} MiB)",
                    r.capacity as f64 / (1u64 << 20) as f64,
                    r.high_water as f64 / (1u64 << 20) as f64
                );
            }
            Some(plan) if !profile => {
                println!(
                    "plan: {} steps per run, {} once per binding (--profile times each step)",
                    plan.steps.len() - plan.hoisted,
                    plan.hoisted
                );
            }
            Some(_) => print_profile(&mut session)?,
        }
    }
    // The process exits next: leave the session's memory and the context to the driver's
    // teardown at exit instead of unloading modules and freeing buffers one by one first.
    std::mem::forget(session);
    std::mem::forget(ctx);
    Ok(outputs)
}

/// Writes the value each step of the session's last plan writes to `dir/<step>-<value>.npy`
/// ([`host::Session::dump_steps`]).
fn dump_steps(session: &mut host::Session, dir: &std::path::Path) -> Result<()> {
    let values = session.dump_steps()?;
    for (i, name, t) in &values {
        super::tensor_io::write_output(dir, &format!("{i:04}-{}", super::tensor_io::file_stem(name)), t)?;
    }
    println!("wrote {} step values to {}", values.len(), dir.display());
    Ok(())
}

/// Plans of at most this many steps also get the in-graph profile (one capture per step).
const IN_GRAPH_PROFILE_MAX_STEPS: usize = 160;

/// The per-step profile of the session's last plan: each step's time between events of eager
/// executions, and for plans of at most [`IN_GRAPH_PROFILE_MAX_STEPS`] steps what each adds to
/// the graph replay; then the sum per kernel.
fn print_profile(session: &mut host::Session) -> Result<()> {
    let times = session.profile_steps(20)?;
    let steps = session.last_plan().map_or(0, |p| p.steps.len());
    let inside =
        if steps <= IN_GRAPH_PROFILE_MAX_STEPS { Some(session.profile_steps_in_graph(200)?) } else { None };
    let Some(plan) = session.last_plan() else { return Ok(()) };
    let text = plan.to_string();
    match &inside {
        Some(inside) => println!(
            "plan ({} steps): each step's device time between events of eager executions (median of 20), and what it adds to the graph replay (the replay's median less that of the graph without the step, 200 replays each; sum {:.2} us):",
            plan.steps.len(),
            inside.iter().sum::<f64>()
        ),
        None => println!(
            "plan ({} steps): each step's device time between events of eager executions (median of 20); the in-graph profile is skipped above {IN_GRAPH_PROFILE_MAX_STEPS} steps:",
            plan.steps.len()
        ),
    }
    for (i, (line, t)) in plan.step_lines().iter().zip(&times).enumerate() {
        match &inside {
            Some(g) => println!("step {t:>8.2} us  in graph {:>7.2} us  {line}", g[i]),
            None => println!("step {t:>8.2} us  {line}"),
        }
    }
    let rows = time_by_kernel(plan, &times);
    println!("by kernel (sum of step times {:.2} us):", times.iter().sum::<f64>());
    for (k, (n, t)) in rows {
        println!("  {k:<24} {n:>4} steps {t:>10.2} us");
    }
    println!("{}", text.lines().last().unwrap_or_default());
    Ok(())
}

/// The steps' times summed per kernel (copies as `copy`): (kernel, steps, microseconds), the
/// costliest first.
pub(crate) fn time_by_kernel(plan: &planner::plan::Plan, times: &[f64]) -> Vec<(String, (usize, f64))> {
    let mut by_kernel: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
    for (step, t) in plan.steps.iter().zip(times) {
        let key = match step {
            planner::plan::Step::Kernel { kernel, .. } => kernel.symbol().to_string(),
            planner::plan::Step::Copy { .. } => "copy".into(),
        };
        let e = by_kernel.entry(key).or_default();
        (e.0, e.1) = (e.0 + 1, e.1 + t);
    }
    let mut rows: Vec<_> = by_kernel.into_iter().collect();
    rows.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
    rows
}

/// The plan of `graph` for `inputs` on device 0, compiled as its session would, without a context
/// (while the context is being created); `None` when it cannot be (the session then compiles,
/// specializing if it must).
fn plan_ahead(
    graph: &planner::Graph,
    inputs: &[(String, HostTensor)],
    o: &host::SessionOptions,
) -> Option<host::session::PlanAhead> {
    let (sm, flavour) = host::device::plan_target(0).ok()?;
    host::session::PlanAhead::compile(graph, inputs, o, (sm, flavour == host::PtxFlavour::Hopper)).ok()
}

/// The GPU context and the time its creation took, or why there is none: made on another thread
/// while the model loads (driver initialisation and context creation take about 0.2 s).
type Opening = std::thread::JoinHandle<(Result<host::Context, host::HostError>, std::time::Duration)>;

fn open_gpu() -> Opening {
    std::thread::spawn(|| {
        let t = Instant::now();
        let ctx = host::device::device_count().and_then(|_| host::Context::new(0));
        (ctx, t.elapsed())
    })
}

/// Runs `ferrofuse run`.
pub fn run(args: RunArgs) -> Result<()> {
    let started = Instant::now();
    let options = host::SessionOptions {
        precision: super::precision_of(&args.precision)?,
        max_loop_iterations: args.max_loop_iterations,
        max_memory: args.max_memory,
        ..session_options(&args.options)?
    };
    let opening = (args.device != Some(Device::Cpu)).then(open_gpu);
    let model = match &args.model {
        Some(path) => onnx::load_path(path).with_context(|| format!("loading {}", path.display()))?,
        None => {
            onnx::load_bytes(ferrofuse::demo::PHYSICS_MLP_ONNX, None).context("loading the bundled demo")?
        }
    };
    let name = args
        .model
        .as_ref()
        .map_or("bundled demo (physics MLP 64-256x4-1)".into(), |p| p.display().to_string());
    let graph = onnx::to_graph(&model).with_context(|| format!("converting {name}"))?;
    if graph.outputs.is_empty() {
        bail!("{name} declares no graph outputs: running it would compute nothing");
    }
    let mut inputs = args.inputs.iter().map(|s| parse_input(s)).collect::<Result<Vec<_>>>()?;
    if args.model.is_none() && inputs.is_empty() {
        let x = HostTensor::new(vec![1, ferrofuse::demo::FEATURES], ferrofuse::demo::sample_input(1))?;
        inputs.push((ferrofuse::demo::INPUT.to_owned(), x));
    }
    // Initializers with a default value that an --input feeds become inputs of this run.
    let overridden = match host::reference::with_fed_defaults(&graph, inputs.iter().map(|(n, _)| n.as_str()))?
    {
        std::borrow::Cow::Owned(g) => Some(g),
        std::borrow::Cow::Borrowed(_) => None,
    };
    let graph = overridden.unwrap_or(graph);
    let expected: Vec<String> = graph
        .inputs
        .iter()
        .map(|v| {
            let info = &graph.values[v.index()];
            info.info.as_ref().map_or(info.name.clone(), |i| format!("{} ({i})", info.name))
        })
        .collect();
    if inputs.len() < graph.inputs.len() && !expected.is_empty() {
        let given: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
        bail!(
            "{name} takes inputs {}; given: {:?} (pass --input NAME=FILE for each)",
            expected.join(", "),
            given
        );
    }
    println!("model: {name}");
    for (n, t) in &inputs {
        println!("input  {n}: {}", preview(t));
    }
    let loaded = started.elapsed();
    // The plan needs only the device's size and flavour: compile it while the context opens.
    let ahead = if opening.is_some() { plan_ahead(&graph, &inputs, &options) } else { None };
    let opened = opening.map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
    let device = args.device.unwrap_or(match &opened {
        Some((Ok(_), _)) => Device::Cuda,
        _ => Device::Cpu,
    });
    if let Some((_, t)) = &opened
        && device == Device::Cuda
    {
        println!(
            "startup: model load and conversion {:.1} ms, then the plan, alongside driver init and context creation {:.1} ms; waited {:.1} ms",
            loaded.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e3,
            started.elapsed().saturating_sub(loaded).as_secs_f64() * 1e3
        );
    }
    let start = Instant::now();
    let outputs = match device {
        Device::Cpu => {
            if args.repeat > 0 {
                bail!("--repeat times the GPU session; the CPU reference is not a performance path");
            }
            if args.dump_steps.is_some() {
                bail!("--dump-steps writes the GPU plan's step values; the CPU reference has no plan");
            }
            // The planner's type and shape checks first (a GPU run makes them too): a model that
            // declares an output of another dtype or shape than it computes is refused here as
            // well. What shape inference cannot follow (data-dependent ranks) the reference runs.
            // Shapes are checked with the inputs' sizes bound (as a session plans them).
            let bound = host::session::binding_of(&graph, &inputs)
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(planner::memory::bind_inputs(&graph, &b)?));
            if let Ok(bound) = bound
                && let Err(
                    e @ (planner::PlanError::DTypeMismatch { .. } | planner::PlanError::ShapeMismatch { .. }),
                ) = planner::shape_infer::infer(&bound)
            {
                return Err(e.into());
            }
            let defaults = host::reference::Limits::default();
            let limits = host::reference::Limits {
                max_loop_iterations: options.max_loop_iterations,
                max_total_bytes: options.max_memory.unwrap_or(defaults.max_total_bytes),
                ..defaults
            };
            host::reference::eval_with(&graph, &inputs, limits)?
        }
        Device::Cuda => {
            let (ctx, t) = opened.expect("a GPU run opens the context");
            let modes = (args.repeat, args.profile, args.dump_steps.as_deref());
            run_cuda((ctx?, t), graph, &inputs, modes, options, ahead)?
        }
    };
    let elapsed = start.elapsed();
    for (n, t) in &outputs {
        println!("output {n}: {}", preview(t));
        if let TensorData::F32(v) = t.data()
            && v.iter().any(|x| !x.is_finite())
        {
            println!("  note: output `{n}` holds non-finite values");
        }
    }
    println!(
        "device: {device:?}, {:.3} ms (first run, compile and upload included on the GPU)",
        elapsed.as_secs_f64() * 1e3
    );
    if let Some(dir) = &args.out {
        let names: Vec<&str> = outputs.iter().map(|(n, _)| n.as_str()).collect();
        for ((n, t), file) in outputs.iter().zip(output_files(&names)?) {
            let path = write_output(dir, &file, t)?;
            println!("wrote output `{n}` to {}", path.display());
        }
    }
    println!(
        "process: {:.1} ms from the start of `run` to the outputs",
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
