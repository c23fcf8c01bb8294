//! Lowering of the ONNX recurrent layers (LSTM, GRU, RNN; f32) to two launches per node:
//! 1. the input projection of every time step and direction, `XW[d] = X Wᵀ[d] + Wb[d]`, as one
//!    batched GEMM (batch = directions) into a scratch buffer `[dirs, rows, gates * hidden]`, rows
//!    in X's own order (`t * batch + b` for layout 0, `b * seq + t` for layout 1);
//! 2. the recurrent kernel (`kernels_gpu::abi::RecurrentParams`), one block per (batch row,
//!    direction), which adds `R h + Rb` step by step and writes Y, Y_h and Y_c (any may be omitted).
//!
//! Attributes follow the CPU reference (`host::reference::nn::rnn`), including how activation
//! lists, alphas and betas are read. Limits, reported as errors: f32 only (`sequence_lens` i32 or
//! i64), a non-empty X (`seq_length` and batch > 0), `hidden_size` small enough for the state
//! vectors to fit the 48 KiB of shared memory a block gets without opt-in (at most 4096 for LSTM,
//! 3072 for GRU, 6144 for RNN), sizes within u32, and `clip` not negative.

use kernels_gpu::abi::{
    ActivationSpec, CellActivation, CellActivations, GemmParams, KernelId, RECURRENT_INPUT_FORGET,
    RECURRENT_LENS_I64, RECURRENT_LINEAR_BEFORE_RESET, RECURRENT_MAX_SHARED_BYTES as MAX_SHARED_BYTES,
    RECURRENT_MAX_THREADS, RecurrentParams, recurrent_shared_vectors,
};

use super::gemm::gemm_steps;
use super::lower::{Lowered, bytes_of, dims, f32_only};
use super::{Arg, PlannedValue, Step};
use crate::graph::{Graph, NodeId, ValueId};
use crate::op::{Op, Recurrent, RnnActivation, RnnDirection, RnnLayout};
use crate::tensor_info::DType;

/// What distinguishes the three layers.
struct Cell<'a> {
    kernel: KernelId,
    gates: usize,
    common: &'a Recurrent,
    /// The operator's default activation list (one direction).
    defaults: &'static [RnnActivation],
    /// `RECURRENT_*` flags from the layer's own attributes.
    flags: u32,
}

fn cell(op: &Op) -> Option<Cell<'_>> {
    use RnnActivation::{Sigmoid, Tanh};
    Some(match op {
        Op::Lstm(l) => Cell {
            kernel: KernelId::LstmF32,
            gates: 4,
            common: &l.common,
            defaults: &[Sigmoid, Tanh, Tanh],
            flags: if l.input_forget { RECURRENT_INPUT_FORGET } else { 0 },
        },
        Op::Gru(g) => Cell {
            kernel: KernelId::GruF32,
            gates: 3,
            common: &g.common,
            defaults: &[Sigmoid, Tanh],
            flags: if g.linear_before_reset { RECURRENT_LINEAR_BEFORE_RESET } else { 0 },
        },
        Op::Rnn(r) => {
            Cell { kernel: KernelId::RnnF32, gates: 1, common: &r.common, defaults: &[Tanh], flags: 0 }
        }
        _ => return None,
    })
}

/// `(seq, batch, input)` of X under `layout`.
fn geometry(x: &[usize], layout: RnnLayout) -> Option<(usize, usize, usize)> {
    let [a, b, input] = <[usize; 3]>::try_from(x).ok()?;
    Some(match layout {
        RnnLayout::SeqFirst => (a, b, input),
        RnnLayout::BatchFirst => (b, a, input),
    })
}

/// The input-projection scratch of a recurrent node: `[dirs, seq * batch, gates * hidden]` f32.
/// `None` for other ops or when X's shape is not known (lowering then reports why).
pub(super) fn scratch(g: &Graph, id: NodeId, values: &[PlannedValue]) -> Option<PlannedValue> {
    let n = &g.nodes[id.index()];
    let c = cell(&n.op)?;
    let x = n.inputs.first().copied().flatten()?;
    let (seq, batch, _) = geometry(values[x.index()].dims.as_deref()?, c.common.layout)?;
    let dims = vec![c.common.direction.num_directions(), seq * batch, c.gates * c.common.hidden_size];
    Some(PlannedValue { name: format!("{}/xw", g.node_label(id)), dtype: DType::F32, dims: Some(dims) })
}

fn code(f: RnnActivation) -> CellActivation {
    match f {
        RnnActivation::Relu => CellActivation::Relu,
        RnnActivation::Tanh => CellActivation::Tanh,
        RnnActivation::Sigmoid => CellActivation::Sigmoid,
        RnnActivation::Affine => CellActivation::Affine,
        RnnActivation::LeakyRelu => CellActivation::LeakyRelu,
        RnnActivation::ThresholdedRelu => CellActivation::ThresholdedRelu,
        RnnActivation::ScaledTanh => CellActivation::ScaledTanh,
        RnnActivation::HardSigmoid => CellActivation::HardSigmoid,
        RnnActivation::Elu => CellActivation::Elu,
        RnnActivation::Softsign => CellActivation::Softsign,
        RnnActivation::Softplus => CellActivation::Softplus,
    }
}

/// The activations of each direction: the attribute list (one list per direction, or one list
/// shared by both) or the defaults; alphas and betas are consumed in order by the activations that
/// take them, defaults filling in when the lists run out (as the CPU reference reads them).
fn activations(c: &Recurrent, defaults: &[RnnActivation]) -> Result<[CellActivations; 2], String> {
    let dirs = c.direction.num_directions();
    let n = defaults.len();
    let names: Vec<RnnActivation> = match c.activations.len() {
        0 => defaults.repeat(dirs),
        l if l == n * dirs => c.activations.clone(),
        l if l == n => c.activations.repeat(dirs),
        l => return Err(format!("{l} activations given, expected {}", n * dirs)),
    };
    let (mut alphas, mut betas) = (c.activation_alpha.iter(), c.activation_beta.iter());
    let specs: Vec<ActivationSpec> = names
        .iter()
        .map(|&f| {
            let (da, db, takes_a, takes_b) = match f {
                RnnActivation::Affine => (1.0, 0.0, true, true),
                RnnActivation::ScaledTanh => (1.0, 1.0, true, true),
                RnnActivation::HardSigmoid => (0.2, 0.5, true, true),
                RnnActivation::LeakyRelu => (0.01, 0.0, true, false),
                RnnActivation::ThresholdedRelu | RnnActivation::Elu => (1.0, 0.0, true, false),
                _ => (0.0, 0.0, false, false),
            };
            let alpha = if takes_a { alphas.next().copied().unwrap_or(da) } else { da };
            let beta = if takes_b { betas.next().copied().unwrap_or(db) } else { db };
            ActivationSpec { code: code(f) as u32, alpha, beta }
        })
        .collect();
    let mut out = [CellActivations::default(); 2];
    for (d, chunk) in specs.chunks(n).enumerate() {
        let at = |i: usize| chunk.get(i).copied().unwrap_or_default();
        out[d] = CellActivations { f: at(0), g: at(1), h: at(2) };
    }
    Ok(out)
}

/// Input `slot` when present, checked to be f32 of shape `want`.
fn operand(
    values: &[PlannedValue],
    ins: &[Option<ValueId>],
    slot: usize,
    what: &str,
    want: &[usize],
) -> Result<Option<ValueId>, String> {
    let Some(v) = ins.get(slot).copied().flatten() else { return Ok(None) };
    f32_only(values, &[v])?;
    let d = dims(values, v)?.0;
    if d != want {
        return Err(format!("{what} is {d:?}, expected {want:?}"));
    }
    Ok(Some(v))
}

fn u32_of(v: usize, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} = {v} exceeds the kernels' u32 sizes"))
}

/// The GEMM and recurrent launches of recurrent node `id`; `scratch` holds its projection buffer.
pub(super) fn lower(g: &Graph, id: NodeId, values: &[PlannedValue], scratch: &[ValueId]) -> Lowered {
    let n = &g.nodes[id.index()];
    let c = cell(&n.op).ok_or("not a recurrent operator")?;
    let rc = c.common;
    let ins = n.inputs.as_slice();
    let outs: Vec<Option<ValueId>> = (0..c.kernel.written_args()).map(|i| n.output(i)).collect();
    if outs.iter().all(Option::is_none) {
        return Ok(Vec::new());
    }
    let (x, w, r) = match ins {
        [Some(x), Some(w), Some(r), ..] => (*x, *w, *r),
        _ => return Err("missing X, W or R".into()),
    };
    f32_only(values, &[x, w, r])?;
    f32_only(values, &outs.iter().flatten().copied().collect::<Vec<_>>())?;
    let (seq, batch, input) = geometry(dims(values, x)?.0, rc.layout).ok_or("X must be 3-D")?;
    if seq == 0 || batch == 0 {
        return Err(format!("X has seq_length {seq} and batch {batch}; the GPU lowering needs both > 0"));
    }
    let (hidden, dirs, gates) = (rc.hidden_size, rc.direction.num_directions(), c.gates);
    let gh = gates * hidden;
    let vectors = recurrent_shared_vectors(c.kernel);
    let shared_bytes = (vectors as usize).saturating_mul(hidden).saturating_mul(4);
    if hidden == 0 || shared_bytes > MAX_SHARED_BYTES as usize {
        let most = MAX_SHARED_BYTES / 4 / vectors;
        return Err(format!(
            "hidden_size {hidden} is outside the kernel's 1..={most} (state in shared memory)"
        ));
    }
    operand(values, ins, 1, "W", &[dirs, gh, input])?;
    operand(values, ins, 2, "R", &[dirs, gh, hidden])?;
    let b = operand(values, ins, 3, "B", &[dirs, 2 * gh])?;
    let state = match rc.layout {
        RnnLayout::SeqFirst => [dirs, batch, hidden],
        RnnLayout::BatchFirst => [batch, dirs, hidden],
    };
    let lens = ins.get(4).copied().flatten();
    let mut flags = c.flags;
    if let Some(l) = lens {
        let (d, dtype) = dims(values, l)?;
        match dtype {
            DType::I32 => {}
            DType::I64 => flags |= RECURRENT_LENS_I64,
            other => return Err(format!("sequence_lens is {other}; the kernels read i32 or i64")),
        }
        if d != [batch] {
            return Err(format!("sequence_lens is {d:?}, expected [{batch}]"));
        }
    }
    let h0 = operand(values, ins, 5, "initial_h", &state)?;
    let (c0, peep) = if c.kernel == KernelId::LstmF32 {
        (operand(values, ins, 6, "initial_c", &state)?, operand(values, ins, 7, "P", &[dirs, 3 * hidden])?)
    } else {
        (None, None)
    };
    let clip = match rc.clip {
        None => f32::INFINITY,
        Some(t) if t >= 0.0 => t,
        Some(t) => return Err(format!("clip {t} must be a non-negative number")),
    };
    let acts = activations(rc, c.defaults)?;
    let xw = *scratch.first().ok_or("no scratch buffer for the input projection")?;
    let rows = seq * batch;
    for (v, what) in [(seq, "seq_length"), (batch, "batch"), (input, "input_size"), (rows, "seq * batch")] {
        u32_of(v, what)?;
    }
    u32_of(gh, "gates * hidden_size")?;

    let label = n.op.name().to_string();
    // XW[d][row][j] = sum_k X[row][k] W[d][j][k] + Wb[d][j]: B is Wᵀ (column stride `input`), C
    // broadcasts the bias row of each direction.
    let mut gp = GemmParams {
        m: rows as u32,
        n: gh as u32,
        k: input as u32,
        batch: dirs as u32,
        a_rs: input as u64,
        a_cs: 1,
        b_rs: 1,
        b_cs: input as u64,
        b_bs: (gh * input) as u64,
        alpha: 1.0,
        beta: 1.0,
        y_bs: (rows * gh) as u64,
        ..GemmParams::default()
    };
    if b.is_some() {
        (gp.c_cs, gp.c_bs, gp.has_c) = (1, (2 * gh) as u64, 1);
    }
    // No split-K workspace: one launch (the options only size split-K).
    let no_split = super::PlanOptions::default();
    let no_epilogue = super::gemm::Epilogue::NONE;
    let (name, w) = (format!("{label} input projection"), (w, None));
    let mut steps = gemm_steps(id, name, gp, (x, w, b), xw, no_epilogue, None, &no_split);

    let (s_d, s_b) = match rc.layout {
        RnnLayout::SeqFirst => (batch * hidden, hidden),
        RnnLayout::BatchFirst => (hidden, dirs * hidden),
    };
    let (xw_t, xw_b, y_t, y_d, y_b) = match rc.layout {
        RnnLayout::SeqFirst => (batch * gh, gh, dirs * batch * hidden, batch * hidden, hidden),
        RnnLayout::BatchFirst => (gh, seq * gh, dirs * hidden, hidden, seq * dirs * hidden),
    };
    let p = RecurrentParams {
        seq: seq as u32,
        batch: batch as u32,
        hidden: hidden as u32,
        dirs: dirs as u32,
        xw_d: (rows * gh) as u64,
        xw_t: xw_t as u64,
        xw_b: xw_b as u64,
        y_t: y_t as u64,
        y_d: y_d as u64,
        y_b: y_b as u64,
        state_d: s_d as u64,
        state_b: s_b as u64,
        clip,
        reverse_dirs: match rc.direction {
            RnnDirection::Forward => 0,
            RnnDirection::Reverse => 1,
            RnnDirection::Bidirectional => 2,
        },
        flags,
        _pad: 0,
        acts,
    };
    let opt = |v: Option<ValueId>| v.map_or(Arg::Null, Arg::Value);
    let mut args = vec![Arg::Params(bytes_of(&p)), Arg::Value(xw), Arg::Value(r), opt(b), opt(lens), opt(h0)];
    if c.kernel == KernelId::LstmF32 {
        args.extend([opt(c0), opt(peep)]);
    }
    args.extend(outs.into_iter().map(opt));
    let threads = (32 * hidden as u32).min(RECURRENT_MAX_THREADS);
    let recurrence = Step::Kernel {
        nodes: vec![id],
        label,
        kernel: c.kernel,
        grid: [batch as u32, dirs as u32, 1],
        block: [threads, 1, 1],
        shared_bytes: shared_bytes as u32,
        args,
    };
    steps.push(recurrence);
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use kernels_gpu::abi::{
        ActivationSpec, CellActivation, CellActivations, KernelId, Params, RECURRENT_INPUT_FORGET,
        RECURRENT_LENS_I64, RECURRENT_LINEAR_BEFORE_RESET, RecurrentParams,
    };

    use crate::ConstTensor;
    use crate::error::PlanError;
    use crate::graph::{Graph, Node, ValueId};
    use crate::op::{Gru, Lstm, Op, Recurrent, Rnn, RnnActivation, RnnDirection, RnnLayout};
    use crate::plan::{Arg, Plan, PlanOptions, Step, compile};
    use crate::tensor_info::{Binding, DType, Dim};

    fn common(hidden: usize, direction: RnnDirection, layout: RnnLayout) -> Recurrent {
        Recurrent {
            activation_alpha: vec![],
            activation_beta: vec![],
            activations: vec![],
            clip: None,
            direction,
            hidden_size: hidden,
            layout,
        }
    }

    fn weight(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
        let n = dims.iter().product();
        g.initializer(name, ConstTensor::from_f32(dims, &vec![0.1; n]).unwrap())
    }

    /// A graph with one recurrent node: X `[a, b, input]` as input `x`, weights of `gates` gates,
    /// optional operands per `with` (B, sequence_lens, initial_h, initial_c, P), outputs `outs`
    /// (`false` = omitted).
    fn layer(op: Op, x: [usize; 3], gates: usize, with: [bool; 5], outs: &[bool]) -> (Graph, Vec<ValueId>) {
        let (c, lstm) = match &op {
            Op::Lstm(l) => (l.common.clone(), true),
            Op::Gru(g) => (g.common.clone(), false),
            Op::Rnn(r) => (r.common.clone(), false),
            _ => unreachable!(),
        };
        let (h, dirs) = (c.hidden_size, c.direction.num_directions());
        let (seq, batch) = if c.layout == RnnLayout::SeqFirst { (x[0], x[1]) } else { (x[1], x[0]) };
        let state = if c.layout == RnnLayout::SeqFirst { [dirs, batch, h] } else { [batch, dirs, h] };
        let mut g = Graph::new();
        let xv = g.input("x", DType::F32, x.iter().map(|&d| Dim::Known(d)).collect::<Vec<_>>());
        let w = weight(&mut g, "w", &[dirs, gates * h, x[2]]);
        let r = weight(&mut g, "r", &[dirs, gates * h, h]);
        let b = with[0].then(|| weight(&mut g, "b", &[dirs, 2 * gates * h]));
        let lens = with[1].then(|| g.const_i64("lens", &[batch], &vec![seq as i64; batch]));
        let h0 = with[2].then(|| weight(&mut g, "h0", &state));
        let mut inputs = vec![Some(xv), Some(w), Some(r), b, lens, h0];
        if lstm {
            let c0 = with[3].then(|| weight(&mut g, "c0", &state));
            let p = with[4].then(|| weight(&mut g, "p", &[dirs, 3 * h]));
            inputs.extend([c0, p]);
        }
        let outputs: Vec<Option<ValueId>> =
            outs.iter().enumerate().map(|(i, &o)| o.then(|| g.add_value(format!("out{i}"), None))).collect();
        let written: Vec<ValueId> = outputs.iter().flatten().copied().collect();
        g.add_node(Node { name: "cell".into(), op, inputs, outputs });
        for &v in &written {
            g.output(v);
        }
        (g, written)
    }

    fn plan(g: &Graph) -> Plan {
        compile(g, &Binding::new(), &PlanOptions::default()).unwrap()
    }

    fn kernel_step(plan: &Plan, kernel: KernelId) -> (&[u32; 3], &[u32; 3], u32, &[Arg]) {
        plan.steps
            .iter()
            .find_map(|s| match s {
                Step::Kernel { kernel: k, grid, block, shared_bytes, args, .. } if *k == kernel => {
                    Some((grid, block, *shared_bytes, args.as_slice()))
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {kernel:?} step in\n{plan}"))
    }

    fn spec(code: CellActivation, alpha: f32, beta: f32) -> ActivationSpec {
        ActivationSpec { code: code as u32, alpha, beta }
    }

    #[test]
    fn a_bidirectional_lstm_is_a_projection_gemm_then_one_recurrent_launch() {
        let lstm =
            Lstm { common: common(33, RnnDirection::Bidirectional, RnnLayout::SeqFirst), input_forget: true };
        let (g, outs) = layer(Op::Lstm(lstm), [7, 3, 5], 4, [true; 5], &[true, true, true]);
        let plan = plan(&g);
        let text = plan.to_string();
        assert_eq!(plan.steps.len(), 2, "{text}");
        assert!(text.contains("LSTM input projection gemm_tc_f32"), "{text}");
        let (grid, block, shared, args) = kernel_step(&plan, KernelId::LstmF32);
        assert_eq!((*grid, *block, shared), ([3, 2, 1], [512, 1, 1], 3 * 33 * 4));
        let Arg::Value(xw) = args[1] else { panic!("{args:?}") };
        assert_eq!(plan.values[xw.index()].dims, Some(vec![2, 21, 4 * 33]));
        assert_eq!(xw.index(), g.values.len(), "the scratch buffer follows the graph's values");
        assert!(plan.memory.slots[xw.index()].is_some());
        assert_eq!(&args[args.len() - 3..], outs.iter().map(|&v| Arg::Value(v)).collect::<Vec<_>>());
        let sig = spec(CellActivation::Sigmoid, 0.0, 0.0);
        let tanh = spec(CellActivation::Tanh, 0.0, 0.0);
        let acts = CellActivations { f: sig, g: tanh, h: tanh };
        let want = RecurrentParams {
            seq: 7,
            batch: 3,
            hidden: 33,
            dirs: 2,
            xw_d: 21 * 132,
            xw_t: 3 * 132,
            xw_b: 132,
            y_t: 2 * 3 * 33,
            y_d: 3 * 33,
            y_b: 33,
            state_d: 3 * 33,
            state_b: 33,
            clip: f32::INFINITY,
            reverse_dirs: 2,
            flags: RECURRENT_INPUT_FORGET | RECURRENT_LENS_I64,
            _pad: 0,
            acts: [acts; 2],
        };
        assert_eq!(args[0], Arg::Params(want.as_bytes().to_vec()));
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
    }

    #[test]
    fn a_batch_first_gru_with_y_omitted_writes_y_h_only() {
        let mut c = common(32, RnnDirection::Reverse, RnnLayout::BatchFirst);
        c.clip = Some(2.5);
        c.activations = vec![RnnActivation::HardSigmoid, RnnActivation::ScaledTanh];
        c.activation_alpha = vec![0.3];
        c.activation_beta = vec![0.6, 0.7];
        let gru = Gru { common: c, linear_before_reset: true };
        let (g, outs) = layer(Op::Gru(gru), [4, 9, 6], 3, [false; 5], &[false, true]);
        let plan = plan(&g);
        let (grid, block, shared, args) = kernel_step(&plan, KernelId::GruF32);
        assert_eq!((*grid, *block, shared), ([4, 1, 1], [512, 1, 1], 4 * 32 * 4));
        assert_eq!(args.len(), 8);
        assert_eq!(&args[3..], &[Arg::Null, Arg::Null, Arg::Null, Arg::Null, Arg::Value(outs[0])]);
        let acts = CellActivations {
            f: spec(CellActivation::HardSigmoid, 0.3, 0.6),
            g: spec(CellActivation::ScaledTanh, 1.0, 0.7),
            h: ActivationSpec::default(),
        };
        let want = RecurrentParams {
            seq: 9,
            batch: 4,
            hidden: 32,
            dirs: 1,
            xw_d: 36 * 96,
            xw_t: 96,
            xw_b: 9 * 96,
            y_t: 32,
            y_d: 32,
            y_b: 9 * 32,
            state_d: 32,
            state_b: 32,
            clip: 2.5,
            reverse_dirs: 1,
            flags: RECURRENT_LINEAR_BEFORE_RESET,
            _pad: 0,
            acts: [acts, CellActivations::default()],
        };
        assert_eq!(args[0], Arg::Params(want.as_bytes().to_vec()));
        // Without B the projection has no C operand.
        let Step::Kernel { args: gemm, .. } = &plan.steps[0] else { panic!() };
        assert_eq!(gemm[3], Arg::Null);
    }

    #[test]
    fn one_activation_list_serves_both_directions_and_alphas_run_on() {
        let mut c = common(1, RnnDirection::Bidirectional, RnnLayout::SeqFirst);
        c.activations = vec![RnnActivation::LeakyRelu];
        c.activation_alpha = vec![0.2];
        let (g, _) =
            layer(Op::Rnn(Rnn { common: c }), [2, 1, 3], 1, [true, false, true, false, false], &[true]);
        let plan = plan(&g);
        let (grid, block, shared, args) = kernel_step(&plan, KernelId::RnnF32);
        assert_eq!((*grid, *block, shared), ([1, 2, 1], [32, 1, 1], 2 * 4));
        let Arg::Params(bytes) = &args[0] else { panic!() };
        // acts[0].f at byte 96, acts[1].f at byte 132: the second LeakyRelu gets the default alpha.
        let f32_at = |o: usize| f32::from_ne_bytes(bytes[o..o + 4].try_into().unwrap());
        let u32_at = |o: usize| u32::from_ne_bytes(bytes[o..o + 4].try_into().unwrap());
        assert_eq!((u32_at(96), f32_at(100)), (CellActivation::LeakyRelu as u32, 0.2));
        assert_eq!((u32_at(132), f32_at(136)), (CellActivation::LeakyRelu as u32, 0.01));
        assert_eq!(args[args.len() - 1], Arg::Null, "Y_h omitted");
    }

    fn refusal(g: &Graph) -> String {
        match compile(g, &Binding::new(), &PlanOptions::default()) {
            Err(e @ PlanError::NoKernel { .. }) => e.to_string(),
            other => panic!("expected NoKernel, got {other:?}"),
        }
    }

    #[test]
    fn unsupported_attributes_and_sizes_are_refused_with_the_reason() {
        let lstm = |h: usize, clip: Option<f32>| {
            let mut c = common(h, RnnDirection::Forward, RnnLayout::SeqFirst);
            c.clip = clip;
            Op::Lstm(Lstm { common: c, input_forget: false })
        };
        let (g, _) = layer(lstm(4097, None), [1, 1, 1], 4, [false; 5], &[true]);
        assert!(refusal(&g).contains("hidden_size 4097 is outside the kernel's 1..=4096"));
        let (g, _) = layer(lstm(4, Some(-1.0)), [1, 1, 1], 4, [false; 5], &[true]);
        assert!(refusal(&g).contains("clip -1"));
        // Y_h of an empty sequence is refused; Y alone is empty and needs no launch.
        let (g, _) = layer(lstm(4, None), [0, 2, 3], 4, [false; 5], &[true, true]);
        assert!(refusal(&g).contains("seq_length 0"));
        let (g, _) = layer(lstm(4, None), [0, 2, 3], 4, [false; 5], &[true]);
        assert!(plan(&g).steps.is_empty());
        let mut c = common(4, RnnDirection::Forward, RnnLayout::SeqFirst);
        c.activations = vec![RnnActivation::Relu; 2];
        let (g, _) =
            layer(Op::Lstm(Lstm { common: c, input_forget: false }), [1, 1, 1], 4, [false; 5], &[true]);
        assert!(refusal(&g).contains("2 activations given, expected 3"));
    }

    #[test]
    fn a_kernel_writing_several_outputs_validates_each_of_them() {
        let rnn = Rnn { common: common(3, RnnDirection::Forward, RnnLayout::SeqFirst) };
        let (g, outs) = layer(Op::Rnn(rnn), [2, 2, 2], 1, [false; 5], &[true, true]);
        let mut plan = plan(&g);
        plan.validate().unwrap();
        // A reader of Y_h placed before the recurrent step reads it before anything writes it.
        let last = plan.steps.pop().unwrap();
        let reader = Step::Copy { node: crate::graph::NodeId(0), src: outs[1], dst: outs[0], bytes: 4 };
        plan.steps.push(reader);
        plan.steps.push(last);
        assert!(plan.validate().unwrap_err().to_string().contains("before anything writes it"));
    }
}
