//! Absurd sizes: refused before any allocation, naming the node or input.

use crate::*;
use host::reference::{Limits, eval, eval_with};
use host::{HostError, HostTensor};
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};
use std::time::{Duration, Instant};

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
    // On the CPU reference the size limit refuses it; on a GPU machine the run takes the GPU
    // path, where ConstantOfShape has no kernel yet: either error names the node.
    let stderr = cli_fails(&["run", path_str(&path), "--out", path_str(&dir)]);
    assert!(
        stderr.contains("huge_fill") && (stderr.contains("limit") || stderr.contains("no GPU kernel")),
        "{stderr}"
    );

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
    // The CPU reference refuses the declared size; a GPU session first finds the input's shape
    // differs from it. Either names the input.
    let stderr = cli_fails(&["run", path_str(&path), "--input", &format!("big={}", path_str(&npy))]);
    assert!(stderr.contains("big") && (stderr.contains("limit") || stderr.contains("declares")), "{stderr}");
}

/// The suite's endless Loop (node `spin`, 2^40 trips, a condition that stays true), as bytes.
fn endless_loop() -> Vec<u8> {
    crate::suite::endless_loop().bytes()
}

#[test]
fn a_loop_that_would_run_for_ever_stops_at_the_iteration_limit() {
    // Stopped at the limit with an error naming the node (a tight limit here; the default is 2^20).
    let g = front_end(&endless_loop()).expect("Loop");
    let x = HostTensor::new(vec![2], vec![1f32, 2.0]).expect("x");
    let tight = Limits { max_loop_iterations: 1000, ..Limits::default() };
    let e = eval_with(&g, &[("x".into(), x)], tight).expect_err("stopped");
    assert!(e.to_string().contains("spin") && e.to_string().contains("more than 1000 iterations"), "{e}");
    assert_eq!(Limits::default().max_loop_iterations, host::reference::MAX_LOOP_ITERATIONS);
}

#[test]
fn the_loop_iteration_limit_is_a_run_option() {
    // `--max-loop-iterations` reaches the executor: the GPU session where there is a device (the
    // GPU suite runs this), else the CPU reference; both name the node and the limit.
    let dir = scratch("loop_limit");
    let (model, npy) = (dir.join("spin.onnx"), dir.join("x.npy"));
    std::fs::write(&model, endless_loop()).expect("writing");
    std::fs::write(&npy, host::npy::write(&HostTensor::new(vec![2], vec![1f32, 2.0]).expect("x")))
        .expect("w");
    let x = format!("x={}", path_str(&npy));
    let e = cli_fails(&["run", path_str(&model), "--input", &x, "--max-loop-iterations", "500"]);
    assert!(e.contains("spin") && e.contains("more than 500 iterations"), "{e}");
    let e =
        cli_fails(&["run", path_str(&model), "--input", &x, "--device", "cpu", "--max-loop-iterations", "7"]);
    assert!(e.contains("spin") && e.contains("more than 7 iterations"), "{e}");
}

#[test]
fn a_plan_of_absurd_padded_sizes_is_an_error_not_an_overflow() {
    // Pad [2, 2] by 2^33 on both axes: [2^33 + 2, 2^33 + 2], an element count past 2^64 (found by
    // the `load_and_plan` fuzz target: the lowering multiplied the dims and overflowed).
    let big = 1i64 << 33;
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(2), Dim::from(2)])
        .initializer_i64("pads", &[4], &[big, big, 0, 0])
        .node_with(NodeBuilder::new("Pad", &["x", "pads"], &["y"]).name("huge_pad"))
        .output("y", DataType::Float, &[])
        .bytes();
    let graph = front_end(&bytes).expect("shape inference multiplies nothing");
    let options = planner::plan::PlanOptions::default();
    let e =
        planner::plan::compile(&graph, &planner::Binding::new(), &options).expect_err("absurd").to_string();
    assert!(e.contains("huge_pad") && e.contains("2^48 elements"), "{e}");
}

/// The 174-byte model: `ConstantOfShape([30000, 30000])` (node `fill`) read by an Add.
fn tiny_model_huge_fill() -> Vec<u8> {
    ModelBuilder::new(17)
        .input("x", DataType::Float, &[Dim::from(1)])
        .initializer_i64("shape", &[2], &[30_000, 30_000])
        .node_with(NodeBuilder::new("ConstantOfShape", &["shape"], &["zeros"]).name("fill"))
        .node_with(NodeBuilder::new("Add", &["zeros", "x"], &["y"]).name("add"))
        .output("y", DataType::Float, &[])
        .bytes()
}

#[test]
fn a_memory_budget_refuses_what_would_not_fit_before_allocating_it() {
    // 9 * 10^8 elements are within the per-tensor limit; the budget (here 1 GiB) stops the node
    // that would take the run past it, before its output is allocated.
    let graph = front_end(&tiny_model_huge_fill()).expect("legal");
    let x = HostTensor::new(vec![1], vec![1f32]).expect("x");
    let budget = Limits { max_total_bytes: 1 << 30, ..Limits::default() };
    let start = Instant::now();
    let e = eval_with(&graph, &[("x".into(), x.clone())], budget).expect_err("over budget");
    assert!(start.elapsed() < Duration::from_secs(2), "refusing took {:?}", start.elapsed());
    assert!(matches!(&e, HostError::Limit { node, .. } if node == "fill"), "{e}");
    assert!(e.to_string().contains("memory budget of 1073741824 bytes"), "{e}");

    // Through the CLI: `--max-memory` sets it (a unit, K M G T, is a power of 1024).
    let dir = scratch("budget");
    let (model, npy) = (dir.join("fill.onnx"), dir.join("x.npy"));
    std::fs::write(&model, tiny_model_huge_fill()).expect("writing");
    std::fs::write(&npy, host::npy::write(&x)).expect("w");
    let x_arg = format!("x={}", path_str(&npy));
    let run = |extra: &[&str]| {
        let mut args = vec!["run", path_str(&model), "--input", &x_arg, "--device", "cpu"];
        args.extend_from_slice(extra);
        cli(&args)
    };
    let (code, _, stderr) = run(&["--max-memory", "512M"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("fill") && stderr.contains("memory budget of 536870912 bytes"), "{stderr}");
    let (code, _, stderr) = run(&["--max-memory", "12Q"]);
    assert_eq!(code, Some(2), "a malformed size is a usage error: {stderr}");
    assert!(stderr.contains("unknown unit"), "{stderr}");

    // The budget bounds the whole run: a small graph under a budget smaller than its weights.
    let small = front_end(&small_model().bytes()).expect("valid");
    let tiny = Limits { max_total_bytes: 16, ..Limits::default() };
    let e = eval_with(&small, &[x_input()], tiny).expect_err("x and w hold 72 bytes");
    assert!(e.to_string().contains("inputs and initializers hold 72 bytes"), "{e}");
}

#[test]
fn a_loop_body_runs_within_what_the_enclosing_graph_leaves() {
    // The endless loop's body holds an f32[2] per iteration; with a budget smaller than what the
    // outer graph holds plus one body value, the body's first node is refused (not the loop
    // left to run until the iteration limit).
    let g = front_end(&endless_loop()).expect("Loop");
    let x = HostTensor::new(vec![2], vec![1f32, 2.0]).expect("x");
    let limits = Limits { max_total_bytes: 40, max_loop_iterations: 1000, ..Limits::default() };
    let e = eval_with(&g, &[("x".into(), x)], limits).expect_err("over budget");
    assert!(e.to_string().contains("memory budget"), "{e}");
}

#[test]
fn an_empty_output_with_an_absurd_dim_is_refused_not_sized_by() {
    // Resize to sizes [1, 0, 2^40, 2]: no elements, but one axis of 2^40 positions (found by the
    // `load_and_run` fuzz target: the reference sized a per-axis table by it and aborted).
    let bytes = ModelBuilder::new(19)
        .input("x", DataType::Float, &[Dim::from(1), Dim::from(1), Dim::from(2), Dim::from(2)])
        .initializer_i64("sizes", &[4], &[1, 0, 1 << 40, 2])
        .node_with(NodeBuilder::new("Resize", &["x", "", "", "sizes"], &["y"]).name("stretch"))
        .output("y", DataType::Float, &[])
        .bytes();
    let graph = front_end(&bytes).expect("legal");
    let x = HostTensor::new(vec![1, 1, 2, 2], vec![1f32; 4]).expect("x");
    let e = eval(&graph, &[("x".into(), x)]).expect_err("a dim of 2^40");
    assert!(matches!(&e, HostError::Limit { node, .. } if node == "stretch"), "{e}");
}

#[test]
fn an_empty_operand_with_absurd_dims_plans_without_overflow() {
    // x: f32[0, 2^40, 2^30] @ y: f32[2^30, 1]: no elements in x, but the product of its trailing
    // dims passes 2^64 (found by `load_and_plan`: the GEMM's operand strides overflowed).
    let big = |n: i64| Dim::from(n);
    let bytes = ModelBuilder::new(17)
        .input("x", DataType::Float, &[big(0), big(1 << 40), big(1 << 30)])
        .input("y", DataType::Float, &[big(1 << 30), big(1)])
        .node_with(NodeBuilder::new("MatMul", &["x", "y"], &["z"]).name("mm"))
        .output("z", DataType::Float, &[])
        .bytes();
    let graph = front_end(&bytes).expect("shape inference multiplies nothing");
    let options = planner::plan::PlanOptions::default();
    // Either plan is fine (an empty product, or an error naming the node); a panic is not.
    if let Err(e) = planner::plan::compile(&graph, &planner::Binding::new(), &options) {
        assert!(e.to_string().contains("mm"), "{e}");
    }
}
