//! The hostile-model suite: small model files checked in under `tests/bad_input/models/`, one
//! per class of hostile or careless input, each run through the binary as a user would — the CPU
//! reference (`run --device cpu`) and the GPU plan compile (`inspect --plan`) — and required to
//! end in a clear error naming what is at fault, or in a correct result, without a panic, with a
//! bounded peak memory (the runs get `--max-memory 1G`), and well before a hang guard.
//!
//! The files are written by [`write_hostile_models`] (`cargo test --test bad_input --
//! --ignored write_hostile_models`); [`the_checked_in_models_are_the_generators`] keeps them and
//! the generator in step.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use host::HostTensor;
use onnx::builder::{tensor_external, tensor_raw, value_info};
use onnx::proto::{FunctionProto, OperatorSetIdProto};
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};
use prost::Message;

use super::{Encode, path_str, scratch, small_model, support};

/// What a run must end in.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Exit code 1, stderr holding every string (the node or input at fault, and why).
    Fails(&'static [&'static str]),
    /// Exit code 0, stdout holding every string.
    Runs(&'static [&'static str]),
}

/// One model of the suite.
struct Case {
    /// File stem under `tests/bad_input/models/`.
    name: &'static str,
    /// The model's bytes.
    bytes: Vec<u8>,
    /// Inputs, written next to it as `<name>.<input>.npy`.
    inputs: Vec<(&'static str, HostTensor)>,
    /// Extra arguments of the CPU run.
    args: &'static [&'static str],
    /// The CPU reference run (`run --device cpu --max-memory 1G`).
    cpu: Expect,
    /// The GPU plan compile (`inspect --plan`).
    plan: Expect,
}

/// The memory budget of every run, and the peak it bounds (the budget plus the process itself).
const BUDGET: &str = "1G";
const PEAK_BOUND_KB: i64 = 1280 * 1024;

/// A run that has not ended after this long is a hang.
const HANG: Duration = Duration::from_secs(60);

fn f32s(shape: &[usize], v: &[f32]) -> HostTensor {
    HostTensor::new(shape.to_vec(), v.to_vec()).expect("shape")
}

/// A Loop (node `loop_name`) of `trips` trips over `x: f32[x_len]`, its condition passed through
/// unchanged (true) and its carried value computed from `v` by `step` (output `v_out`).
fn carried_loop(body_name: &str, step: NodeBuilder, trips: i64, x_len: i64, loop_name: &str) -> ModelBuilder {
    let vi = |n: &str, t: DataType| value_info(n, t, &[]);
    let body = onnx::proto::GraphProto {
        name: body_name.into(),
        node: vec![NodeBuilder::new("Identity", &["cond_in"], &["cond_out"]).build(), step.build()],
        input: vec![vi("i", DataType::Int64), vi("cond_in", DataType::Bool), vi("v", DataType::Float)],
        output: vec![vi("cond_out", DataType::Undefined), vi("v_out", DataType::Undefined)],
        ..Default::default()
    };
    ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(x_len)])
        .initializer_i64("trips", &[], &[trips])
        .initializer(tensor_raw("go", DataType::Bool, &[], vec![1]))
        .node_with(
            NodeBuilder::new("Loop", &["trips", "go", "x"], &["y"]).attr_graph("body", body).name(loop_name),
        )
        .output("y", DataType::Float, &[])
}

/// A Loop (node `spin`) of 2^40 trips whose condition stays true, passing `x: f32[2]` through.
pub(crate) fn endless_loop() -> ModelBuilder {
    carried_loop("forever", NodeBuilder::new("Identity", &["v"], &["v_out"]), 1 << 40, 2, "spin")
}

/// A Loop (node `grow`) of 40 trips whose body (node `double`) concatenates the carried tensor
/// with itself: 2^40 elements at the end.
fn doubling_loop() -> ModelBuilder {
    let double = NodeBuilder::new("Concat", &["v", "v"], &["v_out"]).attr_int("axis", 0).name("double");
    carried_loop("doubling", double, 40, 1, "grow")
}

/// An If (node `pick`) whose then branch gives f32 and else branch i64.
fn if_of_two_dtypes() -> ModelBuilder {
    let branch = |name: &str, t: onnx::proto::TensorProto, dtype| onnx::proto::GraphProto {
        name: name.into(),
        node: vec![NodeBuilder::new("Constant", &[], &["out"]).attr_tensor("value", t).build()],
        output: vec![value_info("out", dtype, &[Dim::from(1)])],
        ..Default::default()
    };
    ModelBuilder::new(17)
        .input("c", DataType::Bool, &[])
        .node_with(
            NodeBuilder::new("If", &["c"], &["y"])
                .attr_graph(
                    "then_branch",
                    branch("then", onnx::builder::tensor_f32("t", &[1], &[1.0]), DataType::Float),
                )
                .attr_graph(
                    "else_branch",
                    branch("else", onnx::builder::tensor_i64("e", &[1], &[1]), DataType::Int64),
                )
                .name("pick"),
        )
        .output("y", DataType::Float, &[])
}

/// `y = Twice(x)` through the model-local function `local.fn::Twice(a) = a + a` (node `call`).
fn local_function() -> Vec<u8> {
    let mut proto = ModelBuilder::new(17)
        .opset_import("local.fn", 1)
        .input("x", DataType::Float, &[Dim::from(2)])
        .node_with(NodeBuilder::new("Twice", &["x"], &["y"]).domain("local.fn").name("call"))
        .output("y", DataType::Float, &[Dim::from(2)])
        .build();
    proto.functions = vec![FunctionProto {
        name: "Twice".into(),
        domain: "local.fn".into(),
        input: vec!["a".into()],
        output: vec!["b".into()],
        node: vec![NodeBuilder::new("Add", &["a", "a"], &["b"]).build()],
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 17 }],
        ..Default::default()
    }];
    proto.encode_to_vec()
}

/// Every model of the suite, with its inputs and what it must end in.
fn cases() -> Vec<Case> {
    let f = DataType::Float;
    let one = || vec![("x", f32s(&[1], &[1.0]))];
    let two = || vec![("x", f32s(&[2], &[-1.0, 2.0]))];
    let two_by_three = || vec![("x", f32s(&[2, 3], &[0.5; 6]))];
    vec![
        Case {
            // The 174-byte model: ConstantOfShape([30000, 30000]) read by an Add.
            name: "huge_fill",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(1)])
                .initializer_i64("shape", &[2], &[30_000, 30_000])
                .node_with(NodeBuilder::new("ConstantOfShape", &["shape"], &["zeros"]).name("fill"))
                .node_with(NodeBuilder::new("Add", &["zeros", "x"], &["y"]).name("add"))
                .output("y", f, &[])
                .bytes(),
            inputs: one(),
            args: &[],
            cpu: Expect::Fails(&["`fill`", "memory budget"]),
            plan: Expect::Fails(&["fill (ConstantOfShape)", "no GPU kernel"]),
        },
        Case {
            // A uint8 tensor of 2 * 10^9 elements (under the per-tensor element limit).
            name: "u8_two_billion",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(1)])
                .initializer_i64("shape", &[1], &[2_000_000_000])
                .node_with(
                    NodeBuilder::new("ConstantOfShape", &["shape"], &["y"])
                        .attr_tensor("value", tensor_raw("v", DataType::Uint8, &[1], vec![7]))
                        .name("bytes"),
                )
                .output("y", DataType::Uint8, &[])
                .bytes(),
            inputs: one(),
            args: &[],
            cpu: Expect::Fails(&["`bytes`", "memory budget"]),
            plan: Expect::Fails(&["bytes (ConstantOfShape)", "no GPU kernel"]),
        },
        Case {
            name: "doubling_loop",
            bytes: doubling_loop().bytes(),
            inputs: one(),
            args: &[],
            cpu: Expect::Fails(&["`double`", "memory budget"]),
            // One plan has no Loop; a GPU session drives it from the host.
            plan: Expect::Fails(&["grow (Loop)", "no GPU kernel"]),
        },
        Case {
            name: "endless_loop",
            bytes: endless_loop().bytes(),
            inputs: two(),
            args: &["--max-loop-iterations", "1000"],
            cpu: Expect::Fails(&["`spin`", "more than 1000 iterations"]),
            plan: Expect::Fails(&["spin (Loop)", "no GPU kernel"]),
        },
        Case {
            // Declared int64[7, 7], computes float[2, 3].
            name: "declared_output_mismatch",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(2), Dim::from(3)])
                .node_with(NodeBuilder::new("Relu", &["x"], &["y"]).name("act"))
                .output("y", DataType::Int64, &[Dim::from(7), Dim::from(7)])
                .bytes(),
            inputs: two_by_three(),
            args: &[],
            cpu: Expect::Fails(&["act", "int64[7,7]"]),
            plan: Expect::Fails(&["act", "int64[7,7]"]),
        },
        Case {
            name: "if_branch_dtypes",
            bytes: if_of_two_dtypes().bytes(),
            inputs: vec![("c", HostTensor::new(vec![], vec![true]).expect("c"))],
            args: &[],
            cpu: Expect::Fails(&["pick"]),
            plan: Expect::Fails(&["pick"]),
        },
        Case {
            name: "argmax_of_a_scalar",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[])
                .node_with(NodeBuilder::new("ArgMax", &["x"], &["y"]).name("best"))
                .output("y", DataType::Int64, &[])
                .bytes(),
            inputs: vec![("x", f32s(&[], &[3.0]))],
            args: &[],
            cpu: Expect::Fails(&["best", "rank 0"]),
            plan: Expect::Fails(&["best", "rank 0"]),
        },
        Case {
            name: "unknown_attribute",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(2)])
                .node_with(NodeBuilder::new("Relu", &["x"], &["y"]).attr_int("bogus", 1).name("act"))
                .output("y", f, &[Dim::from(2)])
                .bytes(),
            inputs: two(),
            args: &[],
            cpu: Expect::Fails(&["'act'", "'bogus'", "refused, not ignored"]),
            plan: Expect::Fails(&["'act'", "'bogus'", "refused, not ignored"]),
        },
        Case {
            name: "range_nan_limit",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[])
                .initializer_f32("start", &[], &[0.0])
                .initializer_f32("delta", &[], &[1.0])
                .node_with(NodeBuilder::new("Range", &["start", "x", "delta"], &["y"]).name("steps"))
                .output("y", f, &[])
                .bytes(),
            inputs: vec![("x", f32s(&[], &[f32::NAN]))],
            args: &[],
            cpu: Expect::Fails(&["steps", "NaN"]),
            plan: Expect::Fails(&["steps (Range)", "no GPU kernel"]),
        },
        Case {
            // Normalized over an axis of size 0: an empty output, NaN statistics.
            name: "layer_norm_empty_axis",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(2), Dim::from(0)])
                .initializer_f32("scale", &[0], &[])
                .node_with(NodeBuilder::new("LayerNormalization", &["x", "scale"], &["y"]).name("norm"))
                .output("y", f, &[Dim::from(2), Dim::from(0)])
                .bytes(),
            inputs: vec![("x", f32s(&[2, 0], &[]))],
            args: &[],
            cpu: Expect::Runs(&["output y: float [2, 0]"]),
            plan: Expect::Runs(&["0 steps"]),
        },
        Case {
            name: "no_outputs",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(2)])
                .node_with(NodeBuilder::new("Relu", &["x"], &["y"]).name("act"))
                .bytes(),
            inputs: two(),
            args: &[],
            cpu: Expect::Fails(&["no graph outputs"]),
            plan: Expect::Fails(&["no graph outputs"]),
        },
        Case {
            name: "local_function",
            bytes: local_function(),
            inputs: two(),
            args: &[],
            cpu: Expect::Runs(&["output y", "-2", "4"]),
            plan: Expect::Runs(&["Add"]),
        },
        Case {
            // The weight `w` is also a graph input (a default): fed here as ones.
            name: "fed_default_initializer",
            bytes: small_model().input("w", f, &[Dim::from(3), Dim::from(4)]).bytes(),
            inputs: vec![("x", f32s(&[2, 3], &[0.5; 6])), ("w", f32s(&[3, 4], &[1.0; 12]))],
            args: &[],
            cpu: Expect::Runs(&["1.5"]),
            plan: Expect::Runs(&["mm"]),
        },
        Case {
            name: "cycle",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(2)])
                .node_with(NodeBuilder::new("Add", &["x", "b"], &["a"]).name("first"))
                .node_with(NodeBuilder::new("Relu", &["a"], &["b"]).name("second"))
                .output("b", f, &[Dim::from(2)])
                .bytes(),
            inputs: two(),
            args: &[],
            cpu: Expect::Fails(&["first"]),
            plan: Expect::Fails(&["first"]),
        },
        Case {
            name: "truncated",
            bytes: {
                let b = small_model().bytes();
                b[..b.len() * 2 / 3].to_vec()
            },
            inputs: two_by_three(),
            args: &[],
            cpu: Expect::Fails(&["truncated.onnx"]),
            plan: Expect::Fails(&["truncated.onnx"]),
        },
        Case {
            // An initializer whose external data lies outside the model's folder.
            name: "external_data_escape",
            bytes: small_model()
                .initializer(tensor_external(
                    "b",
                    DataType::Float,
                    &[4],
                    "../../../../etc/passwd",
                    None,
                    None,
                ))
                .bytes(),
            inputs: two_by_three(),
            args: &[],
            cpu: Expect::Fails(&["etc/passwd"]),
            plan: Expect::Fails(&["etc/passwd"]),
        },
        Case {
            name: "unknown_op",
            bytes: ModelBuilder::new(17)
                .input("x", f, &[Dim::from(2)])
                .node_with(NodeBuilder::new("FrobnicateV9", &["x"], &["y"]).name("mystery"))
                .output("y", f, &[Dim::from(2)])
                .bytes(),
            inputs: two(),
            args: &[],
            cpu: Expect::Fails(&["mystery", "FrobnicateV9"]),
            plan: Expect::Fails(&["mystery", "FrobnicateV9"]),
        },
    ]
}

fn models_dir() -> PathBuf {
    support::repo_dir().join("tests/bad_input/models")
}

/// The files of `case`: the model, then each input (name, path).
fn files(dir: &Path, case: &Case) -> (PathBuf, Vec<(&'static str, PathBuf)>) {
    let model = dir.join(format!("{}.onnx", case.name));
    let inputs = case.inputs.iter().map(|(n, _)| (*n, dir.join(format!("{}.{n}.npy", case.name)))).collect();
    (model, inputs)
}

/// Writes the suite's files (run with `--ignored` after changing [`cases`]).
#[test]
#[ignore = "writes tests/bad_input/models"]
fn write_hostile_models() {
    let dir = models_dir();
    std::fs::create_dir_all(&dir).expect("models folder");
    for case in cases() {
        let (model, inputs) = files(&dir, &case);
        std::fs::write(&model, &case.bytes).expect("writing a model");
        for ((_, t), (_, path)) in case.inputs.iter().zip(inputs) {
            std::fs::write(path, host::npy::write(t)).expect("writing an input");
        }
    }
}

#[test]
fn the_checked_in_models_are_the_generators() {
    let dir = models_dir();
    let mut expected = Vec::new();
    for case in cases() {
        let (model, inputs) = files(&dir, &case);
        let on_disk = std::fs::read(&model).unwrap_or_else(|e| panic!("{}: {e}", model.display()));
        assert!(on_disk == case.bytes, "{} differs from its generator: run write_hostile_models", case.name);
        expected.push(model);
        for ((_, t), (_, path)) in case.inputs.iter().zip(inputs) {
            let on_disk = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(on_disk == host::npy::write(t), "{} differs from its generator", path.display());
            expected.push(path);
        }
    }
    let mut present: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("models folder").map(|e| e.expect("entry").path()).collect();
    present.sort();
    expected.sort();
    assert_eq!(present, expected, "files in {} that no case writes, or missing ones", dir.display());
}

/// How one run of the binary ended.
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    wall: Duration,
    peak_kb: i64,
}

/// Runs the binary with `args` (output to files, so nothing blocks on a pipe), waits with
/// `wait4` for its own peak resident size, and kills it after [`HANG`].
fn measured(args: &[&str], scratch: &Path) -> Outcome {
    let (out, err) = (scratch.join("stdout"), scratch.join("stderr"));
    let start = Instant::now();
    let child = Command::new(support::ferrofuse_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).expect("stdout file"))
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("running ferrofuse");
    let pid = child.id() as libc::pid_t;
    let done = Arc::new(AtomicBool::new(false));
    let guard = {
        let done = done.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + HANG;
            while Instant::now() < until {
                if done.load(Ordering::SeqCst) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: `pid` is our child, not yet reaped (the waiter sets `done` after reaping).
            !done.load(Ordering::SeqCst) && unsafe { libc::kill(pid, libc::SIGKILL) } == 0
        })
    };
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; `status` and `usage` are valid for writes.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    done.store(true, Ordering::SeqCst);
    let wall = start.elapsed();
    let killed = guard.join().expect("guard thread");
    assert_eq!(reaped, pid, "wait4 failed");
    assert!(!killed, "ferrofuse {args:?} hung: killed after {HANG:?}");
    drop(child); // reaped above
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).expect("output file")).into_owned();
    Outcome { code, stdout: read(&out), stderr: read(&err), wall, peak_kb: usage.ru_maxrss }
}

/// What is wrong with `o` against `expect`, if anything.
fn check(what: &str, o: &Outcome, expect: Expect) -> Option<String> {
    let fail = |why: String| Some(format!("{what}: {why}\nstdout: {}\nstderr: {}", o.stdout, o.stderr));
    if o.stderr.contains("panicked") {
        return fail("panicked".into());
    }
    if o.peak_kb >= PEAK_BOUND_KB {
        return fail(format!("peaked at {} KB", o.peak_kb));
    }
    let (code, text, needles) = match expect {
        Expect::Fails(needles) => (1, &o.stderr, needles),
        Expect::Runs(needles) => (0, &o.stdout, needles),
    };
    if o.code != Some(code) {
        return fail(format!("exit {:?}, expected {code}", o.code));
    }
    needles.iter().find(|n| !text.contains(*n)).and_then(|n| fail(format!("{n:?} missing")))
}

#[test]
fn hostile_models_end_in_clear_errors_or_correct_results() {
    let dir = models_dir();
    let work = scratch("suite");
    let mut failures = Vec::new();
    for case in cases() {
        let (model, inputs) = files(&dir, &case);
        let specs: Vec<String> = inputs.iter().map(|(n, p)| format!("{n}={}", path_str(p))).collect();
        let mut run = vec!["run", path_str(&model), "--device", "cpu", "--max-memory", BUDGET];
        for s in &specs {
            run.extend(["--input", s.as_str()]);
        }
        run.extend_from_slice(case.args);
        let o = measured(&run, &work);
        eprintln!(
            "{:<26} cpu:  exit {:?}, {:>7.1} ms, peak {:>7} KB: {}",
            case.name,
            o.code,
            o.wall.as_secs_f64() * 1e3,
            o.peak_kb,
            o.stderr.lines().last().unwrap_or("")
        );
        failures.extend(check(&format!("{} (run --device cpu)", case.name), &o, case.cpu));
        let o = measured(&["inspect", path_str(&model), "--plan"], &work);
        eprintln!(
            "{:<26} plan: exit {:?}, {:>7.1} ms, peak {:>7} KB: {}",
            case.name,
            o.code,
            o.wall.as_secs_f64() * 1e3,
            o.peak_kb,
            o.stderr.lines().last().unwrap_or("")
        );
        failures.extend(check(&format!("{} (inspect --plan)", case.name), &o, case.plan));
    }
    assert!(
        failures.is_empty(),
        "{} of the suite's runs went wrong:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
