//! One node-test case: load, convert, evaluate each `test_data_set_*`, compare.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use host::{HostTensor, TensorData};
use prost::Message;

/// Longest a case may run before it is reported as a timeout (the harness moves on).
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// What happened to a case.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Every output of every data set within tolerance; the worst absolute error seen.
    Pass { ops: Vec<String>, worst: f64 },
    /// Ran, but an output differed (the first element outside tolerance, and where).
    Fail { ops: Vec<String>, detail: String },
    /// An operator, mode or dtype the front end or executor does not support.
    Unsupported { ops: Vec<String>, detail: String },
    /// Any other error (conversion, evaluation).
    Error { ops: Vec<String>, detail: String },
    /// Tensors outside f32 / i64 / bool.
    OutOfScope { ops: Vec<String>, dtypes: Vec<String> },
    /// Exceeded `CASE_TIMEOUT`.
    Timeout { ops: Vec<String> },
}

impl Outcome {
    /// The op types of the case's model.
    pub fn ops(&self) -> &[String] {
        match self {
            Outcome::Pass { ops, .. }
            | Outcome::Fail { ops, .. }
            | Outcome::Unsupported { ops, .. }
            | Outcome::Error { ops, .. }
            | Outcome::OutOfScope { ops, .. }
            | Outcome::Timeout { ops } => ops,
        }
    }

    /// Short label.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass { .. } => "pass",
            Outcome::Fail { .. } => "fail",
            Outcome::Unsupported { .. } => "unsupported",
            Outcome::Error { .. } => "error",
            Outcome::OutOfScope { .. } => "out of scope",
            Outcome::Timeout { .. } => "timeout",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Fail { detail, .. }
            | Outcome::Unsupported { detail, .. }
            | Outcome::Error { detail, .. } => {
                write!(f, "{}: {detail}", self.label())
            }
            Outcome::OutOfScope { dtypes, .. } => write!(f, "out of scope ({})", dtypes.join(", ")),
            _ => f.write_str(self.label()),
        }
    }
}

fn read_pb(path: &Path) -> Result<HostTensor, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let proto =
        onnx::proto::TensorProto::decode(bytes.as_slice()).map_err(|e| format!("{}: {e}", path.display()))?;
    let c = onnx::convert::to_const(&proto).map_err(|e| format!("{}: {e}", path.display()))?;
    HostTensor::from_const(&c).map_err(|e| e.to_string())
}

/// `input_0.pb, input_1.pb, ...` (or `output_*`) of a data set, in index order.
fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    (0..).map(|i| dir.join(format!("{prefix}_{i}.pb"))).take_while(|p| p.is_file()).collect()
}

/// What evaluates a case's graph.
#[derive(Clone, Copy)]
#[allow(dead_code)] // each harness uses one of them
pub enum Executor {
    /// The CPU reference executor.
    Reference,
    /// A GPU session on this context (the GPU conformance run).
    Gpu(&'static host::Context),
    /// Only the GPU plan, compiled on the CPU for an H200 (132 multiprocessors, Hopper) as a
    /// session would compile it (specialized on its small integer inputs; a graph the session
    /// runs in stages is refused here); once it compiles, the outputs are the reference's of the
    /// graph as the plan decomposed it (f16 widened, QuantizeLinear expanded, ...), so the
    /// expansions are checked too. Surveys which cases the GPU path refuses without a device; a
    /// compiled plan is no GPU pass.
    PlanOnly,
}

impl Executor {
    fn eval(
        self,
        graph: &planner::Graph,
        inputs: &[(String, HostTensor)],
    ) -> Result<Vec<(String, HostTensor)>, host::HostError> {
        match self {
            Executor::Reference => host::reference::eval(graph, inputs),
            Executor::Gpu(ctx) => {
                host::Session::new(ctx, graph.clone(), host::SessionOptions::default())?.run(inputs)
            }
            Executor::PlanOnly => {
                let ahead = host::PlanAhead::compile_specialized(
                    graph,
                    inputs,
                    &host::SessionOptions::default(),
                    (132, true),
                )?;
                // The graph as the plan decomposed it (widened, expanded), on the reference.
                let decomposed = planner::plan::decomposed(&ahead.graph)?;
                let names: Vec<&str> =
                    decomposed.inputs.iter().map(|v| decomposed.values[v.index()].name.as_str()).collect();
                let kept: Vec<(String, HostTensor)> =
                    inputs.iter().filter(|(n, _)| names.contains(&n.as_str())).cloned().collect();
                host::reference::eval(&decomposed, &kept)
            }
        }
    }
}

/// Runs one case with a timeout.
pub fn run_case(case: &Path, exec: Executor) -> Outcome {
    let (tx, rx) = mpsc::channel();
    let path = case.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(|| run_case_inner(&path, exec)));
    });
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(panic)) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            Outcome::Error { ops: vec![], detail: format!("PANIC: {}", msg.unwrap_or_default()) }
        }
        Err(_) => Outcome::Timeout { ops: vec![] },
    }
}

fn run_case_inner(case: &Path, exec: Executor) -> Outcome {
    let model = match onnx::load_path(&case.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return Outcome::Error { ops: vec![], detail: format!("load: {e}") },
    };
    let summary = onnx::inspect(&model);
    let ops: Vec<String> = summary.op_histogram.keys().cloned().collect();
    let sets: Vec<PathBuf> =
        (0..).map(|i| case.join(format!("test_data_set_{i}"))).take_while(|p| p.is_dir()).collect();
    let mut data = Vec::new();
    for set in &sets {
        let read_all =
            |prefix| numbered(set, prefix).iter().map(|p| read_pb(p)).collect::<Result<Vec<_>, _>>();
        match (read_all("input"), read_all("output")) {
            (Ok(i), Ok(o)) => data.push((i, o)),
            (Err(e), _) | (_, Err(e)) => {
                return Outcome::OutOfScope { ops, dtypes: vec![format!("unreadable test data: {e}")] };
            }
        }
    }
    // Every tensor dtype is in scope on both executors (a GPU plan without a kernel for a node's
    // dtype refuses it by node: unsupported there, not passed); values that are no tensors of a
    // dtype ferrofuse holds (sequences, optionals) are not.
    let mut dtypes: Vec<String> = (summary.inputs.iter().chain(&summary.outputs))
        .filter(|v| v.dtype.is_none())
        .map(|v| v.elem_type.clone())
        .collect();
    dtypes.sort();
    dtypes.dedup();
    if !dtypes.is_empty() {
        return Outcome::OutOfScope { ops, dtypes };
    }
    if !summary.unsupported.is_empty() {
        let detail = summary.unsupported.iter().map(|u| u.to_string()).collect::<Vec<_>>().join("; ");
        return Outcome::Unsupported { ops, detail };
    }
    let graph = match onnx::to_graph(&model) {
        Ok(g) => g,
        Err(e @ onnx::OnnxError::Unsupported { .. }) => {
            return Outcome::Unsupported { ops, detail: e.to_string() };
        }
        Err(e) => return Outcome::Error { ops, detail: format!("convert: {e}") },
    };
    let input_names: Vec<String> =
        graph.inputs.iter().map(|v| graph.values[v.index()].name.clone()).collect();
    let mut worst = 0.0f64;
    for (set, (inputs, expected)) in data.into_iter().enumerate() {
        let named: Vec<(String, HostTensor)> = input_names.iter().cloned().zip(inputs).collect();
        let outputs = match exec.eval(&graph, &named) {
            Ok(o) => o,
            Err(
                e @ (host::HostError::Unsupported { .. }
                | host::HostError::Plan(
                    planner::PlanError::NoKernel { .. } | planner::PlanError::Unsupported { .. },
                )),
            ) => {
                return Outcome::Unsupported { ops, detail: e.to_string() };
            }
            Err(e) => return Outcome::Error { ops, detail: format!("eval: {e}") },
        };
        if outputs.len() < expected.len() {
            return Outcome::Error {
                ops,
                detail: format!("{} outputs, expected {}", outputs.len(), expected.len()),
            };
        }
        for (k, ((name, got), want)) in outputs.iter().zip(&expected).enumerate() {
            match compare(got, want) {
                Ok(err) => worst = worst.max(err),
                Err(detail) => {
                    return Outcome::Fail {
                        ops,
                        detail: format!("data set {set}, output {k} `{name}`: {detail}"),
                    };
                }
            }
        }
    }
    Outcome::Pass { ops, worst }
}

/// `numpy.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7)` for floats (NaN matches NaN),
/// equality otherwise (strings too). Returns the worst absolute error.
fn compare(got: &HostTensor, want: &HostTensor) -> Result<f64, String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {:?}, expected {:?}", got.shape(), want.shape()));
    }
    if got.dtype() != want.dtype() {
        return Err(format!("dtype {}, expected {}", got.dtype(), want.dtype()));
    }
    if let (TensorData::String(g), TensorData::String(w)) = (got.data(), want.data()) {
        return match g.iter().zip(w).position(|(a, b)| a != b) {
            None => Ok(0.0),
            Some(i) => Err(format!("element {i}: got {:?}, expected {:?}", g[i], w[i])),
        };
    }
    let exact = !matches!(
        want.data(),
        TensorData::F32(_) | TensorData::F64(_) | TensorData::F16(_) | TensorData::BF16(_)
    );
    let (g, w) = (got.data().to_f64s(), want.data().to_f64s());
    let mut worst = 0.0f64;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = if a.is_nan() || b.is_nan() {
            a.is_nan() && b.is_nan()
        } else if exact {
            a == b
        } else {
            a == b || (a - b).abs() <= 1e-7 + 1e-3 * b.abs()
        };
        if !ok {
            return Err(format!("element {i}: got {a:e}, expected {b:e}"));
        }
        if a.is_finite() && b.is_finite() {
            worst = worst.max((a - b).abs());
        }
    }
    Ok(worst)
}
