//! `ferrofuse inspect MODEL`: interface with symbolic dims, opsets, op histogram, parameter count,
//! and every unsupported op at once.

use std::path::Path;

use anyhow::{Context, Result};

fn shape_text(v: &onnx::ValueSummary) -> String {
    match &v.shape {
        Some(s) => s.to_string(),
        None => "(unknown rank)".into(),
    }
}

/// What `inspect` prints beyond the model summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct Show {
    /// The arena statistics (`--memory`).
    pub memory: bool,
    /// The GPU plan, one line per step (`--plan`).
    pub plan: bool,
    /// The lifted patterns and fused steps (`--fusion`).
    pub fusion: bool,
}

/// Prints the summary of the model at `path` and what `show` asks for (its memory plan, GPU plan
/// or fusion under the `NAME=SIZE` bindings); fails (after printing) when ops are unsupported.
pub fn run(path: &Path, show: Show, binds: &[String], options: host::SessionOptions) -> Result<()> {
    let model = onnx::load_path(path).with_context(|| format!("loading {}", path.display()))?;
    let s = onnx::inspect(&model);
    println!("model: {}", path.display());
    println!(
        "ir_version {}, producer {}",
        s.ir_version,
        if s.producer.is_empty() { "?" } else { &s.producer }
    );
    for o in &s.opsets {
        let domain = if o.domain.is_empty() { "ai.onnx" } else { &o.domain };
        println!(
            "opset {domain} {}{}",
            o.version,
            if o.supported { "" } else { " (outside the supported range)" }
        );
    }
    println!("inputs:");
    for v in &s.inputs {
        println!("  {:<24} {:<8} {}", v.name, v.elem_type, shape_text(v));
    }
    println!("outputs:");
    for v in &s.outputs {
        println!("  {:<24} {:<8} {}", v.name, v.elem_type, shape_text(v));
    }
    println!("parameters: {} ({:.2} MiB)", s.parameter_count, s.parameter_bytes as f64 / (1 << 20) as f64);
    println!("nodes: {}", s.node_count);
    let mut ops: Vec<_> = s.op_histogram.iter().collect();
    ops.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    for (op, n) in ops {
        println!("  {n:>6}  {op}");
    }
    if s.unsupported.is_empty() {
        println!("unsupported ops: none");
        if (show.memory || show.plan || show.fusion) && s.outputs.is_empty() {
            anyhow::bail!("{} declares no graph outputs: a plan would compute nothing", path.display());
        }
        if show.memory {
            print_memory(&model, binds, options)?;
        }
        if show.plan || show.fusion {
            print_plan(&model, binds, options, show)?;
        }
        Ok(())
    } else {
        println!("unsupported ops ({}):", s.unsupported.len());
        for u in &s.unsupported {
            println!("  {u}");
        }
        let listed: Vec<String> = s.unsupported.iter().map(|u| u.to_string()).collect();
        anyhow::bail!("{} node(s) use unsupported operators: {}", s.unsupported.len(), listed.join("; "))
    }
}

/// The `NAME=SIZE` bindings of `--bind`, warning (on stderr) about a name bound twice (the last
/// size wins) and a name that no symbolic input dim of `graph` uses (it binds nothing).
pub(crate) fn parse_binding(binds: &[String], graph: &planner::Graph) -> Result<planner::Binding> {
    let symbols: std::collections::BTreeSet<String> = graph
        .inputs
        .iter()
        .filter_map(|v| graph.values[v.index()].info.as_ref())
        .flat_map(|i| i.shape.dims().iter())
        .filter_map(|d| match d {
            planner::Dim::Symbol(s) => Some(s.clone()),
            planner::Dim::Known(_) => None,
        })
        .collect();
    let mut b = planner::Binding::new();
    for spec in binds {
        let (name, size) =
            spec.split_once('=').with_context(|| format!("--bind {spec:?}: expected NAME=SIZE"))?;
        let size: usize =
            size.parse().with_context(|| format!("--bind {spec:?}: SIZE must be a non-negative integer"))?;
        if let Some(prev) = b.get(name) {
            eprintln!("warning: --bind {name} given twice ({prev}, then {size}); using {size}");
        }
        if !symbols.contains(name) {
            let known: Vec<&str> = symbols.iter().map(String::as_str).collect();
            eprintln!(
                "warning: --bind {name}: no input dim of the model is named `{name}` (its symbols: {})",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            );
        }
        b.set(name, size);
    }
    Ok(b)
}

fn mib(bytes: u64) -> String {
    format!("{:.3} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// The multiprocessors `inspect` plans for (the H200's; a session plans for its own device).
const SM_COUNT: u32 = 132;

/// The plan options of a GPU session with `options` on a Hopper device of [`SM_COUNT`]
/// multiprocessors.
fn session_plan_options(options: host::SessionOptions) -> planner::plan::PlanOptions {
    host::session::plan_options(&options, SM_COUNT, true)
}

/// The graph a GPU session compiles for `model`: its constants folded first
/// ([`host::fold_constants`]), so that `inspect` prints the plan a session runs.
fn session_graph(model: &onnx::Model) -> Result<planner::Graph> {
    Ok(host::fold_constants(onnx::to_graph(model)?))
}

/// Plans the arena and prints the statistics and the ten biggest slots.
fn print_memory(model: &onnx::Model, binds: &[String], options: host::SessionOptions) -> Result<()> {
    let graph = session_graph(model)?;
    let binding = parse_binding(binds, &graph)?;
    let compiled = planner::plan::compile(&graph, &binding, &session_plan_options(options))
        .context("compiling the GPU plan (bind every symbolic input dim with --bind NAME=SIZE)")?;
    let names: Vec<String> = compiled.values.iter().map(|v| v.name.clone()).collect();
    let plan = compiled.memory;
    println!(
        "the arena a GPU session allocates for this binding: the memory plan of its compiled plan ({} steps; default session options, a {}-SM Hopper device)",
        compiled.steps.len(),
        SM_COUNT
    );
    let s = &plan.stats;
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    println!(
        "memory plan ({} nodes, {} values in the arena, {} dynamic):",
        plan.order.len(),
        s.arena_values,
        s.dynamic_values
    );
    println!("  arena            {:>12} bytes  {}", s.arena_bytes, mib(s.arena_bytes));
    println!(
        "  lower bound      {:>12} bytes  {}  (arena / lower bound = {:.3})",
        s.lower_bound_bytes,
        mib(s.lower_bound_bytes),
        ratio(s.arena_bytes, s.lower_bound_bytes)
    );
    println!(
        "  naive            {:>12} bytes  {}  (arena / naive = {:.3})",
        s.naive_bytes,
        mib(s.naive_bytes),
        ratio(s.arena_bytes, s.naive_bytes)
    );
    println!("  fragmentation    {:>12.3}", s.fragmentation);
    println!(
        "  largest free     {:>12} bytes at the peak (step {})",
        s.largest_free_block_bytes, s.peak_step
    );
    println!("  reused buffers   {:>12}", s.reuse_count);
    println!("  in place         {:>12}", s.in_place_count);
    let mut slots: Vec<(usize, planner::memory::BufferSlot)> =
        plan.slots.iter().enumerate().filter_map(|(i, s)| Some((i, (*s)?))).collect();
    slots.sort_by_key(|(i, s)| (std::cmp::Reverse(s.bytes), *i));
    println!("  biggest slots:");
    for (i, slot) in slots.iter().take(10) {
        let life =
            plan.lifetimes[*i].map_or("?".into(), |l| format!("steps {}..={}", l.first_step, l.last_step));
        println!(
            "    {:<32} {:>12} bytes @ {:#010x}  {life}",
            names.get(*i).map_or("(scratch)", String::as_str),
            slot.bytes,
            slot.offset
        );
    }
    Ok(())
}

/// Compiles the GPU plan for the binding and prints what `show` asks for: its fusion, and the plan
/// one line per step.
fn print_plan(
    model: &onnx::Model,
    binds: &[String],
    options: host::SessionOptions,
    show: Show,
) -> Result<()> {
    let graph = session_graph(model)?;
    let binding = parse_binding(binds, &graph)?;
    let plan = planner::plan::compile(&graph, &binding, &session_plan_options(options))
        .context("compiling the GPU plan")?;
    if show.fusion {
        print_fusion(&plan);
    }
    if !show.plan {
        return Ok(());
    }
    println!(
        "GPU plan ({} steps per run, {} once per binding; {} weights, precision {}):",
        plan.steps.len() - plan.hoisted,
        plan.hoisted,
        plan.weights.len(),
        plan.precision
    );
    println!("{plan}");
    Ok(())
}

/// The plan's lifted patterns and its fused steps (`inspect --fusion`): those computing several
/// nodes or an epilogue (a `+` in the label).
fn print_fusion(plan: &planner::plan::Plan) {
    println!("lifted patterns ({}):", plan.lifted.len());
    for l in &plan.lifted {
        println!("  {l}");
    }
    let fused: Vec<_> = (plan.steps.iter().enumerate())
        .filter_map(|(i, s)| match s {
            planner::plan::Step::Kernel { nodes, label, kernel, .. }
                if nodes.len() > 1 || label.contains('+') =>
            {
                Some((i, label, kernel.symbol()))
            }
            _ => None,
        })
        .collect();
    println!("fused steps ({} of {}):", fused.len(), plan.steps.len());
    if plan.hoisted > 0 {
        println!(
            "hoisted: steps #0 to #{} compute values of the weights alone, once per binding",
            plan.hoisted - 1
        );
    }
    for (i, label, kernel) in fused {
        println!("  #{i} {label} {kernel}");
    }
}
