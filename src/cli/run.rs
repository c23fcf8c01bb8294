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
    /// Where to execute.
    pub device: Device,
    /// Folder for `<output>.npy` files.
    pub out: Option<PathBuf>,
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

/// Runs `ferrofuse run`.
pub fn run(args: RunArgs) -> Result<()> {
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
    let start = Instant::now();
    let outputs = match args.device {
        Device::Cpu => host::reference::eval(&graph, &inputs)?,
        Device::Cuda => bail!(
            "whole-model GPU execution arrives with the Session (issue 5); run with --device cpu \
             (`ferrofuse doctor` checks the GPU kernels that exist)"
        ),
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
    println!("device: {:?}, {:.3} ms", args.device, elapsed.as_secs_f64() * 1e3);
    if let Some(dir) = &args.out {
        for (n, t) in &outputs {
            let path = write_output(dir, n, t)?;
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}
