//! Graphs of loops over time as exporters unroll them (what `planner::plan::decomposed` lifts):
//! linear recurrences, transformers' Mamba and RWKV-4 WKV steps, unrolled maps; and inputs for them.

use super::{Rng, random_inputs};
use crate::tensor::HostTensor;

/// How [`unrolled_scan_graph`] writes its steps back into the sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writeback {
    /// torch.export's `y[:, t] = h`: a `ScatterElements` chain (indices `Expand`ed from the step
    /// number, an `Identity` after each link) into an `Expand`ed zero buffer.
    Scatter,
    /// `torch.stack(steps, axis)`: one `Concat` of the `Unsqueeze`d steps.
    Concat,
}

/// An unrolled first-order linear recurrence as exporters write one (what `plan::decomposed`
/// lifts to a `LinearScan`): inputs `x` and `a` of `dims`, stepped along `axis`,
/// `h_t = a_t ⊙ h_{t−1} + x_t` from `h0` (a graph input when `h0_input`, else an `Expand`ed
/// zero), written back per `writeback`; outputs the sequence and the last step. `swapped` writes
/// the Mul's and the Add's operands the other way round and the step indices negative.
pub fn unrolled_scan_graph(
    dims: &[usize],
    axis: usize,
    writeback: Writeback,
    h0_input: bool,
    swapped: bool,
) -> planner::Graph {
    use planner::op::{self, Op};
    use planner::{ConstTensor, DType, Dim, Graph};
    let known = |d: &[usize]| d.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
    let len = dims[axis];
    let mut step_dims = dims.to_vec();
    step_dims.remove(axis);
    let mut one_step = dims.to_vec();
    one_step[axis] = 1;
    let shape_of = |g: &mut Graph, name: &str, d: &[usize]| {
        let v: Vec<i64> = d.iter().map(|&x| x as i64).collect();
        g.const_i64(name, &[v.len()], &v)
    };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(dims));
    let a = g.input("a", DType::F32, known(dims));
    let zero = g.initializer("zero", ConstTensor::scalar_f32(0.0));
    let mut h = if h0_input {
        g.input("h0", DType::F32, known(&step_dims))
    } else {
        let s = shape_of(&mut g, "h0_shape", &step_dims);
        g.op1(Op::Expand, &[zero, s])
    };
    let mut buf = match writeback {
        Writeback::Scatter => {
            let s = shape_of(&mut g, "buf_shape", dims);
            Some(g.op1(Op::Expand, &[zero, s]))
        }
        Writeback::Concat => None,
    };
    let axes = g.const_i64("axes", &[1], &[axis as i64]);
    let update_shape = shape_of(&mut g, "update_shape", &one_step);
    let mut stacked = Vec::new();
    for t in 0..len {
        let index = if swapped { t as i64 - len as i64 } else { t as i64 };
        let ti = g.const_i64(&format!("t{t}"), &[], &[index]);
        let gather = Op::Gather(op::Gather { axis: axis as i64 });
        let at = g.op1(gather.clone(), &[a, ti]);
        let xt = g.op1(gather, &[x, ti]);
        let m = g.op1(Op::Mul, &if swapped { [h, at] } else { [at, h] });
        h = g.op1(Op::Add, &if swapped { [xt, m] } else { [m, xt] });
        let u = g.op1(Op::Unsqueeze(op::Unsqueeze::default()), &[h, axes]);
        match buf {
            Some(b) => {
                let idx = g.op1(Op::Expand, &[ti, update_shape]);
                let scatter = op::ScatterElements { axis: axis as i64, ..Default::default() };
                let s = g.op1(Op::ScatterElements(scatter), &[b, idx, u]);
                buf = Some(g.op1(Op::Identity, &[s]));
            }
            None => stacked.push(u),
        }
    }
    let y = match buf {
        Some(b) => b,
        None => g.op1(Op::Concat(op::Concat { axis: axis as i64 }), &stacked),
    };
    g.output(y);
    g.output(h);
    g
}

/// transformers' Mamba selective scan as its slow path exports unrolled (what `plan::decomposed`
/// lifts to a `LinearScan` and one batched readout): inputs `da` and `dbu` of `[b, d, l, n]`
/// and `c` of `[b, l, n]`; from an `Expand`ed zero state `h` of `[b, d, n]`, per step `t`
/// `h = Gather(da, t, 2) * h + Gather(dbu, t, 2)` and
/// `y_t = Gather(MatMul(h, Unsqueeze(Gather(c, t, 1), -1)), 0, 2)`, one index constant per step
/// shared by its reads (step 0's also the readout's `0`, as the exporter shares them); outputs
/// `Concat(Unsqueeze(y_t, -1)..., -1)` of `[b, d, l]`.
pub fn unrolled_selective_scan_graph(b: usize, d: usize, l: usize, n: usize) -> planner::Graph {
    use planner::{DType, Graph};
    let mut g = Graph::new();
    let da = g.input("da", DType::F32, [b, d, l, n]);
    let dbu = g.input("dbu", DType::F32, [b, d, l, n]);
    let c = g.input("c", DType::F32, [b, l, n]);
    let y = selective_steps(&mut g, [da, dbu, c], [b, d, l, n], false);
    g.output(y);
    g
}

/// The unrolled steps and stacked readout of [`unrolled_selective_scan_graph`] over `da`, `dbu`
/// and `c` of `[b, d, l, n]` (the step Mul's operands swapped when `swapped`): the stack.
fn selective_steps(
    g: &mut planner::Graph,
    [da, dbu, c]: [planner::ValueId; 3],
    [b, d, l, n]: [usize; 4],
    swapped: bool,
) -> planner::ValueId {
    use planner::ConstTensor;
    use planner::op::{self, Op};
    let zero = g.initializer("zero", ConstTensor::scalar_f32(0.0));
    let state = g.const_i64("state_shape", &[3], &[b as i64, d as i64, n as i64]);
    let mut h = g.op1(Op::Expand, &[zero, state]);
    let last = g.const_i64("last", &[1], &[-1]);
    let gather = |axis: i64| Op::Gather(op::Gather { axis });
    let unsqueeze = || Op::Unsqueeze(op::Unsqueeze::default());
    let mut ys = Vec::new();
    let mut first = None;
    for t in 0..l {
        let ti = g.const_i64(&format!("t{t}"), &[], &[t as i64]);
        let zero_index = *first.get_or_insert(ti);
        let at = g.op1(gather(2), &[da, ti]);
        let m = g.op1(Op::Mul, &if swapped { [h, at] } else { [at, h] });
        let xt = g.op1(gather(2), &[dbu, ti]);
        h = g.op1(Op::Add, &[m, xt]);
        let ct = g.op1(gather(1), &[c, ti]);
        let cu = g.op1(unsqueeze(), &[ct, last]);
        let y = g.op1(Op::MatMul, &[h, cu]);
        let y = g.op1(gather(2), &[y, zero_index]);
        ys.push(g.op1(unsqueeze(), &[y, last]));
    }
    g.op1(Op::Concat(op::Concat { axis: -1 }), &ys)
}

/// transformers' Mamba selective scan as its slow path exports it unrolled, from its operands
/// (what `plan::decomposed` lifts to one `SelectiveScan`): inputs `u` and `delta` of `[b, d, l]`,
/// `a` of `[d, n]`, `bm` and `c` of `[b, l, n]`; `dA = Exp(Unsqueeze(a, [0, 2]) * Unsqueeze(delta,
/// [3]))`, `dBu = (Unsqueeze(delta, [3]) * Unsqueeze(bm, [1])) * Unsqueeze(u, [3])`, then the
/// steps and the stacked readout of [`unrolled_selective_scan_graph`]; outputs `[b, d, l]`.
/// `swapped` writes every Mul's operands the other way round.
pub fn unrolled_mamba_graph(b: usize, d: usize, l: usize, n: usize, swapped: bool) -> planner::Graph {
    use planner::op::{self, Op};
    use planner::{DType, Graph};
    let mut g = Graph::new();
    let u = g.input("u", DType::F32, [b, d, l]);
    let delta = g.input("delta", DType::F32, [b, d, l]);
    let a = g.input("a", DType::F32, [d, n]);
    let bm = g.input("bm", DType::F32, [b, l, n]);
    let c = g.input("c", DType::F32, [b, l, n]);
    let unsqueeze = |g: &mut Graph, x, axes: &[i64], name: &str| {
        let ax = g.const_i64(name, &[axes.len()], axes);
        g.op1(Op::Unsqueeze(op::Unsqueeze::default()), &[x, ax])
    };
    let mul = |g: &mut Graph, x, y| g.op1(Op::Mul, &if swapped { [y, x] } else { [x, y] });
    let a4 = unsqueeze(&mut g, a, &[0, 2], "a_axes");
    let delta4 = unsqueeze(&mut g, delta, &[3], "delta_axes");
    let b4 = unsqueeze(&mut g, bm, &[1], "b_axes");
    let u4 = unsqueeze(&mut g, u, &[3], "u_axes");
    let m = mul(&mut g, a4, delta4);
    let da = g.op1(Op::Exp, &[m]);
    let db = mul(&mut g, delta4, b4);
    let dbu = mul(&mut g, db, u4);
    let y = selective_steps(&mut g, [da, dbu, c], [b, d, l, n], swapped);
    g.output(y);
    g
}

/// Random inputs of [`unrolled_mamba_graph`] as a Mamba layer feeds it: `a` negative and `delta`
/// positive (as `-exp(A_log)` and softplus make them), the others in `[-1, 1)`.
pub fn mamba_inputs(rng: &mut Rng, g: &planner::Graph) -> Vec<(String, HostTensor)> {
    let mut feeds = random_inputs(rng, g, -1.0, 1.0);
    for (name, t) in &mut feeds {
        let sign = match name.as_str() {
            "a" => -1.0,
            "delta" => 1.0,
            _ => continue,
        };
        let v: Vec<f32> = t.data().to_f64s().iter().map(|x| sign * x.abs() as f32).collect();
        *t = HostTensor::new(t.shape().to_vec(), v).expect("the same number of values");
    }
    feeds
}

/// An unrolled map (no recurrence) of the ops `reroll.rs` batches: per step `t` of `x`
/// (`[b, l, m]`, read along axis 1, step indices negative when `negative`),
/// `Softmax(Transpose(Reshape(Squeeze(Unsqueeze(x_t, 0), 0) * w + bias_t)))` with `w` of `[m]`
/// and `bias_t = Gather(table, 2, 0)` (a shared index), stacked by `Concat` along axis 1 of the
/// `[m, b]` results (so the output is `[m, l * b]`).
pub fn unrolled_map_graph(b: usize, l: usize, m: usize, negative: bool) -> planner::Graph {
    use planner::op::{self, Op};
    use planner::{DType, Graph};
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [b, l, m]);
    let w = g.input("w", DType::F32, [m]);
    let table = g.input("table", DType::F32, [4, 1, m]);
    let zero = g.const_i64("zero", &[1], &[0]);
    let two = g.const_i64("two", &[], &[2]);
    let shape = g.const_i64("shape", &[2], &[b as i64, m as i64]);
    let mut ys = Vec::new();
    for t in 0..l {
        let index = if negative { t as i64 - l as i64 } else { t as i64 };
        let ti = g.const_i64(&format!("t{t}"), &[], &[index]);
        let xt = g.op1(Op::Gather(op::Gather { axis: 1 }), &[x, ti]);
        let u = g.op1(Op::Unsqueeze(op::Unsqueeze::default()), &[xt, zero]);
        let s = g.op1(Op::Squeeze(op::Squeeze::default()), &[u, zero]);
        let p = g.op1(Op::Mul, &[s, w]);
        let bias = g.op1(Op::Gather(op::Gather { axis: 0 }), &[table, two]);
        let q = g.op1(Op::Add, &[p, bias]);
        let r = g.op1(Op::Reshape(op::Reshape { allowzero: false }), &[q, shape]);
        let tr = g.op1(Op::Transpose(op::Transpose { perm: Some(vec![1, 0]) }), &[r]);
        ys.push(g.op1(Op::Softmax(op::Softmax { axis: 0 }), &[tr]));
    }
    let y = g.op1(Op::Concat(op::Concat { axis: 1 }), &ys);
    g.output(y);
    g
}

/// One half of an RWKV-4 WKV step as transformers writes it: from `(a, b)`, `q = max(a, b)`,
/// `e1 = e^(a - q)`, `e2 = e^(b - q)`; returns `q`, `e1 num + e2 v` and `e1 den + e2`.
fn blend(
    g: &mut planner::Graph,
    (a, b): (planner::ValueId, planner::ValueId),
    (num, den): (planner::ValueId, planner::ValueId),
    v: planner::ValueId,
) -> (planner::ValueId, planner::ValueId, planner::ValueId) {
    use planner::op::Op;
    let q = g.op1(Op::Max, &[a, b]);
    let d1 = g.op1(Op::Sub, &[a, q]);
    let e1 = g.op1(Op::Exp, &[d1]);
    let d2 = g.op1(Op::Sub, &[b, q]);
    let e2 = g.op1(Op::Exp, &[d2]);
    let a1 = g.op1(Op::Mul, &[e1, num]);
    let a2 = g.op1(Op::Mul, &[e2, v]);
    let num = g.op1(Op::Add, &[a1, a2]);
    let b1 = g.op1(Op::Mul, &[e1, den]);
    let den = g.op1(Op::Add, &[b1, e2]);
    (q, num, den)
}

/// transformers' RWKV-4 WKV loop (`rwkv_linear_attention_cpu`) as its dynamo export writes it
/// unrolled (what `plan::decomposed` lifts to one `Scan`): inputs `key` and `value` of
/// `[b, l, d]`, `time_first` (`u`) and `w` (the decay, `-exp(time_decay)`) of `[d]`; states
/// `num`, `den` (`Expand`ed zeros) and `max` (an `Expand`ed -1e38) of `[b, d]`; per step `t`,
/// with `k`, `v` its Gathers along axis 1,
/// `q = max(max, k + u)`, `out_t = (e^(max - q) num + e^(k + u - q) v) / (e^(max - q) den + e^(k + u - q))`,
/// then (not after the last step, whose update the export drops as dead)
/// `p = max(max + w, k)`, `num = e^(max + w - p) num + e^(k - p) v`, `den = e^(max + w - p) den + e^(k - p)`,
/// `max = p`. The outputs written back along axis 1 (`scatter`: the `ScatterElements` chain, else
/// a `Concat`); the graph's output is the `[b, l, d]` sequence. `views`: as the export without
/// the ONNX optimizer writes it, each read through a `Slice` of every element and each write-back
/// link followed by a `ScatterND` of the whole result into the buffer (`slice_scatter`).
/// `returns_state`: the last step's update is computed too and the three states are outputs
/// after the sequence (transformers' `use_cache`).
pub fn unrolled_wkv_graph(
    b: usize,
    l: usize,
    d: usize,
    scatter: bool,
    views: bool,
    returns_state: bool,
) -> planner::Graph {
    use planner::op::{self, Op};
    use planner::{ConstTensor, DType, Dim, Graph};
    let known = |s: &[usize]| s.iter().map(|&v| Dim::Known(v)).collect::<Vec<_>>();
    let mut g = Graph::new();
    let key = g.input("key", DType::F32, known(&[b, l, d]));
    let value = g.input("value", DType::F32, known(&[b, l, d]));
    let u = g.input("time_first", DType::F32, known(&[d]));
    let w = g.input("w", DType::F32, known(&[d]));
    let state_shape = g.const_i64("state_shape", &[2], &[b as i64, d as i64]);
    let zero = g.initializer("zero", ConstTensor::scalar_f32(0.0));
    let low = g.initializer("low", ConstTensor::scalar_f32(-1e38));
    let (mut num, mut den) =
        (g.op1(Op::Expand, &[zero, state_shape]), g.op1(Op::Expand, &[zero, state_shape]));
    let mut max = g.op1(Op::Expand, &[low, state_shape]);
    let axes = g.const_i64("axes", &[1], &[1]);
    let update_shape = g.const_i64("update_shape", &[3], &[b as i64, 1, d as i64]);
    let buf_shape = g.const_i64("buf_shape", &[3], &[b as i64, l as i64, d as i64]);
    let mut buf = scatter.then(|| g.op1(Op::Expand, &[zero, buf_shape]));
    let mut stacked = Vec::new();
    let gather = Op::Gather(op::Gather { axis: 1 });
    // `x[:]` along axis 0: every element.
    let (from, to, axis0) = (
        g.const_i64("from", &[1], &[0]),
        g.const_i64("to", &[1], &[i64::MAX]),
        g.const_i64("axis0", &[1], &[0]),
    );
    let all = |g: &mut Graph, x| {
        if views { g.op1(Op::Slice(op::Slice::default()), &[x, from, to, axis0]) } else { x }
    };
    let rows: Vec<i64> = (0..b as i64).collect();
    let rows = g.const_i64("rows", &[b, 1], &rows);
    for t in 0..l {
        let ti = g.const_i64(&format!("t{t}"), &[], &[t as i64]);
        let ks = all(&mut g, key);
        let k = g.op1(gather.clone(), &[ks, ti]);
        let vs = all(&mut g, value);
        let v = g.op1(gather.clone(), &[vs, ti]);
        // The output of step t.
        let ww = g.op1(Op::Add, &[k, u]);
        let (_, n_out, d_out) = blend(&mut g, (max, ww), (num, den), v);
        let out = g.op1(Op::Div, &[n_out, d_out]);
        let un = g.op1(Op::Unsqueeze(op::Unsqueeze::default()), &[out, axes]);
        match buf {
            Some(prev) => {
                let idx = g.op1(Op::Expand, &[ti, update_shape]);
                let sc = op::ScatterElements { axis: 1, ..Default::default() };
                let view = all(&mut g, prev);
                let s = g.op1(Op::ScatterElements(sc), &[view, idx, un]);
                buf = Some(if views {
                    g.op1(Op::ScatterNd(op::ScatterNd::default()), &[prev, rows, s])
                } else {
                    g.op1(Op::Identity, &[s])
                });
            }
            None => stacked.push(un),
        }
        if t + 1 == l && !returns_state {
            break;
        }
        // The state update.
        let ww = g.op1(Op::Add, &[max, w]);
        (max, num, den) = blend(&mut g, (ww, k), (num, den), v);
    }
    let y = match buf {
        Some(y) => y,
        None => g.op1(Op::Concat(op::Concat { axis: 1 }), &stacked),
    };
    g.output(y);
    if returns_state {
        for v in [num, den, max] {
            g.output(v);
        }
    }
    g
}
