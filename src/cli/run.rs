//! `ferrofuse run [MODEL] --input NAME=FILE ... [--device cpu|cuda] [--out DIR]`: runs a model on
//! the given inputs and prints (and optionally writes) its outputs. With no MODEL it runs the
//! bundled demo on a deterministic sample input.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use host::{HostTensor, TensorData};

use super::tensor_io::{read_tensor, write_output};

/// Where to execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// The CPU reference executor.
    Cpu,
    /// The GPU.
    Cuda,
}

/// Options of `ferrofuse run`.
pub struct RunArgs {
    /// Model file; `None` runs the bundled demo.
    pub model: Option<PathBuf>,
    /// `NAME=FILE` pairs.
    pub inputs: Vec<String>,
    /// Where to execute; `None`: the GPU when one is present, else the CPU reference.
    pub device: Option<Device>,
    /// Folder for `<output>.npy` files.
    pub out: Option<PathBuf>,
    /// Timed steady-state executions (GPU only; 0: none).
    pub repeat: usize,
    /// `NAME=BOOL` session options.
    pub options: Vec<String>,
}

/// The session options with each `NAME=BOOL` of `specs` applied.
fn session_options(specs: &[String]) -> Result<host::SessionOptions> {
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

fn parse_input(spec: &str) -> Result<(String, HostTensor)> {
    let (name, file) = spec
        .split_once('=')
        .with_context(|| format!("--input {spec:?}: expected NAME=FILE (a .npy or .pb file)"))?;
    Ok((name.to_owned(), read_tensor(Path::new(file)).with_context(|| format!("input `{name}`"))?))
}

fn preview(t: &HostTensor) -> String {
    let vals = t.data().to_f64s();
    let shown: Vec<String> = vals.iter().take(6).map(|v| format!("{v:.6}")).collect();
    let more = if vals.len() > 6 { ", ..." } else { "" };
    format!("{} {:?} [{}{more}]", t.dtype(), t.shape(), shown.join(", "))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Runs the graph in a GPU session; with `repeat`, also times steady-state executions (graph
/// replay on and off, device time from CUDA events; full runs with host copies, wall clock).
fn run_cuda(
    graph: planner::Graph,
    inputs: &[(String, HostTensor)],
    repeat: usize,
    options: host::SessionOptions,
) -> Result<Vec<(String, HostTensor)>> {
    let ctx = host::Context::new(0)?;
    println!("gpu: {} ({} flavour)", ctx.info().name, ctx.flavour().name());
    let mut session = host::Session::new(&ctx, graph, options)?;
    let outputs = session.run(inputs).map_err(|e| match e {
        host::HostError::Plan(p @ planner::PlanError::NoKernel { .. }) => {
            anyhow::anyhow!("{p}\n(run with --device cpu to use the CPU reference executor)")
        }
        other => other.into(),
    })?;
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
        // Per-step profile: each step launched alone between two events (median of 20).
        if session.last_plan().is_none() {
            let r = session.region_stats();
            println!(
                "runs in stages (data-dependent shapes), no single plan to profile; run-time region {:.3} MiB (peak use {:.3} MiB)",
                r.capacity as f64 / (1u64 << 20) as f64,
                r.high_water as f64 / (1u64 << 20) as f64
            );
        }
        let (times, inside) = if session.last_plan().is_some() {
            (session.profile_steps(20)?, session.profile_steps_in_graph(200)?)
        } else {
            (Vec::new(), Vec::new())
        };
        if let Some(plan) = session.last_plan() {
            let text = plan.to_string();
            println!(
                "plan ({} steps): each step's device time launched alone (median of 20), and what it adds to the graph replay (the replay's median less that of the graph without the step, 200 replays each; sum {:.2} us):",
                plan.steps.len(),
                inside.iter().sum::<f64>()
            );
            for ((line, t), g) in text.lines().zip(&times).zip(&inside) {
                println!("step {t:>8.2} us  in graph {g:>7.2} us  {line}");
            }
            let mut by_kernel: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
            for (step, t) in plan.steps.iter().zip(&times) {
                let key = match step {
                    planner::plan::Step::Kernel { kernel, .. } => kernel.symbol().to_string(),
                    planner::plan::Step::Copy { .. } => "copy".into(),
                };
                let e = by_kernel.entry(key).or_default();
                (e.0, e.1) = (e.0 + 1, e.1 + t);
            }
            let mut rows: Vec<_> = by_kernel.into_iter().collect();
            rows.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
            println!("by kernel (sum of launched-alone times {:.2} us):", times.iter().sum::<f64>());
            for (k, (n, t)) in rows {
                println!("  {k:<24} {n:>4} steps {t:>10.2} us");
            }
            println!("{}", text.lines().last().unwrap_or_default());
        }
    }
    Ok(outputs)
}

/// Runs `ferrofuse run`.
pub fn run(args: RunArgs) -> Result<()> {
    let options = session_options(&args.options)?;
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
    let mut inputs = args.inputs.iter().map(|s| parse_input(s)).collect::<Result<Vec<_>>>()?;
    if args.model.is_none() && inputs.is_empty() {
        let x = HostTensor::new(vec![1, ferrofuse::demo::FEATURES], ferrofuse::demo::sample_input(1))?;
        inputs.push((ferrofuse::demo::INPUT.to_owned(), x));
    }
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
    let device =
        args.device.unwrap_or(if host::device::device_count().is_ok() { Device::Cuda } else { Device::Cpu });
    let start = Instant::now();
    let outputs = match device {
        Device::Cpu => {
            if args.repeat > 0 {
                bail!("--repeat times the GPU session; the CPU reference is not a performance path");
            }
            host::reference::eval(&graph, &inputs)?
        }
        Device::Cuda => run_cuda(graph, &inputs, args.repeat, options)?,
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
        for (n, t) in &outputs {
            let path = write_output(dir, n, t)?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}
