//! The generator of the fuzz corpus seeds (ignored by default).

use crate::*;
use onnx::builder::{tensor_f32, tensor_i64};
use onnx::{DataType, Dim, ModelBuilder, NodeBuilder};

/// Writes the seed corpus of the `load_and_infer` fuzz target (`fuzz/corpus/load_and_infer`):
/// small valid models over many ops. Run with `cargo test --test bad_input -- --ignored`.
#[test]
#[ignore = "writes the fuzz seed corpus"]
fn write_fuzz_seeds() {
    let dir = crate::support::repo_dir().join("fuzz/corpus/load_and_infer");
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
