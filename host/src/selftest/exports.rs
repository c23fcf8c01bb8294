//! Attention blocks as exporters write their projections (what `planner::plan::decomposed`
//! canonicalizes and the attention fusion reads in place): BERT-style separate Q, K and V
//! projections, and `nn.MultiheadAttention`'s packed one taken apart by `unbind` (`Gather`s of
//! one index), sequence-first with Transposes around it.

use planner::op::{Gemm, Op, Squeeze};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

/// How [`projected_attention_graph`] spells its Q, K and V projections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Projections {
    /// Three `MatMul + Add` of the input (BERT, dynamo): `x [batch, seq, 16]`.
    Separate,
    /// One packed `MatMul + Add`, reshaped to `[seq, batch, 3, 16]`, unsqueezed, transposed,
    /// squeezed and `Gather`ed at 0, 1 and 2 (`nn.MultiheadAttention`, dynamo):
    /// `x [batch, seq, 16]` transposed to sequence-first and back.
    Packed,
}

/// A weight of `dims` with deterministic values.
fn weight(g: &mut Graph, name: &str, dims: &[usize], seed: f32) -> ValueId {
    let n: usize = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i as f32 + seed) * 0.618).sin() * 0.3).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).expect("sized"))
}

fn shape(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
    let v: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    g.const_i64(name, &[v.len()], &v)
}

/// Two-head self-attention (d 16, head 8) over `x [batch, seq, 16]`, its projections spelled as
/// `spelling` says, then an output projection: `y [batch, seq, 16]`.
pub fn projected_attention_graph(batch: usize, seq: usize, spelling: Projections) -> Graph {
    let (e, h, d) = (16usize, 2usize, 8usize);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(batch), Dim::Known(seq), Dim::Known(e)]);
    let scale = g.initializer("scale", ConstTensor::scalar_f32(1.0 / (d as f32).sqrt()));
    let (q, k, v) = match spelling {
        Projections::Separate => {
            let heads = shape(&mut g, "heads", &[batch, seq, h, d]);
            let proj = |g: &mut Graph, i: usize, perm: &[usize]| {
                let w = weight(g, &format!("w{i}"), &[e, e], i as f32);
                let b = weight(g, &format!("b{i}"), &[e], 10.0 + i as f32);
                let y = g.matmul(x, w);
                let y = g.add(y, b);
                let y = g.reshape(y, heads);
                g.transpose(y, perm)
            };
            let q = proj(&mut g, 0, &[0, 2, 1, 3]);
            let k = proj(&mut g, 1, &[0, 2, 3, 1]);
            let v = proj(&mut g, 2, &[0, 2, 1, 3]);
            (q, k, v)
        }
        Projections::Packed => {
            let xs = g.transpose(x, &[1, 0, 2]);
            let w = weight(&mut g, "in_proj_w", &[e, 3 * e], 0.0);
            let b = weight(&mut g, "in_proj_b", &[3 * e], 7.0);
            let y = g.matmul(xs, w);
            let y = g.add(y, b);
            let packed = shape(&mut g, "packed", &[seq, batch, 3, e]);
            let y = g.reshape(y, packed);
            let zero = g.const_i64("zero", &[1], &[0]);
            let y = g.unsqueeze(y, zero);
            let y = g.transpose(y, &[3, 1, 2, 0, 4]);
            let three = g.const_i64("three", &[1], &[3]);
            let y = g.op1(Op::Squeeze(Squeeze::default()), &[y, three]);
            let heads = shape(&mut g, "heads", &[seq, batch * h, d]);
            let part = |g: &mut Graph, i: i64| {
                let idx = g.const_i64(&format!("idx{i}"), &[], &[i]);
                let p = g.gather(y, idx, 0);
                let p = g.reshape(p, heads);
                g.transpose(p, &[1, 0, 2])
            };
            let (q, k, v) = (part(&mut g, 0), part(&mut g, 1), part(&mut g, 2));
            let k = g.transpose(k, &[0, 2, 1]);
            (q, k, v)
        }
    };
    let qs = g.mul(q, scale);
    let scores = g.matmul(qs, k);
    let p = g.softmax(scores, -1);
    let o = g.matmul(p, v);
    let merged = shape(&mut g, "merged", &[batch * seq, e]);
    let o = match spelling {
        Projections::Separate => {
            let o = g.transpose(o, &[0, 2, 1, 3]);
            g.reshape(o, merged)
        }
        Projections::Packed => {
            let o = g.transpose(o, &[1, 0, 2]);
            g.reshape(o, merged)
        }
    };
    let wo = weight(&mut g, "out_w", &[e, e], 3.0);
    let y = g.push(Op::Gemm(Gemm { trans_b: true, ..Gemm::default() }), &[o, wo], 1)[0];
    let y = match spelling {
        Projections::Separate => {
            let back = shape(&mut g, "back", &[batch, seq, e]);
            g.reshape(y, back)
        }
        Projections::Packed => {
            let back = shape(&mut g, "back", &[seq, batch, e]);
            let y = g.reshape(y, back);
            g.transpose(y, &[1, 0, 2])
        }
    };
    g.output(y);
    g
}

/// How [`short_conv_graph`] writes its causal convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShortConv {
    /// `Conv(pads [k-1, k-1])`, then `Slice` of `[0, L)` (PyTorch's `conv1d(x)[..., :L]`).
    SlicedToLength,
    /// `Conv(pads [k-1, k-1])`, then `Slice` of `[0, -(k-1))`.
    SlicedFromEnd,
    /// `Conv(pads [k-1, 0])`: causal padding alone, nothing to slice.
    LeftPadded,
}

/// The short causal convolution of Mamba-style blocks as dynamo exports it: `x [batch, len, d]`
/// transposed to channels-first, a depthwise `Conv` of width `k` (with a bias when `bias`), cut
/// back to `len` as `spelling` says, `x * sigmoid(x)` when `silu`, transposed back.
pub fn short_conv_graph(
    batch: usize,
    len: usize,
    d: usize,
    k: usize,
    spelling: ShortConv,
    bias: bool,
    silu: bool,
) -> Graph {
    use planner::op::{Conv, Slice};
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(batch), Dim::Known(len), Dim::Known(d)]);
    let xt = g.transpose(x, &[0, 2, 1]);
    let w = weight(&mut g, "conv_w", &[d, 1, k], 1.0);
    let b = bias.then(|| weight(&mut g, "conv_b", &[d], 2.0));
    let pads = if spelling == ShortConv::LeftPadded { vec![k - 1, 0] } else { vec![k - 1, k - 1] };
    let conv = Conv { group: d, kernel_shape: vec![k], pads, ..Conv::default() };
    let mut y = g.push_opt(Op::Conv(conv), vec![Some(xt), Some(w), b], 1)[0];
    let end = match spelling {
        ShortConv::SlicedToLength => Some(len as i64),
        ShortConv::SlicedFromEnd => Some(-(k as i64 - 1)),
        ShortConv::LeftPadded => None,
    };
    if let Some(end) = end {
        let starts = g.const_i64("starts", &[1], &[0]);
        let ends = g.const_i64("ends", &[1], &[end]);
        let axes = g.const_i64("axes", &[1], &[2]);
        y = g.op1(Op::Slice(Slice::default()), &[y, starts, ends, axes]);
    }
    if silu {
        let s = g.sigmoid(y);
        y = g.mul(y, s);
    }
    let back = g.transpose(y, &[0, 2, 1]);
    g.output(back);
    g
}
