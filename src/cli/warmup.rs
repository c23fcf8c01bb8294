//! `ferrofuse warmup [MODEL] [--bind NAME=SIZE ...]`: fills the kernel cache ahead of the first
//! run (for container images and deployment): every kernel of the device's PTX flavour, or only
//! the kernels of MODEL's plan for the given binding.

use std::path::Path;

use anyhow::{Context as _, Result};
use host::device::KernelSource;

use super::doctor::{cache_line, load_line};

/// Runs `ferrofuse warmup`.
pub fn run(model: Option<&Path>, binds: &[String]) -> Result<()> {
    let ctx = host::Context::new(0)?;
    println!("gpu: {} ({} flavour)", ctx.info().name, ctx.flavour().name());
    let cache = ctx.kernel_cache().clone();
    if cache.dir().is_none() {
        anyhow::bail!("the kernel cache is off ({}=off): nothing to fill", host::device::cache::SWITCH_VAR);
    }
    println!("kernel cache: {}", cache_line(&cache));
    let report = match model {
        None => ctx.load_all_kernels()?,
        Some(path) => {
            let m = onnx::load_path(path).with_context(|| format!("loading {}", path.display()))?;
            let graph = onnx::to_graph(&m).with_context(|| format!("converting {}", path.display()))?;
            let dims = super::inspect::parse_binding(binds, &graph)?;
            let mut session = host::Session::new(&ctx, graph, host::SessionOptions::default())?;
            session
                .warmup(&dims)
                .context("compiling the plan (bind every symbolic input dim with --bind NAME=SIZE)")?
        }
    };
    println!("loaded: {}", load_line(&report));
    println!("kernel cache now: {}", cache_line(&cache));
    if let Some(e) = &report.write_error {
        anyhow::bail!("{e}");
    }
    let stored = report.count(KernelSource::Compiled) + report.count(KernelSource::Cache);
    let shipped = report.count(KernelSource::Shipped);
    println!("{stored} kernel(s) ready in the cache, {shipped} shipped in the binary (nothing to compile)");
    Ok(())
}
