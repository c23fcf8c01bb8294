//! Graphs of the dtypes the GPU runs by rewriting (`planner::plan::decomposed`): an f16 / bf16
//! block widened to f32, and QDQ as `onnxruntime.quantization` writes it; and inputs for them.

use planner::op::{Cast, Quantize};
use planner::{Coded, ConstTensor, DType, Dim, Graph, Op};

use super::Rng;
use crate::tensor::HostTensor;

/// A transformer-style block in `dtype` (f16 or bf16): LayerNormalization, MatMul with `dtype`
/// weights, Softmax, a tanh GELU's inner part spelled out, and a Cast to bf16 as its output; with
/// a random `[4, 16]` input `x`.
pub fn narrow_float_block(dtype: DType, rng: &mut Rng) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let x = g.input("x", dtype, [4, 16].map(Dim::Known));
    let w: Vec<f64> = (0..16 * 16).map(|_| rng.uniform(-0.5, 0.5) as f64).collect();
    let constant = |dims: &[usize], v: &[f64]| ConstTensor::from_f64s(dtype, dims, v).expect("sizes match");
    let w = g.initializer("w", constant(&[16, 16], &w));
    let gamma = g.initializer("gamma", constant(&[16], &[1.0; 16]));
    let n = g.op1(Op::LayerNormalization(Default::default()), &[x, gamma]);
    let h = g.op1(Op::MatMul, &[n, w]);
    let s = g.op1(Op::Softmax(Default::default()), &[h]);
    let cube = g.op1(Op::Mul, &[s, s]);
    let cube = g.op1(Op::Mul, &[cube, s]);
    let k = g.initializer("k", constant(&[], &[0.044715]));
    let inner = g.op1(Op::Mul, &[cube, k]);
    let inner = g.op1(Op::Add, &[inner, s]);
    let t = g.op1(Op::Tanh, &[inner]);
    let y = g.op1(Op::Cast(Cast::to(DType::BF16)), &[t]);
    g.output(y);
    let x = crate::reference::lanes::cast(&rng.tensor(&[4, 16], -2.0, 2.0), dtype, true, Default::default())
        .expect("f32 casts to f16 / bf16");
    (g, vec![("x".to_string(), x)])
}

/// QDQ as `onnxruntime.quantization` writes it: a uint8 per-tensor QuantizeLinear /
/// DequantizeLinear pair on the `[3, 8]` input, int8 weights dequantized per column, a MatMul, and
/// its result quantized to int8 (an output, beside the MatMul's f32 result); with a random input.
pub fn qdq_matmul_graph(rng: &mut Rng) -> (Graph, Vec<(String, HostTensor)>) {
    qdq_graph(rng, false, false)
}

/// [`qdq_matmul_graph`] with its MatMul a `Gemm` (B transposed, per-tensor int8 weights, an
/// int32 bias dequantized at the product's scale, beta 0.5), as `quantize_static` writes a
/// Linear exported as Gemm.
pub fn qdq_gemm_graph(rng: &mut Rng) -> (Graph, Vec<(String, HostTensor)>) {
    qdq_graph(rng, true, false)
}

/// [`qdq_gemm_graph`] with the transposed weight `[N, K]` quantized per output channel (axis 0,
/// one scale per row), as `onnxruntime.quantization` writes a `Linear` with `per_channel=True`.
pub fn qdq_gemm_per_channel_graph(rng: &mut Rng) -> (Graph, Vec<(String, HostTensor)>) {
    qdq_graph(rng, true, true)
}

fn qdq_graph(rng: &mut Rng, gemm: bool, per_channel: bool) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [3, 8].map(Dim::Known));
    let s = g.initializer("s", ConstTensor::from_f32(&[], &[0.02]).expect("a scalar"));
    let z = g.initializer("z", ConstTensor::from_i64s_as(DType::U8, &[], &[128]).expect("a scalar"));
    let q = g.op1(Op::QuantizeLinear(Quantize::default()), &[x, s, z]);
    let dq = g.op1(Op::DequantizeLinear(Quantize::default()), &[q, s, z]);
    let wq: Vec<i64> = (0..8 * 4).map(|_| (rng.next_u64() % 255) as i64 - 127).collect();
    let wdims: &[usize] = if gemm { &[4, 8] } else { &[8, 4] };
    let wq = g.initializer("wq", ConstTensor::from_i64s_as(DType::I8, wdims, &wq).expect("sizes match"));
    let h = if gemm {
        let (ws, axis) = if per_channel {
            let ws = ConstTensor::from_f32(&[4], &[0.015, 0.03, 0.0075, 0.02]).expect("sizes match");
            (g.initializer("ws", ws), 0)
        } else {
            (g.initializer("ws", ConstTensor::from_f32(&[], &[0.015]).expect("a scalar")), 1)
        };
        let w = g.op1(Op::DequantizeLinear(Quantize { axis, ..Quantize::default() }), &[wq, ws]);
        let bq: Vec<i64> = (0..4).map(|_| (rng.next_u64() % 2001) as i64 - 1000).collect();
        let bq = g.initializer("bq", ConstTensor::from_i64s_as(DType::I32, &[4], &bq).expect("sizes match"));
        let bs = g.initializer("bs", ConstTensor::from_f32(&[], &[0.02 * 0.015]).expect("a scalar"));
        let bias = g.op1(Op::DequantizeLinear(Quantize::default()), &[bq, bs]);
        let attrs = planner::op::Gemm { alpha: 1.0, beta: 0.5, trans_a: false, trans_b: true };
        g.op1(Op::Gemm(attrs), &[dq, w, bias])
    } else {
        let ws = g
            .initializer("ws", ConstTensor::from_f32(&[4], &[0.01, 0.02, 0.005, 0.03]).expect("sizes match"));
        let per_column = Quantize { axis: 1, ..Quantize::default() };
        let w = g.op1(Op::DequantizeLinear(per_column), &[wq, ws]);
        g.op1(Op::MatMul, &[dq, w])
    };
    // An int8 output with no zero point, its dtype given by output_dtype.
    let out_q = Quantize { output_dtype: Some(DType::I8), ..Quantize::default() };
    let hq = g.op1(Op::QuantizeLinear(out_q), &[h, s]);
    g.output(hq);
    g.output(h);
    (g, vec![("x".to_string(), rng.tensor(&[3, 8], -3.0, 3.0))])
}

/// QDQ around data-movement ops as `quantize_static` writes them (a view's output has its input's
/// range, so its pair gets the same scale and zero point): the uint8 input pair, a Reshape and a
/// Transpose each followed by a pair of the same scale and zero point (which gives its input back:
/// the planner drops it), then a pair of another scale (which requantizes: kept, an output) and
/// a MatMul of the transposed values with int8 weights (the second output); with a random
/// `[4, 6]` input.
pub fn qdq_views_graph(rng: &mut Rng) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [4, 6].map(Dim::Known));
    let s = g.initializer("s", ConstTensor::from_f32(&[], &[0.02]).expect("a scalar"));
    // The same scale and zero point again under other names, as exporters repeat them.
    let s_again = g.initializer("s_again", ConstTensor::from_f32(&[], &[0.02]).expect("a scalar"));
    let s2 = g.initializer("s2", ConstTensor::from_f32(&[], &[0.05]).expect("a scalar"));
    let z = g.initializer("z", ConstTensor::from_i64s_as(DType::U8, &[], &[128]).expect("a scalar"));
    let z_again =
        g.initializer("z_again", ConstTensor::from_i64s_as(DType::U8, &[], &[128]).expect("a scalar"));
    let pair = |g: &mut Graph, v, s, z| {
        let q = g.op1(Op::QuantizeLinear(Quantize::default()), &[v, s, z]);
        g.op1(Op::DequantizeLinear(Quantize::default()), &[q, s, z])
    };
    let a = pair(&mut g, x, s, z);
    let shape = g.const_i64("shape", &[2], &[3, 8]);
    let r = g.op1(Op::Reshape(Default::default()), &[a, shape]);
    let r = pair(&mut g, r, s_again, z_again);
    let t = g.op1(Op::Transpose(planner::op::Transpose { perm: Some(vec![1, 0]) }), &[r]);
    let t = pair(&mut g, t, s, z);
    let t2 = pair(&mut g, t, s2, z);
    let wq: Vec<i64> = (0..3 * 5).map(|_| (rng.next_u64() % 255) as i64 - 127).collect();
    let wq = g.initializer("wq", ConstTensor::from_i64s_as(DType::I8, &[3, 5], &wq).expect("sizes match"));
    let ws = g.initializer("ws", ConstTensor::from_f32(&[], &[0.01]).expect("a scalar"));
    let w = g.op1(Op::DequantizeLinear(Quantize::default()), &[wq, ws]);
    let y = g.op1(Op::MatMul, &[t, w]);
    g.output(t2);
    g.output(y);
    (g, vec![("x".to_string(), rng.tensor(&[4, 6], -3.0, 3.0))])
}

/// Int8 weights `[dims]` as `quantize_static` writes them with `per_channel=True`: random int8
/// values dequantized along `axis` (one scale per slice, no zero point).
fn int8_weight(g: &mut Graph, rng: &mut Rng, name: &str, dims: &[usize], axis: usize) -> planner::ValueId {
    let len: usize = dims.iter().product();
    let q: Vec<i64> = (0..len).map(|_| (rng.next_u64() % 255) as i64 - 127).collect();
    let q = g.initializer(name, ConstTensor::from_i64s_as(DType::I8, dims, &q).expect("sizes match"));
    let scales: Vec<f32> = (0..dims[axis]).map(|_| rng.uniform(0.002, 0.02)).collect();
    let s = g.initializer(
        &format!("{name}_scale"),
        ConstTensor::from_f32(&[dims[axis]], &scales).expect("sizes match"),
    );
    g.op1(Op::DequantizeLinear(Quantize { axis: axis as i64, ..Quantize::default() }), &[q, s])
}

/// Float GEMMs of weights the model dequantizes (the planner packs them on the device, once per
/// binding): `x [m, 256]` (`m` symbolic) times the per-column dequantized int8 `[256, 384]`
/// (MatMul), then a Gemm (transB) with the per-row dequantized int8 `[128, 384]`; output
/// `[m, 128]`.
pub fn dequantized_gemms_graph(rng: &mut Rng) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("m".into()), Dim::Known(256)]);
    let w1 = int8_weight(&mut g, rng, "w1", &[256, 384], 1);
    let h = g.op1(Op::MatMul, &[x, w1]);
    let w2 = int8_weight(&mut g, rng, "w2", &[128, 384], 0);
    let attrs = planner::op::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true };
    let y = g.op1(Op::Gemm(attrs), &[h, w2]);
    g.output(y);
    g
}

/// A convolution of weights the model dequantizes: `x [b, 32, 12, 12]` (`b` symbolic), a 3x3
/// Conv (padding 1) with the per-output-channel dequantized int8 `[64, 32, 3, 3]` and an f32
/// bias, then a Relu; output `[b, 64, 12, 12]`.
pub fn dequantized_conv_graph(rng: &mut Rng) -> Graph {
    int8_conv_graph(rng, false)
}

/// [`dequantized_conv_graph`], its input quantized and dequantized first when `quantized`.
fn int8_conv_graph(rng: &mut Rng, quantized: bool) -> Graph {
    let mut g = Graph::new();
    let dims = vec![Dim::Symbol("b".into()), Dim::Known(32), Dim::Known(12), Dim::Known(12)];
    let x = g.input("x", DType::F32, dims);
    let x = if quantized { fake_quantized(&mut g, x) } else { x };
    let w = int8_weight(&mut g, rng, "w", &[64, 32, 3, 3], 0);
    let bias: Vec<f32> = (0..64).map(|_| rng.uniform(-0.5, 0.5)).collect();
    let bias = g.initializer("bias", ConstTensor::from_f32(&[64], &bias).expect("sizes match"));
    let attrs = planner::op::Conv { pads: vec![1, 1, 1, 1], ..Default::default() };
    let c = g.op1(Op::Conv(attrs), &[x, w, bias]);
    let y = g.op1(Op::Relu, &[c]);
    g.output(y);
    g
}

/// A uint8 per-tensor QuantizeLinear / DequantizeLinear pair on `x`, as `quantize_static` writes
/// one on an activation (scale 0.02, zero point 128).
fn fake_quantized(g: &mut Graph, x: planner::ValueId) -> planner::ValueId {
    let s = g.initializer("x_scale", ConstTensor::from_f32(&[], &[0.02]).expect("a scalar"));
    let z =
        g.initializer("x_zero_point", ConstTensor::from_i64s_as(DType::U8, &[], &[128]).expect("a scalar"));
    let q = g.op1(Op::QuantizeLinear(Quantize::default()), &[x, s, z]);
    g.op1(Op::DequantizeLinear(Quantize::default()), &[q, s, z])
}

/// A QDQ MatMul wide enough for the large-tile GEMMs: `x [m, 256]` (`m` symbolic) quantized and
/// dequantized (uint8, per tensor), times the per-column dequantized int8 `[256, 384]`; with a
/// random `[m, 256]` input for `m`. The product multiplies integers of at most 255 (`scale_out`).
pub fn qdq_wide_matmul_graph(rng: &mut Rng, m: usize) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("m".into()), Dim::Known(256)]);
    let a = fake_quantized(&mut g, x);
    let w = int8_weight(&mut g, rng, "w", &[256, 384], 1);
    let y = g.op1(Op::MatMul, &[a, w]);
    g.output(y);
    (g, vec![("x".to_string(), rng.tensor(&[m, 256], -2.5, 2.5))])
}

/// A QDQ convolution as `quantize_static` writes one with `per_channel=True`: `x [b, 32, 12, 12]`
/// (`b` symbolic) quantized and dequantized (uint8, per tensor), a 3x3 Conv (padding 1) with the
/// per-output-channel dequantized int8 `[64, 32, 3, 3]` and an f32 bias, then a Relu; with a
/// random input of batch `b`. The convolution multiplies integers of at most 255.
pub fn qdq_conv_graph(rng: &mut Rng, b: usize) -> (Graph, Vec<(String, HostTensor)>) {
    let g = int8_conv_graph(rng, true);
    (g, vec![("x".to_string(), rng.tensor(&[b, 32, 12, 12], -2.5, 2.5))])
}

/// The cases of [`coded_weight_graph`] the tests run: `(dtype, block, cast)` for every coded type
/// (blocked and per-column dequantization, casts) and blocked int8 / uint8.
pub const CODED_WEIGHT_CASES: [(DType, bool, bool); 9] = [
    (DType::Coded(Coded::I4), true, false),
    (DType::Coded(Coded::U4), false, false),
    (DType::Coded(Coded::I2), true, false),
    (DType::Coded(Coded::F8E4M3FN), false, false),
    (DType::Coded(Coded::F8E5M2), false, true),
    (DType::Coded(Coded::F4E2M1), false, true),
    (DType::Coded(Coded::F8E8M0), false, true),
    (DType::I8, true, false),
    (DType::U8, true, false),
];

/// A weight `[100, 16]` of `dtype` dequantized (`block`: blocked along k by 32, a scale and a
/// zero point per block and column; else per column) or cast to f32 (`cast`), moved (a Reshape
/// to its own shape) and multiplied by `x [8, 100]`.
pub fn coded_weight_graph(
    rng: &mut Rng,
    dtype: DType,
    block: bool,
    cast: bool,
) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [8, 100].map(Dim::Known));
    let float = dtype.is_float();
    let w: Vec<f64> = (0..1600)
        .map(|_| if float { rng.uniform(-3.0, 3.0) as f64 } else { (rng.next_u64() % 16) as f64 - 8.0 })
        .collect();
    let wq = g.initializer("wq", ConstTensor::from_f64s(dtype, &[100, 16], &w).unwrap());
    let shape = g.const_i64("shape", &[2], &[100, 16]);
    let moved = g.op1(Op::Reshape(Default::default()), &[wq, shape]);
    let w = if cast {
        g.op1(Op::Cast(Cast::to(DType::F32)), &[moved])
    } else {
        let dims: &[usize] = if block { &[4, 16] } else { &[16] };
        let n: usize = dims.iter().product();
        let s: Vec<f32> = (0..n).map(|_| rng.uniform(0.01, 0.1)).collect();
        let s = g.initializer("s", ConstTensor::from_f32(dims, &s).unwrap());
        let z: Vec<f64> = (0..n).map(|i| if float { 0.0 } else { (i % 5) as f64 - 2.0 }).collect();
        let z = g.initializer("z", ConstTensor::from_f64s(dtype, dims, &z).unwrap());
        let q = if block {
            Quantize { axis: 0, block_size: 32, ..Default::default() }
        } else {
            Default::default()
        };
        g.op1(Op::DequantizeLinear(q), &[moved, s, z])
    };
    let y = g.op1(Op::MatMul, &[x, w]);
    g.output(y);
    (g, vec![("x".to_string(), rng.tensor(&[8, 100], -1.0, 1.0))])
}
