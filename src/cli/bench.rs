//! `ferrofuse bench MODEL [--bind NAME=S1,S2,...] [--input NAME=FILE] [--json FILE]`: the
//! benchmark of one model over a sweep of its symbolic sizes. Per point of the sweep: the first
//! run (plan, upload, capture), steady-state device time with CUDA-graph replay and with eager
//! launches (p50 / p95 / p99), the same with fusion off, the input and output copies timed apart
//! from the compute, wall time of whole runs, throughput, the session's memory (its own figures
//! and NVML's per-process peak), GPU utilisation sampled through NVML while it runs, and the
//! per-step profile; before the sweep, the cold start of a fresh process with an empty and with a
//! filled kernel cache. Everything goes to a JSON file; the terminal gets one line per point.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use host::{HostTensor, TensorData};
use planner::{DType, Dim, Graph, Op, ValueId};
use serde_json::{Value, json};

use super::nvml::{Gpu, Sampler};
use super::tensor_io::{file_stem, output_files, write_output};

/// Options of `ferrofuse bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// The .onnx file.
    pub model: PathBuf,
    /// Sizes of a symbolic dimension as NAME=S1,S2,... (repeat for each symbol); the sweep runs
    /// every combination.
    #[arg(long = "bind", value_name = "NAME=SIZES")]
    pub binds: Vec<String>,
    /// An input as NAME=FILE (.npy or .pb), the same at every point; the other inputs are drawn
    /// at random in their declared dtype and shape (seeded).
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<String>,
    /// The values of a drawn integer input, as NAME=LO..HI (HI excluded). Default: an input that
    /// indexes a Gather takes values below the gathered axis' size (token ids below the
    /// vocabulary), other integer inputs 0 or 1 (masks, flags).
    #[arg(long = "range", value_name = "NAME=LO..HI")]
    pub ranges: Vec<String>,
    /// Timed executions per measurement.
    #[arg(long, default_value_t = 300, value_name = "N")]
    pub runs: usize,
    /// Cold starts to time in fresh processes (each with an empty kernel cache, then as many with
    /// the filled one), on the first point's inputs; 0 skips them.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub cold_runs: usize,
    /// Skip the unfused session (fusion off) at each point.
    #[arg(long)]
    pub no_unfused: bool,
    /// Write every figure (and the machine) to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the outputs to DIR/<output>.npy (DIR/<point>/<output>.npy for a sweep of several
    /// points), e.g. to check them against another engine.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A GPU session option as NAME=true|false (repeat for each), as for `run`.
    #[arg(long = "set", value_name = "NAME=BOOL")]
    pub options: Vec<String>,
    /// exact (f32 accuracy, 3xTF32), tf32, f16 or bf16 (the large-tile tensor-core GEMMs with
    /// operands rounded to that type).
    #[arg(long, default_value = "exact", value_name = "exact|tf32|f16|bf16")]
    pub precision: String,
    /// Seed of the drawn inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// The sweep of `--bind NAME=S1,S2,...` specs: every combination of the sizes, the first name
/// varying slowest. A name given twice or with no sizes is an error; so is a name that no
/// symbolic input dim of the model uses (it would bind nothing).
pub fn sweep(specs: &[String], symbols: &[String]) -> Result<Vec<BTreeMap<String, usize>>> {
    let mut axes: Vec<(String, Vec<usize>)> = Vec::new();
    for spec in specs {
        let (name, sizes) =
            spec.split_once('=').with_context(|| format!("--bind {spec:?}: expected NAME=S1,S2,..."))?;
        if axes.iter().any(|(n, _)| n == name) {
            bail!("--bind {name} given twice: list its sizes once, separated by commas");
        }
        if !symbols.iter().any(|s| s == name) {
            bail!(
                "--bind {name}: no input dim of the model is named `{name}` (its symbols: {})",
                if symbols.is_empty() { "none".into() } else { symbols.join(", ") }
            );
        }
        let sizes =
            sizes.split(',').map(|s| s.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>().with_context(
                || format!("--bind {spec:?}: sizes are non-negative integers separated by commas"),
            )?;
        axes.push((name.to_owned(), sizes));
    }
    let mut points = vec![BTreeMap::new()];
    for (name, sizes) in &axes {
        points = points
            .into_iter()
            .flat_map(|p| {
                sizes.iter().map(move |&s| {
                    let mut q = p.clone();
                    q.insert(name.clone(), s);
                    q
                })
            })
            .collect();
    }
    Ok(points)
}

/// The symbolic dim names of `graph`'s inputs, in order of first use.
pub fn input_symbols(graph: &Graph) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in &graph.inputs {
        if let Some(info) = &graph.values[v.index()].info {
            for d in info.shape.dims() {
                if let Dim::Symbol(s) = d
                    && !out.contains(s)
                {
                    out.push(s.clone());
                }
            }
        }
    }
    out
}

/// A point's label: `batch=16,seq=128` (`-` for a model without symbolic sizes).
fn label(point: &BTreeMap<String, usize>) -> String {
    if point.is_empty() {
        return "-".into();
    }
    point.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// The `NAME=LO..HI` ranges of `--range`.
fn parse_ranges(specs: &[String]) -> Result<BTreeMap<String, (i64, i64)>> {
    specs
        .iter()
        .map(|spec| {
            let parsed = spec.split_once('=').and_then(|(name, r)| {
                let (lo, hi) = r.split_once("..")?;
                Some((name.to_owned(), (lo.trim().parse().ok()?, hi.trim().parse().ok()?)))
            });
            match parsed {
                Some((name, (lo, hi))) if lo < hi => Ok((name, (lo, hi))),
                _ => bail!("--range {spec:?}: expected NAME=LO..HI with integers LO < HI"),
            }
        })
        .collect()
}

/// The values an integer input of `graph` may take when none are given: below the size of the
/// axis it indexes (token ids into an embedding table; a GNN's edge index, picked apart by
/// Gathers and Unsqueezes, into its node rows by GatherND and ScatterND), else 0 or 1. The input
/// is followed through ops whose outputs hold its elements (its rows picked by a Gather,
/// reshapes, slices, casts, concatenations) to every Gather, GatherElements, GatherND,
/// ScatterElements or ScatterND that reads it as indices; the indexed axes' sizes come from
/// `shapes` (inferred at the sweep's point) or the graph's constants and declarations.
pub fn integer_range(graph: &Graph, input: ValueId, shapes: Option<&[planner::TensorInfo]>) -> (i64, i64) {
    let dims_of = |v: ValueId| -> Option<Vec<usize>> {
        if let Some(c) = graph.constant(v) {
            return Some(c.dims.clone());
        }
        let info = shapes.and_then(|s| s.get(v.index())).or(graph.values[v.index()].info.as_ref());
        info.and_then(|i| i.shape.as_known())
    };
    let axis_size = |data: Option<ValueId>, axis: i64| -> Option<usize> {
        let dims = dims_of(data?)?;
        let axis = if axis < 0 { axis + dims.len() as i64 } else { axis };
        usize::try_from(axis).ok().and_then(|a| dims.get(a).copied())
    };
    // The smallest of data's axes `from..from + q`, for the last index dim `q` of `indices`.
    let tuple_size = |data: Option<ValueId>, indices: ValueId, from: usize| -> Option<usize> {
        let (dims, q) = (dims_of(data?)?, *dims_of(indices)?.last()?);
        dims.get(from..from + q)?.iter().copied().min()
    };
    let (mut bound, mut carried, mut seen): (Option<usize>, Vec<ValueId>, Vec<ValueId>) =
        (None, vec![input], vec![input]);
    while let Some(v) = carried.pop() {
        for node in &graph.nodes {
            let reads = |i: usize| node.input(i) == Some(v);
            let indexed = match &node.op {
                Op::Gather(g) if reads(1) => axis_size(node.input(0), g.axis),
                Op::GatherElements(g) if reads(1) => axis_size(node.input(0), g.axis),
                Op::ScatterElements(g) if reads(1) => axis_size(node.input(0), g.axis),
                Op::GatherNd(g) if reads(1) => tuple_size(node.input(0), v, g.batch_dims),
                Op::ScatterNd(_) if reads(1) => tuple_size(node.input(0), v, 0),
                _ => None,
            };
            if let Some(n) = indexed {
                bound = Some(bound.map_or(n, |b| b.min(n)));
            }
            let carries = match &node.op {
                // Input 0's elements (a gather's data, not its indices) carried to the output.
                Op::Gather(_)
                | Op::GatherElements(_)
                | Op::GatherNd(_)
                | Op::Slice(_)
                | Op::Reshape(_)
                | Op::Flatten(_)
                | Op::Squeeze(_)
                | Op::Unsqueeze(_)
                | Op::Transpose(_)
                | Op::Expand
                | Op::Tile
                | Op::Identity
                | Op::Cast(_)
                | Op::Split(_) => reads(0),
                Op::Concat(_) => node.inputs.contains(&Some(v)),
                _ => false,
            };
            if carries {
                for out in node.outputs.iter().flatten() {
                    if !seen.contains(out) {
                        seen.push(*out);
                        carried.push(*out);
                    }
                }
            }
        }
    }
    match bound {
        Some(n) if n > 0 => (0, n as i64),
        _ => (0, 2),
    }
}

/// The inputs of `graph` at `point`: the given ones, and the others drawn in their declared
/// dtype and shape (symbolic dims from `point`); an input whose dim is not bound is an error
/// naming both.
pub fn inputs_at(
    graph: &Graph,
    point: &BTreeMap<String, usize>,
    given: &[(String, HostTensor)],
    ranges: &BTreeMap<String, (i64, i64)>,
    seed: u64,
) -> Result<Vec<(String, HostTensor)>> {
    let mut rng = host::selftest::Rng::new(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(graph.inputs.len());
    // Every value's shape at this point, for the sizes of the axes the integer inputs index
    // (`None` where inference fails: the declarations alone are used); inferred once, and only
    // when an integer input is drawn.
    let inferred = std::cell::OnceCell::new();
    let shapes = || {
        inferred
            .get_or_init(|| {
                let binding = planner::Binding(point.iter().map(|(k, &v)| (k.clone(), v)).collect());
                let bound = planner::memory::bind_inputs(graph, &binding).ok()?;
                planner::shape_infer::infer(&bound).ok()
            })
            .as_deref()
    };
    for &v in &graph.inputs {
        let value = &graph.values[v.index()];
        let name = &value.name;
        if let Some((_, t)) = given.iter().find(|(n, _)| n == name) {
            out.push((name.clone(), t.clone()));
            continue;
        }
        let info = value.info.as_ref().with_context(|| {
            format!("input `{name}` declares no type and shape: give it with --input {name}=FILE")
        })?;
        let dims = info
            .shape
            .dims()
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Ok(*n),
                Dim::Symbol(s) => point.get(s).copied().with_context(|| {
                    format!(
                        "input `{name}`: its dim `{s}` is symbolic: give its sizes with --bind {s}=S1,S2,..."
                    )
                }),
            })
            .collect::<Result<Vec<usize>>>()?;
        let n: usize = dims.iter().product();
        let (lo, hi) = match ranges.get(name) {
            Some(&range) => range,
            None if info.dtype.is_int() => integer_range(graph, v, shapes()),
            // (Not read: only the integer dtypes draw from the range.)
            None => (0, 1),
        };
        let mut int = || lo + (rng.next_u64() % (hi - lo) as u64) as i64;
        let data: TensorData = match info.dtype {
            DType::F32 => rng.tensor(&dims, -1.0, 1.0).data().clone(),
            DType::F64 => (0..n).map(|_| rng.uniform(-1.0, 1.0) as f64).collect::<Vec<_>>().into(),
            DType::I64 => (0..n).map(|_| int()).collect::<Vec<_>>().into(),
            DType::I32 => (0..n).map(|_| int() as i32).collect::<Vec<_>>().into(),
            DType::I8 => (0..n).map(|_| int() as i8).collect::<Vec<_>>().into(),
            DType::U8 => (0..n).map(|_| int() as u8).collect::<Vec<_>>().into(),
            DType::Bool => (0..n).map(|_| rng.next_u64() & 1 == 1).collect::<Vec<_>>().into(),
            other => bail!(
                "input `{name}` is {other:?}: drawing it is not supported; give it with --input {name}=FILE"
            ),
        };
        out.push((name.clone(), HostTensor::new(dims, data)?));
    }
    Ok(out)
}

/// Percentiles and mean of samples in microseconds.
pub fn summary(mut t: Vec<f64>) -> Value {
    if t.is_empty() {
        return Value::Null;
    }
    t.sort_by(f64::total_cmp);
    let at = |p: f64| t[((t.len() - 1) as f64 * p).round() as usize];
    json!({
        "p50": at(0.5), "p95": at(0.95), "p99": at(0.99),
        "mean": t.iter().sum::<f64>() / t.len() as f64, "min": t[0], "max": t[t.len() - 1], "n": t.len(),
    })
}

/// `2026-12-04T07:01:02Z` for a time since the Unix epoch.
pub fn utc_timestamp(since_epoch: Duration) -> String {
    let secs = since_epoch.as_secs();
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest / 60 % 60, rest % 60)
}

/// The session options with fusion off: every fusion pass of [`host::SessionOptions`] switched off
/// (activations, elementwise programs, GEMM epilogue programs, LayerNorm folds, attention).
pub fn unfused(o: host::SessionOptions) -> host::SessionOptions {
    o.with_fusion(false)
}

/// The leading size of the first input: what one run processes (the batch), for throughput.
fn items(inputs: &[(String, HostTensor)]) -> usize {
    inputs.first().and_then(|(_, t)| t.shape().first().copied()).unwrap_or(1).max(1)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Cold starts of `ferrofuse run` in fresh processes on `inputs`: `runs` with an empty kernel
/// cache (the driver's own JIT cache off), then `runs` with the cache they filled. Each: wall time
/// from spawn to exit, and the run's own figure to its outputs.
fn cold_starts(args: &BenchArgs, inputs: &[(String, HostTensor)], runs: usize) -> Result<Value> {
    let exe = std::env::current_exe().context("finding the ferrofuse binary for the cold starts")?;
    let work = std::env::temp_dir().join(format!("ferrofuse-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mut cmd_args: Vec<String> =
        vec!["run".into(), args.model.display().to_string(), "--device".into(), "cuda".into()];
    let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
    for ((n, t), stem) in inputs.iter().zip(output_files(&names)?) {
        let path = write_output(&work, &format!("in.{stem}"), t)?;
        cmd_args.extend(["--input".into(), format!("{n}={}", path.display())]);
    }
    cmd_args.extend(["--precision".into(), args.precision.clone()]);
    for o in &args.options {
        cmd_args.extend(["--set".into(), o.clone()]);
    }
    let cache = work.join("kernel-cache");
    let once = |empty: bool| -> Result<Value> {
        if empty {
            let _ = std::fs::remove_dir_all(&cache);
        }
        let started = Instant::now();
        let out = std::process::Command::new(&exe)
            .args(&cmd_args)
            .env(host::device::cache::DIR_VAR, &cache)
            .env("CUDA_CACHE_DISABLE", "1")
            .output()
            .context("starting `ferrofuse run` for a cold start")?;
        let wall = started.elapsed();
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "the cold-start run failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let to_outputs = text
            .lines()
            .find_map(|l| l.strip_prefix("process: ")?.split_whitespace().next()?.parse::<f64>().ok());
        let first = text.lines().find(|l| l.starts_with("first run:")).unwrap_or_default();
        Ok(json!({"wall_ms": wall.as_secs_f64() * 1e3, "to_outputs_ms": to_outputs, "first_run": first}))
    };
    let empty = (0..runs).map(|_| once(true)).collect::<Result<Vec<_>>>();
    let warm = (0..runs).map(|_| once(false)).collect::<Result<Vec<_>>>();
    let _ = std::fs::remove_dir_all(&work);
    Ok(
        json!({"empty_cache": empty?, "filled_cache": warm?, "driver_jit_cache": "off (CUDA_CACHE_DISABLE=1)"}),
    )
}

/// The largest absolute difference between two runs' outputs (`None` when their shapes differ).
fn max_abs_diff(a: &[(String, HostTensor)], b: &[(String, HostTensor)]) -> Option<f64> {
    let mut worst = 0.0f64;
    for ((_, x), (_, y)) in a.iter().zip(b) {
        if x.shape() != y.shape() {
            return None;
        }
        for (p, q) in x.data().to_f64s().iter().zip(y.data().to_f64s()) {
            let d = (p - q).abs();
            if d.is_nan() {
                return Some(f64::NAN);
            }
            worst = worst.max(d);
        }
    }
    Some(worst)
}

/// One session's measurements at one point.
struct Measured {
    figures: Value,
    outputs: Vec<(String, HostTensor)>,
}

/// Measures a session of `graph` with `options` on `inputs`: the first run, graph replay and
/// eager device time, and with `full` also copies, whole runs, memory, utilisation and profile.
fn measure(
    ctx: &host::Context,
    graph: &Graph,
    inputs: &[(String, HostTensor)],
    options: host::SessionOptions,
    (runs, full): (usize, bool),
    gpu: Option<&Gpu>,
) -> Result<Measured> {
    let before = gpu.and_then(|g| g.device_used_bytes());
    let mut session = host::Session::new(ctx, graph.clone(), options)?;
    let started = Instant::now();
    let outputs = session.run(inputs)?;
    let first_ms = started.elapsed().as_secs_f64() * 1e3;
    for _ in 0..10 {
        session.run(inputs)?;
    }
    let allocations = session.allocation_count();
    let sampler = gpu.map(Sampler::start);
    let graph_us = session.time_executions(runs, true)?;
    let eager_us = session.time_executions(runs, false)?;
    let sampled = sampler.map(Sampler::stop);
    // Steps each run launches; the hoisted ones ran once, before the first.
    let steps = session.last_plan().map(|p| p.steps.len() - p.hoisted);
    let hoisted = session.last_plan().map(|p| p.hoisted);
    let mut figures = json!({
        "first_run_ms": first_ms,
        "steps": steps,
        "hoisted_steps": hoisted,
        "graph_us": summary(graph_us),
        "eager_us": summary(eager_us),
    });
    if !full {
        return Ok(Measured { figures, outputs });
    }
    let (h2d, d2h) = match session.time_copies(inputs, runs.min(100)) {
        Ok((h, d)) => (summary(h), summary(d)),
        Err(_) => (Value::Null, Value::Null), // staged models: copies are part of their stages
    };
    let wall: Vec<f64> = (0..runs.min(200))
        .map(|_| {
            let t = Instant::now();
            session.run(inputs).map(|_| us(t.elapsed()))
        })
        .collect::<Result<_, _>>()?;
    let region = session.region_stats();
    let mut memory = json!({
        "session_device_bytes": session.device_bytes(),
        "run_time_region_bytes": region.capacity,
        "run_time_region_peak_bytes": region.high_water,
        "allocations_after_warmup": session.allocation_count() - allocations,
    });
    if let Some(plan) = session.last_plan() {
        let s = &plan.memory.stats;
        memory["arena_bytes"] = json!(s.arena_bytes);
        memory["arena_lower_bound_bytes"] = json!(s.lower_bound_bytes);
        memory["arena_naive_bytes"] = json!(s.naive_bytes);
        memory["weight_bytes"] = json!(
            plan.weights
                .iter()
                .filter_map(|w| plan.constants.get(w))
                .map(|c| c.bytes.len() as u64)
                .sum::<u64>()
        );
    }
    if let Some(s) = &sampled {
        memory["nvml_process_peak_bytes"] = json!(s.process_peak_bytes);
        memory["nvml_device_used_peak_bytes"] = json!(s.device_used_peak_bytes);
        memory["nvml_device_used_before_bytes"] = json!(before);
        figures["gpu_utilization_pct"] =
            json!({"mean": s.mean_utilization(), "max": s.max_utilization(), "samples": s.utilization.len()});
    }
    figures["h2d_us"] = h2d;
    figures["d2h_us"] = d2h;
    figures["full_run_wall_us"] = summary(wall);
    figures["memory"] = memory;
    figures["profile"] = profile(&mut session).unwrap_or(Value::Null);
    Ok(Measured { figures, outputs })
}

/// The per-step profile (device time between events of eager executions, median of 20): the ten
/// costliest steps with their plan lines (which name each step's fused group), and the time per
/// kernel.
fn profile(session: &mut host::Session) -> Result<Value> {
    let times = session.profile_steps(20)?;
    let Some(plan) = session.last_plan() else { return Ok(Value::Null) };
    let lines = plan.step_lines();
    let mut steps: Vec<(usize, f64, &str)> =
        lines.iter().zip(&times).enumerate().map(|(i, (l, t))| (i, *t, l.as_str())).collect();
    steps.sort_by(|a, b| b.1.total_cmp(&a.1));
    let kernels = super::run::time_by_kernel(plan, &times);
    Ok(json!({
        "sum_us": times.iter().sum::<f64>(),
        "top_steps": steps.iter().take(10).map(|(i, t, l)| json!({"step": i, "us": t, "plan": l.trim()})).collect::<Vec<_>>(),
        "by_kernel": kernels.iter().map(|(k, (n, t))| json!({"kernel": k, "steps": n, "us": t})).collect::<Vec<_>>(),
    }))
}

/// A figure of a summary, for the terminal.
fn p(v: &Value, key: &str, pct: &str) -> String {
    v[key][pct].as_f64().map_or("-".into(), |x| format!("{x:.1}"))
}

/// Runs `ferrofuse bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    let model = onnx::load_path(&args.model).with_context(|| format!("loading {}", args.model.display()))?;
    let graph = onnx::to_graph(&model).with_context(|| format!("converting {}", args.model.display()))?;
    if graph.outputs.is_empty() {
        bail!("{} declares no graph outputs: running it would compute nothing", args.model.display());
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let options = host::SessionOptions {
        precision: super::precision_of(&args.precision)?,
        ..super::run::session_options(&args.options)?
    };
    let given = args.inputs.iter().map(|s| super::run::parse_input(s)).collect::<Result<Vec<_>>>()?;
    for (n, _) in &given {
        if !graph.inputs.iter().any(|v| &graph.values[v.index()].name == n) {
            bail!("--input {n}: the model has no input named `{n}`");
        }
    }
    let ranges = parse_ranges(&args.ranges)?;
    let points = sweep(&args.binds, &input_symbols(&graph))?;
    // Every point's inputs first: a missing --bind fails before anything runs.
    let feeds = points
        .iter()
        .map(|p| inputs_at(&graph, p, &given, &ranges, args.seed).with_context(|| format!("at {}", label(p))))
        .collect::<Result<Vec<_>>>()?;
    let date =
        utc_timestamp(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default());
    let bar = indicatif::ProgressBar::new((points.len() + usize::from(args.cold_runs > 0)) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // No GPU: say so before timing anything (the cold starts would otherwise fail one by one).
    host::device::device_count().context("ferrofuse bench measures the GPU")?;
    // Cold starts first, in fresh processes, before this one holds the device.
    let cold = if args.cold_runs > 0 {
        bar.set_message("cold starts");
        let c = cold_starts(&args, &feeds[0], args.cold_runs)
            .unwrap_or_else(|e| json!({"error": format!("{e:#}")}));
        bar.inc(1);
        say(&bar, format!("cold start ({}): {}", label(&points[0]), cold_line(&c)));
        c
    } else {
        Value::Null
    };
    let ctx = host::Context::new(0)?;
    let gpu = Gpu::open(ctx.info().ordinal);
    let info = ctx.info();
    say(
        &bar,
        format!(
            "gpu: {} ({} SMs, {} flavour), precision {}, {} timed runs per measurement",
            info.name,
            info.sm_count,
            ctx.flavour().name(),
            options.precision,
            args.runs
        ),
    );
    let mut rows = Vec::with_capacity(points.len());
    for (point, inputs) in points.iter().zip(&feeds) {
        let at = label(point);
        bar.set_message(at.clone());
        let mut row = json!({"binding": point, "inputs": inputs.iter().map(|(n, t)| json!({"name": n, "dtype": format!("{:?}", t.dtype()), "shape": t.shape()})).collect::<Vec<_>>()});
        match measure(&ctx, &graph, inputs, options, (args.runs, true), gpu.as_ref().ok()) {
            Ok(fused) => {
                let graph_p50 = fused.figures["graph_us"]["p50"].as_f64();
                row["fused"] = fused.figures;
                row["items_per_run"] = json!(items(inputs));
                row["throughput_items_per_s"] = json!(graph_p50.map(|t| items(inputs) as f64 * 1e6 / t));
                if !args.no_unfused {
                    row["unfused"] =
                        match measure(&ctx, &graph, inputs, unfused(options), (args.runs, false), None) {
                            Ok(u) => {
                                let mut f = u.figures;
                                f["max_abs_diff_vs_fused"] = json!(max_abs_diff(&fused.outputs, &u.outputs));
                                f
                            }
                            Err(e) => json!({"error": format!("{e:#}")}),
                        };
                }
                if let Some(dir) = &args.out {
                    let dir = if points.len() == 1 { dir.clone() } else { dir.join(file_stem(&at)) };
                    write_all(&dir, &fused.outputs)?;
                }
            }
            Err(e) => row["error"] = json!(format!("{e:#}")),
        }
        bar.inc(1);
        say(&bar, point_line(&at, &row));
        rows.push(row);
    }
    bar.finish_and_clear();
    let report = json!({
        "tool": "ferrofuse bench",
        "version": env!("CARGO_PKG_VERSION"),
        "date": date,
        "model": args.model.display().to_string(),
        "host": hostname(),
        "gpu": {
            "name": info.name, "sm_count": info.sm_count, "compute_capability": [info.compute_capability.0, info.compute_capability.1],
            "memory_bytes": info.total_memory_bytes, "cuda_driver_api": info.driver_version, "flavour": ctx.flavour().name(),
            "driver": gpu.as_ref().ok().and_then(|g| g.driver_version()),
            "nvml": gpu.as_ref().err().map(|e| format!("unavailable: {e}")),
        },
        "precision": options.precision.to_string(),
        "options": args.options,
        "runs": args.runs,
        "cold_start": cold,
        "points": rows,
    });
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    // The process exits next: leave the context to the driver's teardown.
    std::mem::forget(ctx);
    let failed =
        report["points"].as_array().map_or(0, |r| r.iter().filter(|r| r.get("error").is_some()).count());
    if failed > 0 {
        bail!("{failed} of {} points failed (their errors are in the lines above)", points.len());
    }
    Ok(())
}

/// Prints a line above the progress bar (which draws only on a terminal; the line prints always).
fn say(bar: &indicatif::ProgressBar, line: String) {
    bar.suspend(|| println!("{line}"));
}

fn write_all(dir: &Path, outputs: &[(String, HostTensor)]) -> Result<()> {
    let names: Vec<&str> = outputs.iter().map(|(n, _)| n.as_str()).collect();
    for ((_, t), file) in outputs.iter().zip(output_files(&names)?) {
        write_output(dir, &file, t)?;
    }
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// The cold-start figures as one line.
fn cold_line(c: &Value) -> String {
    if let Some(e) = c.get("error") {
        return format!("failed: {}", e.as_str().unwrap_or_default());
    }
    let walls = |key: &str| -> String {
        let v: Vec<String> = c[key]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r["wall_ms"].as_f64()).map(|x| format!("{x:.0}")).collect())
            .unwrap_or_default();
        v.join(" / ")
    };
    format!(
        "process start to exit {} ms with an empty kernel cache, {} ms with it filled",
        walls("empty_cache"),
        walls("filled_cache")
    )
}

/// One point's figures as one line.
fn point_line(at: &str, row: &Value) -> String {
    if let Some(e) = row.get("error") {
        return format!("{at}: failed: {}", e.as_str().unwrap_or_default());
    }
    let f = &row["fused"];
    let mut line = format!(
        "{at}: graph p50 {} us (p95 {}, p99 {}), eager p50 {} us, {} steps",
        p(f, "graph_us", "p50"),
        p(f, "graph_us", "p95"),
        p(f, "graph_us", "p99"),
        p(f, "eager_us", "p50"),
        f["steps"].as_u64().map_or("-".into(), |s| s.to_string()),
    );
    if let Some(u) = row.get("unfused") {
        line += &match u.get("error") {
            Some(e) => format!("; unfused failed: {}", e.as_str().unwrap_or_default()),
            None => format!(
                "; unfused {} us, {} steps",
                p(u, "graph_us", "p50"),
                u["steps"].as_u64().map_or("-".into(), |s| s.to_string())
            ),
        };
    }
    line += &format!(
        "; H2D {} us, D2H {} us, whole run {} us",
        p(f, "h2d_us", "p50"),
        p(f, "d2h_us", "p50"),
        p(f, "full_run_wall_us", "p50")
    );
    if let Some(t) = row["throughput_items_per_s"].as_f64() {
        line += &format!("; {t:.0} items/s");
    }
    let m = &f["memory"];
    if let Some(b) = m["session_device_bytes"].as_u64() {
        line += &format!("; session {:.2} MiB", mib(b));
    }
    if let Some(b) = m["nvml_process_peak_bytes"].as_u64() {
        line += &format!(", process peak {:.1} MiB (NVML)", mib(b));
    }
    if let Some(u) = f["gpu_utilization_pct"]["mean"].as_f64() {
        line += &format!("; GPU busy {u:.0} %");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_sweep_is_every_combination() {
        let specs = ["batch=1,8".to_string(), "seq=128,512,2048".to_string()];
        let points = sweep(&specs, &symbols(&["batch", "seq"])).unwrap();
        assert_eq!(points.len(), 6);
        assert_eq!(label(&points[0]), "batch=1,seq=128");
        assert_eq!(label(&points[2]), "batch=1,seq=2048");
        assert_eq!(label(&points[5]), "batch=8,seq=2048");
        assert_eq!(sweep(&[], &[]).unwrap().len(), 1);
        assert_eq!(label(&sweep(&[], &[]).unwrap()[0]), "-");
    }

    #[test]
    fn bad_sweeps_are_refused_naming_the_symbol() {
        let e = sweep(&["btach=1".into()], &symbols(&["batch"])).unwrap_err().to_string();
        assert!(e.contains("`btach`") && e.contains("batch"), "{e}");
        let e = sweep(&["batch=1".into(), "batch=2".into()], &symbols(&["batch"])).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
        assert!(sweep(&["batch=1,x".into()], &symbols(&["batch"])).is_err());
        assert!(sweep(&["batch".into()], &symbols(&["batch"])).is_err());
        assert!(parse_ranges(&["ids=5..5".into()]).is_err());
        assert_eq!(parse_ranges(&["ids=-3..7".into()]).unwrap()["ids"], (-3, 7));
    }

    /// ids -> Gather(table [50, 4]) and a mask input: drawn ids stay below 50, the mask in {0, 1},
    /// the f32 input in [-1, 1), each in its bound shape.
    #[test]
    fn drawn_inputs_follow_their_declarations() {
        use planner::{ConstTensor, Node, TensorInfo};
        let mut g = Graph::new();
        let ids = g.add_value(
            "ids",
            Some(TensorInfo::new(DType::I64, [Dim::Symbol("batch".into()), Dim::Known(7)])),
        );
        let mask = g.add_value("mask", Some(TensorInfo::new(DType::I64, [Dim::Symbol("batch".into())])));
        let x = g.add_value("x", Some(TensorInfo::new(DType::F32, [Dim::Known(3)])));
        let table = g.add_value("table", None);
        let gathered = g.add_value("gathered", None);
        g.initializers.insert(table, ConstTensor::new(DType::F32, vec![50, 4], vec![0; 800]).unwrap());
        g.add_node(Node {
            name: "embed".into(),
            op: Op::Gather(Default::default()),
            inputs: vec![Some(table), Some(ids)],
            outputs: vec![Some(gathered)],
        });
        g.inputs = vec![ids, mask, x];
        g.outputs = vec![gathered];
        assert_eq!(integer_range(&g, ids, None), (0, 50));
        assert_eq!(integer_range(&g, mask, None), (0, 2));
        let point = BTreeMap::from([("batch".to_string(), 64usize)]);
        let feeds = inputs_at(&g, &point, &[], &BTreeMap::new(), 1).unwrap();
        assert_eq!(feeds[0].1.shape(), &[64, 7]);
        let TensorData::I64(v) = feeds[0].1.data() else { panic!("ids are i64") };
        assert!(v.iter().all(|&i| (0..50).contains(&i)) && v.iter().any(|&i| i >= 25), "{v:?}");
        let TensorData::I64(m) = feeds[1].1.data() else { panic!("mask is i64") };
        assert!(m.iter().all(|&i| i == 0 || i == 1) && m.contains(&0) && m.contains(&1));
        let TensorData::F32(f) = feeds[2].1.data() else { panic!("x is f32") };
        assert!(f.iter().all(|v| (-1.0..1.0).contains(v)) && f.iter().any(|&v| v != 0.0));
        // A range given for an input wins; an unbound symbol is an error naming input and symbol.
        let ranges = BTreeMap::from([("ids".to_string(), (10i64, 12i64))]);
        let feeds = inputs_at(&g, &point, &[], &ranges, 1).unwrap();
        let TensorData::I64(v) = feeds[0].1.data() else { panic!("ids are i64") };
        assert!(v.iter().all(|&i| i == 10 || i == 11));
        let e = inputs_at(&g, &BTreeMap::new(), &[], &BTreeMap::new(), 1).unwrap_err().to_string();
        assert!(e.contains("`ids`") && e.contains("--bind batch"), "{e}");
    }

    /// A GNN's edge index `[2, edges]`: its rows picked by Gathers, unsqueezed into `[edges, 1]`
    /// tuples for a GatherND of the node rows and a ScatterND into them. Drawn values stay below
    /// the bound node count (0 or 1 before: every message into two nodes).
    #[test]
    fn an_edge_index_is_drawn_below_the_node_count() {
        use planner::op::{GatherNd, ScatterNd, Unsqueeze};
        use planner::{ConstTensor, Node, TensorInfo};
        let sym = |s: &str| Dim::Symbol(s.into());
        let mut g = Graph::new();
        let h = g.add_value("h", Some(TensorInfo::new(DType::F32, [sym("nodes"), Dim::Known(4)])));
        let ei = g.add_value("edge_index", Some(TensorInfo::new(DType::I64, [Dim::Known(2), sym("edges")])));
        let push = |g: &mut Graph, name: &str, op: Op, inputs: Vec<ValueId>| {
            let out = g.add_value(name, None);
            g.add_node(Node {
                name: name.into(),
                op,
                inputs: inputs.into_iter().map(Some).collect(),
                outputs: vec![Some(out)],
            });
            out
        };
        let (row, axes) = (g.add_value("row", None), g.add_value("axes", None));
        g.initializers
            .insert(row, ConstTensor::new(DType::I64, vec![], 1i64.to_le_bytes().to_vec()).unwrap());
        g.initializers
            .insert(axes, ConstTensor::new(DType::I64, vec![1], 1i64.to_le_bytes().to_vec()).unwrap());
        let dst = push(&mut g, "dst", Op::Gather(Default::default()), vec![ei, row]);
        let tuples = push(&mut g, "tuples", Op::Unsqueeze(Unsqueeze::default()), vec![dst, axes]);
        let msgs = push(&mut g, "msgs", Op::GatherNd(GatherNd::default()), vec![h, tuples]);
        let agg = push(&mut g, "agg", Op::ScatterNd(ScatterNd::default()), vec![h, tuples, msgs]);
        g.inputs = vec![h, ei];
        g.outputs = vec![agg];
        let point = BTreeMap::from([("nodes".to_string(), 37usize), ("edges".to_string(), 500)]);
        let feeds = inputs_at(&g, &point, &[], &BTreeMap::new(), 3).unwrap();
        let TensorData::I64(v) = feeds[1].1.data() else { panic!("the edge index is i64") };
        assert_eq!(feeds[1].1.shape(), &[2, 500]);
        assert!(v.iter().all(|&i| (0..37).contains(&i)) && v.iter().any(|&i| i >= 30), "{v:?}");
        // Without shapes for the node rows nothing bounds it: 0 or 1, as before.
        assert_eq!(integer_range(&g, ei, None), (0, 2));
    }

    #[test]
    fn summaries_and_timestamps() {
        let s = summary((1..=100).map(f64::from).collect());
        assert_eq!(s["p50"], 51.0);
        assert_eq!(s["p99"], 99.0);
        assert_eq!(s["min"], 1.0);
        assert_eq!(s["n"], 100);
        assert_eq!(summary(vec![]), Value::Null);
        assert_eq!(utc_timestamp(Duration::from_secs(0)), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(Duration::from_secs(1_796_367_723)), "2026-12-04T07:02:03Z");
        assert_eq!(utc_timestamp(Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }
}
