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

/// Prints the summary of the model at `path`; fails (after printing it) when ops are unsupported.
pub fn run(path: &Path) -> Result<()> {
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
        Ok(())
    } else {
        println!("unsupported ops ({}):", s.unsupported.len());
        for u in &s.unsupported {
            println!("  {u}");
        }
        anyhow::bail!("{} node(s) use unsupported operators", s.unsupported.len())
    }
}
