//! Bad input, end to end: every class of broken model or run-time input gets a clear error naming
//! the node or input at fault, through the public APIs (`onnx::load_bytes` → `onnx::to_graph` →
//! `planner::shape_infer::infer` → `host::reference::eval`) and through the `ferrofuse` binary.
//! Nothing here may panic, and absurd sizes must fail fast, before anything is allocated.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use host::reference::{Limits, eval, eval_with};
use host::{HostError, HostTensor};
use onnx::builder::{tensor_f32, tensor_i64};
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};

/// A fresh scratch folder for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ferrofuse-bad-input-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating a scratch folder");
    dir
}

/// Runs the binary; returns (exit code, stdout, stderr) after checking it did not panic.
fn cli(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrofuse")).args(args).output().expect("running ferrofuse");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "ferrofuse {args:?} panicked:\n{stderr}");
    (out.status.code(), stdout, stderr)
}

/// Runs the binary on arguments that must fail; returns stderr.
fn cli_fails(args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(args);
    assert_eq!(code, Some(1), "ferrofuse {args:?} should fail\nstdout: {stdout}\nstderr: {stderr}");
    eprintln!("ferrofuse {args:?}: {stderr}");
    stderr
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("scratch paths are UTF-8")
}

/// `x: f32[2, 3]` → MatMul with `w: f32[3, 4]` (node `mm`) → Relu (node `act`) → `y: f32[2, 4]`.
fn small_model() -> ModelBuilder {
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .initializer_f32("w", &[3, 4], &w)
        .node_with(NodeBuilder::new("MatMul", &["x", "w"], &["xw"]).name("mm"))
        .node_with(NodeBuilder::new("Relu", &["xw"], &["y"]).name("act"))
        .output("y", DataType::Float, &[Dim::from(2), Dim::from(4)])
}

/// Serialises a model; outputs declared with `&[]` get no shape at all (so shape inference decides).
trait Encode {
    fn bytes(self) -> Vec<u8>;
}

impl Encode for ModelBuilder {
    fn bytes(self) -> Vec<u8> {
        use onnx::proto::type_proto::Value;
        use prost::Message;
        let mut proto = self.build();
        for out in proto.graph.iter_mut().flat_map(|g| g.output.iter_mut()) {
            if let Some(Value::TensorType(t)) = out.r#type.as_mut().and_then(|t| t.value.as_mut())
                && t.shape.as_ref().is_some_and(|s| s.dim.is_empty())
            {
                t.shape = None;
            }
        }
        proto.encode_to_vec()
    }
}

/// Load, convert and infer shapes; the first error, as text.
fn front_end(bytes: &[u8]) -> Result<planner::Graph, String> {
    let model = onnx::load_bytes(bytes, None).map_err(|e| e.to_string())?;
    let graph = onnx::to_graph(&model).map_err(|e| e.to_string())?;
    planner::shape_infer::infer(&graph).map_err(|e| e.to_string())?;
    Ok(graph)
}

fn front_end_err(bytes: &[u8]) -> String {
    match front_end(bytes) {
        Ok(_) => panic!("the model should be rejected"),
        Err(e) => {
            eprintln!("rejected: {e}");
            e
        }
    }
}

/// A deterministic byte stream (xorshift).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

fn x_input() -> (String, HostTensor) {
    ("x".into(), HostTensor::new(vec![2, 3], vec![0.5f32; 6]).expect("2x3"))
}

#[test]
fn truncated_model_files_are_rejected_without_panicking() {
    let bytes = small_model().bytes();
    assert!(front_end(&bytes).is_ok());
    let mut rejected = 0;
    for len in 0..bytes.len() {
        // A prefix may end on a field boundary and still decode; then it must still not panic.
        match front_end(&bytes[..len]) {
            Err(e) => {
                assert!(!e.is_empty());
                rejected += 1;
            }
            Ok(g) => {
                let _ = eval(&g, &[x_input()]);
            }
        }
    }
    assert!(rejected > bytes.len() / 2, "only {rejected} of {} prefixes rejected", bytes.len());
    let dir = scratch("truncated");
    let path = dir.join("half.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("writing");
    let stderr = cli_fails(&["inspect", path_str(&path)]);
    assert!(stderr.contains("half.onnx"), "{stderr}");
}

#[test]
fn garbage_bytes_are_rejected() {
    for seed in 1..64u64 {
        let bytes = noise(seed, 16 + seed as usize * 37);
        assert!(front_end(&bytes).is_err(), "garbage seed {seed} was accepted");
    }
    let dir = scratch("garbage");
    let path = dir.join("garbage.onnx");
    std::fs::write(&path, noise(7, 4096)).expect("writing");
    let stderr = cli_fails(&["inspect", path_str(&path)]);
    assert!(stderr.contains("garbage.onnx") && stderr.contains("decode"), "{stderr}");
    let stderr = cli_fails(&["run", path_str(&path)]);
    assert!(stderr.contains("garbage.onnx"), "{stderr}");
    let stderr = cli_fails(&["inspect", path_str(&dir.join("absent.onnx"))]);
    assert!(stderr.contains("absent.onnx"), "{stderr}");
    // Each cause is printed once, even when the error's own message already quotes it.
    assert_eq!(stderr.matches("os error").count(), 1, "{stderr}");
}

#[test]
fn unknown_ops_are_listed_with_their_nodes() {
    let bytes = small_model()
        .node_with(NodeBuilder::new("FrobnicateTensor", &["y"], &["z"]).name("mystery_node"))
        .output("z", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("FrobnicateTensor") && e.contains("mystery_node"), "{e}");
    let dir = scratch("unknown-op");
    let path = dir.join("m.onnx");
    std::fs::write(&path, &bytes).expect("writing");
    let stderr = cli_fails(&["run", path_str(&path), "--input", "x=unused.npy"]);
    assert!(stderr.contains("FrobnicateTensor"), "{stderr}");
}

#[test]
fn undefined_inputs_and_missing_initializers_name_the_node() {
    // `w` is used but neither an input, an initializer nor a node output.
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .node_with(NodeBuilder::new("MatMul", &["x", "w"], &["y"]).name("mm"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("mm") && e.contains("'w'"), "{e}");
    // An output nobody defines.
    let bytes = small_model().output("ghost", DataType::Float, &[]).bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("ghost"), "{e}");
}

#[test]
fn cycles_are_rejected_naming_a_node() {
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2)])
        .node_with(NodeBuilder::new("Add", &["x", "b"], &["a"]).name("first"))
        .node_with(NodeBuilder::new("Relu", &["a"], &["b"]).name("second"))
        .output("b", DataType::Float, &[Dim::from(2)])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("first") || e.contains("second"), "{e}");
    assert!(e.contains("cycle") || e.contains("not defined") || e.contains("before"), "{e}");
}

#[test]
fn shape_mismatches_name_the_node() {
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .initializer_f32("w", &[4, 5], &[0.0; 20])
        .node_with(NodeBuilder::new("MatMul", &["x", "w"], &["y"]).name("bad_matmul"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("bad_matmul"), "{e}");
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(3)])
        .input("z", DataType::Float, &[Dim::from(4), Dim::from(3)])
        .node_with(NodeBuilder::new("Add", &["x", "z"], &["y"]).name("bad_add"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("bad_add"), "{e}");
}

#[test]
fn data_dependent_ranks_are_explained() {
    // The output rank of ConstantOfShape is the length of its shape input, unknown here.
    let bytes = ModelBuilder::new(17)
        .input("s", DataType::Int64, &[Dim::from("n")])
        .node_with(NodeBuilder::new("ConstantOfShape", &["s"], &["y"]).name("dyn_fill"))
        .output("y", DataType::Float, &[])
        .bytes();
    let e = front_end_err(&bytes);
    assert!(e.contains("dyn_fill") && e.contains("run-time"), "{e}");
}

/// Runs `graph` with `inputs` and expects a [`HostError::Limit`] naming `node`, fast.
fn expect_limit(graph: &planner::Graph, inputs: &[(String, HostTensor)], node: &str) {
    let start = Instant::now();
    let e = eval(graph, inputs).expect_err("an absurd size must be refused");
    assert!(start.elapsed() < Duration::from_secs(5), "refusing took {:?}", start.elapsed());
    assert!(matches!(&e, HostError::Limit { node: n, .. } if n == node), "{e}");
    assert!(e.to_string().contains(node) && e.to_string().contains("limit"), "{e}");
}

#[test]
fn absurd_sizes_from_data_are_refused_before_allocating() {
    let start = Instant::now();
    // ConstantOfShape with a 10^12-element shape, from an initializer (shape inference and folding
    // see it) and from a graph input (only the executor does).
    let bytes = ModelBuilder::new(17)
        .initializer_i64("shape", &[2], &[1_000_000, 1_000_000])
        .node_with(NodeBuilder::new("ConstantOfShape", &["shape"], &["y"]).name("huge_fill"))
        .output("y", DataType::Float, &[])
        .bytes();
    let graph = front_end(&bytes).expect("a huge shape is legal in the model");
    planner::fold::run(&graph).expect("folding skips large constants");
    expect_limit(&graph, &[], "huge_fill");
    let dir = scratch("absurd");
    let path = dir.join("huge.onnx");
    std::fs::write(&path, &bytes).expect("writing");
    let stderr = cli_fails(&["run", path_str(&path), "--out", path_str(&dir)]);
    assert!(stderr.contains("huge_fill") && stderr.contains("limit"), "{stderr}");

    let shape_input = |op: &str, node: NodeBuilder, extra: &[(&str, DataType)], len: i64| {
        let mut b = ModelBuilder::new(18).input("s", DataType::Int64, &[Dim::from(len)]);
        for (name, dt) in extra {
            b = b.input(name, *dt, &[Dim::from("m")]);
        }
        front_end(&b.node_with(node).output("y", DataType::Float, &[]).bytes())
            .unwrap_or_else(|e| panic!("{op}: {e}"))
    };
    let ints = |v: &[i64]| HostTensor::new(vec![v.len()], v.to_vec()).expect("1-D");
    let g = shape_input(
        "ConstantOfShape",
        NodeBuilder::new("ConstantOfShape", &["s"], &["y"]).name("fill"),
        &[],
        2,
    );
    expect_limit(&g, &[("s".into(), ints(&[1 << 20, 1 << 20]))], "fill");
    // Overflowing usize entirely.
    expect_limit(&g, &[("s".into(), ints(&[i64::MAX, i64::MAX]))], "fill");

    let g = shape_input(
        "Expand",
        NodeBuilder::new("Expand", &["x", "s"], &["y"]).name("grow"),
        &[("x", DataType::Float)],
        1,
    );
    let x = HostTensor::new(vec![1], vec![1f32]).expect("x");
    expect_limit(&g, &[("s".into(), ints(&[1 << 40])), ("x".into(), x.clone())], "grow");

    let g = shape_input(
        "Tile",
        NodeBuilder::new("Tile", &["x", "s"], &["y"]).name("tiles"),
        &[("x", DataType::Float)],
        1,
    );
    expect_limit(&g, &[("s".into(), ints(&[1 << 40])), ("x".into(), x.clone())], "tiles");

    let g = shape_input(
        "Pad",
        NodeBuilder::new("Pad", &["x", "s"], &["y"]).name("padding"),
        &[("x", DataType::Float)],
        2,
    );
    expect_limit(&g, &[("s".into(), ints(&[0, 1 << 40])), ("x".into(), x.clone())], "padding");

    // Range and OneHot take their sizes from scalars.
    let scalar = |v: i64| HostTensor::new(vec![], vec![v]).expect("scalar");
    let g = front_end(
        &ModelBuilder::new(17)
            .input("a", DataType::Int64, &[])
            .input("b", DataType::Int64, &[])
            .input("d", DataType::Int64, &[])
            .node_with(NodeBuilder::new("Range", &["a", "b", "d"], &["y"]).name("long_range"))
            .output("y", DataType::Int64, &[])
            .bytes(),
    )
    .expect("Range");
    let args = [("a".into(), scalar(0)), ("b".into(), scalar(i64::MAX)), ("d".into(), scalar(1))];
    expect_limit(&g, &args, "long_range");
    let g = front_end(
        &ModelBuilder::new(17)
            .input("i", DataType::Int64, &[Dim::from(4)])
            .input("depth", DataType::Int64, &[])
            .initializer_f32("v", &[2], &[0.0, 1.0])
            .node_with(NodeBuilder::new("OneHot", &["i", "depth", "v"], &["y"]).name("wide_one_hot"))
            .output("y", DataType::Float, &[])
            .bytes(),
    )
    .expect("OneHot");
    let args = [("i".into(), ints(&[0, 1, 2, 3])), ("depth".into(), scalar(1 << 40))];
    expect_limit(&g, &args, "wide_one_hot");

    // Resize by a huge scale.
    let g = front_end(
        &ModelBuilder::new(19)
            .input("x", DataType::Float, &[Dim::from(1), Dim::from(1), Dim::from(2), Dim::from(2)])
            .initializer_f32("scales", &[4], &[1.0, 1.0, 1e6, 1e6])
            .node_with(NodeBuilder::new("Resize", &["x", "", "scales"], &["y"]).name("zoom"))
            .output("y", DataType::Float, &[])
            .bytes(),
    )
    .expect("Resize");
    let x4 = HostTensor::new(vec![1, 1, 2, 2], vec![1f32; 4]).expect("x");
    expect_limit(&g, &[("x".into(), x4)], "zoom");
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
}

#[test]
fn limits_are_configurable() {
    let graph = front_end(&small_model().bytes()).expect("valid");
    let tight = Limits { max_tensor_elems: 4, ..Limits::default() };
    let e = eval_with(&graph, &[x_input()], tight).expect_err("x has 6 elements");
    assert!(matches!(&e, HostError::Input { name, .. } if name == "x"), "{e}");
    let tight = Limits { max_tensor_elems: 7, ..Limits::default() };
    let e = eval_with(&graph, &[x_input()], tight).expect_err("the initializer has 12");
    assert!(e.to_string().contains("`w`"), "{e}");
    let tight = Limits { max_total_bytes: 80, ..Limits::default() };
    let e = eval_with(&graph, &[x_input()], tight).expect_err("x, w and xw hold 104 bytes");
    assert!(matches!(&e, HostError::Limit { node, .. } if node == "mm"), "{e}");
    assert!(eval_with(&graph, &[x_input()], Limits::default()).is_ok());
}

#[test]
fn absurd_declared_input_shapes_are_refused() {
    let bytes = ModelBuilder::new(17)
        .input("big", DataType::Float, &[Dim::from(1_000_000_000), Dim::from(1_000_000_000)])
        .node_with(NodeBuilder::new("Relu", &["big"], &["y"]).name("act"))
        .output("y", DataType::Float, &[])
        .bytes();
    let start = Instant::now();
    let graph = front_end(&bytes).expect("shape inference only does arithmetic on dims");
    planner::fold::run(&graph).expect("nothing to fold");
    let small = HostTensor::new(vec![1, 1], vec![0f32]).expect("1x1");
    let e = eval(&graph, &[("big".into(), small)]).expect_err("declared 10^18 elements");
    assert!(matches!(&e, HostError::Input { name, .. } if name == "big"), "{e}");
    assert!(e.to_string().contains("limit"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5));
    let dir = scratch("declared");
    let path = dir.join("big.onnx");
    std::fs::write(&path, &bytes).expect("writing");
    let (code, stdout, stderr) = cli(&["inspect", path_str(&path)]);
    assert_eq!(code, Some(0), "inspect only describes the model: {stdout}{stderr}");
    let npy = dir.join("small.npy");
    std::fs::write(&npy, host::npy::write(&HostTensor::new(vec![1, 1], vec![0f32]).expect("t"))).expect("w");
    let stderr = cli_fails(&["run", path_str(&path), "--input", &format!("big={}", path_str(&npy))]);
    assert!(stderr.contains("big") && stderr.contains("limit"), "{stderr}");
}

#[test]
fn run_time_inputs_are_checked_by_name_dtype_and_shape() {
    let graph = front_end(&small_model().bytes()).expect("valid");
    let good = x_input();
    assert!(eval(&graph, std::slice::from_ref(&good)).is_ok());
    let input_err = |inputs: &[(String, HostTensor)], name: &str, needle: &str| {
        let e = eval(&graph, inputs).expect_err("bad inputs");
        assert!(matches!(&e, HostError::Input { name: n, .. } if n == name), "{e}");
        assert!(e.to_string().contains(needle), "{e}");
    };
    input_err(&[], "x", "missing");
    input_err(&[("q".into(), good.1.clone())], "q", "not an input");
    input_err(&[good.clone(), good.clone()], "x", "more than once");
    let ints = HostTensor::new(vec![2, 3], vec![1i64; 6]).expect("i64");
    input_err(&[("x".into(), ints)], "x", "dtype");
    let wide = HostTensor::new(vec![2, 4], vec![0f32; 8]).expect("2x4");
    input_err(&[("x".into(), wide.clone())], "x", "dim 1 must be 3");
    let flat = HostTensor::new(vec![6], vec![0f32; 6]).expect("6");
    input_err(&[("x".into(), flat)], "x", "shape");

    // The same through the CLI, with .npy files.
    let dir = scratch("inputs");
    let model = dir.join("m.onnx");
    std::fs::write(&model, small_model().bytes()).expect("writing");
    let m = path_str(&model);
    let npy = |name: &str, t: &HostTensor| {
        let p = dir.join(name);
        std::fs::write(&p, host::npy::write(t)).expect("writing npy");
        format!("{}", p.display())
    };
    let ok = npy("ok.npy", &good.1);
    let (code, _, stderr) = cli(&["run", m, "--input", &format!("x={ok}"), "--out", path_str(&dir)]);
    assert_eq!(code, Some(0), "{stderr}");
    let stderr = cli_fails(&["run", m, "--input", &format!("nope={ok}")]);
    assert!(stderr.contains("nope") || stderr.contains("`x`"), "{stderr}");
    let stderr = cli_fails(&["run", m, "--input", &format!("x={ok}"), "--input", &format!("nope={ok}")]);
    assert!(stderr.contains("nope"), "{stderr}");
    let stderr = cli_fails(&["run", m]);
    assert!(stderr.contains('x'), "{stderr}");
    let i64s = npy("ints.npy", &HostTensor::new(vec![2, 3], vec![1i64; 6]).expect("i64"));
    let stderr = cli_fails(&["run", m, "--input", &format!("x={i64s}")]);
    assert!(stderr.contains("`x`") && stderr.contains("dtype"), "{stderr}");
    let wide = npy("wide.npy", &wide);
    let stderr = cli_fails(&["run", m, "--input", &format!("x={wide}")]);
    assert!(stderr.contains("`x`") && stderr.contains("dim 1"), "{stderr}");
}

#[test]
fn corrupt_npy_inputs_name_the_input() {
    let dir = scratch("npy");
    let model = dir.join("m.onnx");
    std::fs::write(&model, small_model().bytes()).expect("writing");
    let good = host::npy::write(&x_input().1);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty.npy", Vec::new()),
        ("garbage.npy", noise(3, 300)),
        ("truncated.npy", good[..good.len() - 5].to_vec()),
        ("header.npy", good[..20].to_vec()),
    ];
    for (file, bytes) in cases {
        assert!(host::npy::read(&bytes).is_err(), "{file} parsed");
        let p = dir.join(file);
        std::fs::write(&p, &bytes).expect("writing");
        let stderr = cli_fails(&["run", path_str(&model), "--input", &format!("x={}", path_str(&p))]);
        assert!(stderr.contains("input `x`") && stderr.contains(file), "{file}: {stderr}");
    }
    let stderr = cli_fails(&["run", path_str(&model), "--input", "x=/nonexistent/x.npy"]);
    assert!(stderr.contains("input `x`"), "{stderr}");
    let stderr = cli_fails(&["run", path_str(&model), "--input", "x"]);
    assert!(stderr.contains("NAME=FILE"), "{stderr}");
}

/// Writes the seed corpus of the `load_and_infer` fuzz target (`fuzz/corpus/load_and_infer`):
/// small valid models over many ops. Run with `cargo test --test bad_input -- --ignored`.
#[test]
#[ignore = "writes the fuzz seed corpus"]
fn write_fuzz_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/load_and_infer");
    std::fs::create_dir_all(&dir).expect("corpus folder");
    for (name, model) in seed_models() {
        let bytes = model.bytes();
        front_end(&bytes).unwrap_or_else(|e| panic!("seed {name}: {e}"));
        std::fs::write(dir.join(format!("seed-{name}.onnx")), bytes).expect("writing a seed");
    }
}

fn seed_models() -> Vec<(&'static str, ModelBuilder)> {
    let f = DataType::Float;
    let d = |v: &[i64]| v.iter().map(|&x| Dim::from(x)).collect::<Vec<_>>();
    let x4 = || ModelBuilder::new(17).input("x", f, &[Dim::from("n"), Dim::from(4)]);
    let unary = |op: &'static str| {
        (op, x4().node_with(NodeBuilder::new(op, &["x"], &["y"]).name("n0")).output("y", f, &[]))
    };
    let mut seeds = vec![
        ("mlp", small_model()),
        unary("Relu"),
        unary("Sigmoid"),
        unary("Tanh"),
        unary("Exp"),
        (
            "softmax",
            x4().node_with(NodeBuilder::new("Softmax", &["x"], &["y"]).attr_int("axis", -1)).output(
                "y",
                f,
                &[],
            ),
        ),
        (
            "shape_chain",
            x4().initializer_i64("i0", &[], &[0])
                .initializer_i64("ax", &[1], &[0])
                .node("Shape", &["x"], &["s"])
                .node("Gather", &["s", "i0"], &["n"])
                .node("Unsqueeze", &["n", "ax"], &["n1"])
                .initializer_i64("four", &[1], &[4])
                .node_with(NodeBuilder::new("Concat", &["n1", "four"], &["s3"]).attr_int("axis", 0))
                .node("Reshape", &["x", "s3"], &["y"])
                .output("y", f, &[]),
        ),
        (
            "const_of_shape_range",
            ModelBuilder::new(17)
                .initializer_i64("shape", &[2], &[2, 3])
                .initializer_i64("a", &[], &[0])
                .initializer_i64("b", &[], &[6])
                .initializer_i64("c", &[], &[1])
                .node("ConstantOfShape", &["shape"], &["z"])
                .node("Range", &["a", "b", "c"], &["r"])
                .node_with(NodeBuilder::new("Cast", &["r"], &["rf"]).attr_int("to", 1))
                .node("Add", &["z", "z"], &["y"])
                .output("y", f, &[])
                .output("r", DataType::Int64, &[]),
        ),
        (
            "conv_pool",
            ModelBuilder::new(17)
                .input("x", f, &d(&[1, 2, 8, 8]))
                .initializer_f32("w", &[3, 2, 3, 3], &[0.1; 54])
                .initializer_f32("b", &[3], &[0.0; 3])
                .node_with(
                    NodeBuilder::new("Conv", &["x", "w", "b"], &["c"]).attr_ints("pads", &[1, 1, 1, 1]),
                )
                .node_with(
                    NodeBuilder::new("MaxPool", &["c"], &["p"])
                        .attr_ints("kernel_shape", &[2, 2])
                        .attr_ints("strides", &[2, 2]),
                )
                .node("GlobalAveragePool", &["p"], &["g"])
                .node("Flatten", &["g"], &["y"])
                .output("y", f, &[]),
        ),
        (
            "gemm_bn",
            ModelBuilder::new(17)
                .input("x", f, &d(&[2, 3]))
                .initializer_f32("w", &[4, 3], &[0.5; 12])
                .initializer_f32("c", &[4], &[0.0; 4])
                .node_with(NodeBuilder::new("Gemm", &["x", "w", "c"], &["y"]).attr_int("transB", 1))
                .output("y", f, &[]),
        ),
        (
            "layernorm",
            x4().initializer_f32("g", &[4], &[1.0; 4])
                .initializer_f32("b", &[4], &[0.0; 4])
                .node_with(
                    NodeBuilder::new("LayerNormalization", &["x", "g", "b"], &["y"]).attr_int("axis", -1),
                )
                .output("y", f, &[]),
        ),
        (
            "reduce_transpose",
            ModelBuilder::new(18)
                .input("x", f, &d(&[2, 3, 4]))
                .initializer_i64("axes", &[1], &[1])
                .node_with(NodeBuilder::new("Transpose", &["x"], &["t"]).attr_ints("perm", &[2, 0, 1]))
                .node_with(NodeBuilder::new("ReduceMean", &["t", "axes"], &["y"]).attr_int("keepdims", 0))
                .output("y", f, &[]),
        ),
        (
            "slice_split_pad",
            ModelBuilder::new(18)
                .input("x", f, &d(&[4, 6]))
                .initializer_i64("st", &[1], &[1])
                .initializer_i64("en", &[1], &[5])
                .initializer_i64("ax", &[1], &[1])
                .initializer_i64("pads", &[4], &[0, 1, 0, 1])
                .node("Slice", &["x", "st", "en", "ax"], &["s"])
                .node_with(
                    NodeBuilder::new("Split", &["s"], &["a", "b"])
                        .attr_int("axis", 0)
                        .attr_int("num_outputs", 2),
                )
                .node("Pad", &["a", "pads"], &["y"])
                .output("y", f, &[])
                .output("b", f, &[]),
        ),
        (
            "expand_tile_where",
            ModelBuilder::new(17)
                .input("x", f, &d(&[1, 3]))
                .initializer_i64("shape", &[2], &[2, 3])
                .initializer_i64("reps", &[2], &[2, 1])
                .node("Expand", &["x", "shape"], &["e"])
                .node("Tile", &["x", "reps"], &["t"])
                .node("Greater", &["e", "t"], &["m"])
                .node("Where", &["m", "e", "t"], &["y"])
                .output("y", f, &[]),
        ),
        (
            "gather_onehot_topk",
            ModelBuilder::new(17)
                .input("x", f, &d(&[3, 5]))
                .initializer_i64("idx", &[2], &[0, 2])
                .initializer_i64("k", &[1], &[2])
                .initializer_i64("depth", &[], &[4])
                .initializer_f32("v", &[2], &[0.0, 1.0])
                .node_with(NodeBuilder::new("Gather", &["x", "idx"], &["g"]).attr_int("axis", 0))
                .node("TopK", &["g", "k"], &["tv", "ti"])
                .node("OneHot", &["ti", "depth", "v"], &["y"])
                .output("y", f, &[])
                .output("tv", f, &[]),
        ),
        (
            "resize",
            ModelBuilder::new(19)
                .input("x", f, &d(&[1, 1, 2, 2]))
                .initializer_f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0])
                .node_with(
                    NodeBuilder::new("Resize", &["x", "", "scales"], &["y"]).attr_string("mode", "nearest"),
                )
                .output("y", f, &[]),
        ),
        (
            "cast_cmp_logic",
            x4().initializer_f32("zero", &[], &[0.0])
                .node("Less", &["x", "zero"], &["l"])
                .node("Not", &["l"], &["nl"])
                .node_with(NodeBuilder::new("Cast", &["nl"], &["c"]).attr_int("to", 9))
                .node_with(NodeBuilder::new("Cast", &["nl"], &["y"]).attr_int("to", 1))
                .output("y", f, &[])
                .output("c", DataType::Bool, &[]),
        ),
        (
            "matmul_batched",
            ModelBuilder::new(17)
                .input("a", f, &d(&[2, 3, 4]))
                .input("b", f, &d(&[2, 4, 5]))
                .node("MatMul", &["a", "b"], &["y"])
                .output("y", f, &[]),
        ),
        (
            "squeeze_unsqueeze",
            ModelBuilder::new(13)
                .input("x", f, &d(&[1, 3, 1]))
                .initializer_i64("a", &[1], &[2])
                .node("Squeeze", &["x", "a"], &["s"])
                .node("Unsqueeze", &["s", "a"], &["y"])
                .output("y", f, &[]),
        ),
        (
            "constant_node",
            ModelBuilder::new(17)
                .input("x", f, &d(&[3]))
                .node_with(
                    NodeBuilder::new("Constant", &[], &["c"])
                        .attr_tensor("value", tensor_f32("c", &[3], &[1.0, 2.0, 3.0])),
                )
                .node_with(
                    NodeBuilder::new("Constant", &[], &["s"])
                        .attr_tensor("value", tensor_i64("s", &[1], &[3])),
                )
                .node("Mul", &["x", "c"], &["m"])
                .node("Reshape", &["m", "s"], &["y"])
                .output("y", f, &[]),
        ),
    ];
    seeds.retain(|(name, _)| !name.is_empty());
    seeds
}
