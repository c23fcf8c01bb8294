//! The recurrent layers (LSTM, GRU, RNN: a projection GEMM, then `lstm_f32` / `gru_f32` /
//! `rnn_f32`) through `Session` against the CPU reference: hidden sizes around the warp size and
//! past the block's warps, every direction, both layouts, with and without B, initial states,
//! sequence lengths (zero and short ones, i32 and i64), peepholes, `input_forget`, both GRU reset
//! modes, clip, every activation with its alpha and beta, omitted outputs, and a stack of layers
//! sharing the arena.
//!
//! Each case is a [`Problem`] (plain data, printed on failure); its graph takes X and the initial
//! states as inputs and the weights as initializers.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{Gru, Lstm, Op, Recurrent, Rnn, RnnActivation, RnnDirection, RnnLayout, Squeeze};
use planner::{ConstTensor, DType, Dim, Graph, Node, ValueId};

use crate::ctx;

/// Hidden sizes: one unit, around a warp, and more units than a 512-thread block has warps.
const HIDDEN: [usize; 5] = [1, 31, 32, 33, 257];
const DIRECTIONS: [RnnDirection; 3] =
    [RnnDirection::Forward, RnnDirection::Reverse, RnnDirection::Bidirectional];

/// `|got - want| <= 1e-5 * (|want| + 1)` elementwise (f32 sums of up to ~1000 terms per step,
/// against the f64 reference), names, shapes and dtypes equal; reports the first bad element.
fn assert_close(what: &str, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gn, g), (wn, w)) in got.iter().zip(want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        let (gv, wv) = (g.data().to_f64s(), w.data().to_f64s());
        for (i, (a, b)) in gv.iter().zip(&wv).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (b.abs() + 1.0),
                "{what}: {gn}{:?}[{i}]: gpu {a}, reference {b}",
                w.shape()
            );
        }
    }
}

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

fn weight(g: &mut Graph, rng: &mut Rng, name: &str, dims: &[usize], scale: f32) -> ValueId {
    let data: Vec<f32> = (0..dims.iter().product()).map(|_| rng.uniform(-scale, scale)).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).unwrap())
}

fn upto(rng: &mut Rng, hi: usize) -> usize {
    1 + (rng.next_u64() % hi as u64) as usize
}

fn random_lens(rng: &mut Rng, seq: usize, batch: usize) -> Vec<i64> {
    (0..batch).map(|_| (rng.next_u64() % (seq as u64 + 1)) as i64).collect()
}

/// Which layer, with its own attribute.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Lstm { input_forget: bool },
    Gru { linear_before_reset: bool },
    Rnn,
}

/// One recurrent layer and its operands, as data.
#[derive(Debug, Clone)]
struct Problem {
    kind: Kind,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    direction: RnnDirection,
    layout: RnnLayout,
    bias: bool,
    /// `sequence_lens` (each in `0..=seq`), stored as i64 when `lens_i64`.
    lens: Option<Vec<i64>>,
    lens_i64: bool,
    initial_h: bool,
    /// LSTM only.
    initial_c: bool,
    /// LSTM only.
    peepholes: bool,
    clip: Option<f32>,
    activations: Vec<RnnActivation>,
    alphas: Vec<f32>,
    betas: Vec<f32>,
    /// Y, Y_h, Y_c present (Y_c for LSTM only; at least one present).
    outputs: [bool; 3],
}

impl Problem {
    fn gates(&self) -> usize {
        match self.kind {
            Kind::Lstm { .. } => 4,
            Kind::Gru { .. } => 3,
            Kind::Rnn => 1,
        }
    }

    fn dirs(&self) -> usize {
        self.direction.num_directions()
    }

    fn symbol(&self) -> &'static str {
        match self.kind {
            Kind::Lstm { .. } => "lstm_f32",
            Kind::Gru { .. } => "gru_f32",
            Kind::Rnn => "rnn_f32",
        }
    }

    /// A case of `kind` with the given hidden size and direction; case number `i` walks the
    /// layouts, bias, lengths, states and output subsets so that every combination class shows up,
    /// the sizes and the remaining choices are random.
    fn new(rng: &mut Rng, kind: Kind, hidden: usize, direction: RnnDirection, i: usize) -> Problem {
        // The reference is naive f64 loops: keep the widest layers' sequences shorter.
        let seq = upto(rng, if hidden > 64 { 12 } else { 40 });
        let batch = upto(rng, 5);
        let lens = (!i.is_multiple_of(3)).then(|| random_lens(rng, seq, batch));
        let lstm = matches!(kind, Kind::Lstm { .. });
        let n_out = if lstm { 3 } else { 2 };
        let mask = 1 + i % ((1 << n_out) - 1);
        Problem {
            kind,
            seq,
            batch,
            input: upto(rng, 70),
            hidden,
            direction,
            layout: if i.is_multiple_of(2) { RnnLayout::SeqFirst } else { RnnLayout::BatchFirst },
            bias: i % 4 != 1,
            lens,
            lens_i64: i % 5 < 2,
            initial_h: i % 3 != 1,
            initial_c: lstm && i % 4 != 2,
            peepholes: lstm && i % 2 == 1,
            clip: (i % 4 == 3).then(|| rng.uniform(0.5, 3.0)),
            activations: Vec::new(),
            alphas: Vec::new(),
            betas: Vec::new(),
            outputs: [mask & 1 != 0, mask & 2 != 0, mask & 4 != 0],
        }
    }

    /// The same case with other sizes (fresh sequence lengths, when it has them).
    fn sized(mut self, rng: &mut Rng, seq: usize, batch: usize, input: usize) -> Problem {
        (self.seq, self.batch, self.input) = (seq, batch, input);
        if self.lens.is_some() {
            self.lens = Some(random_lens(rng, seq, batch));
        }
        self
    }

    fn op(&self) -> Op {
        let common = Recurrent {
            activation_alpha: self.alphas.clone(),
            activation_beta: self.betas.clone(),
            activations: self.activations.clone(),
            clip: self.clip,
            direction: self.direction,
            hidden_size: self.hidden,
            layout: self.layout,
        };
        match self.kind {
            Kind::Lstm { input_forget } => Op::Lstm(Lstm { common, input_forget }),
            Kind::Gru { linear_before_reset } => Op::Gru(Gru { common, linear_before_reset }),
            Kind::Rnn => Op::Rnn(Rnn { common }),
        }
    }

    fn x_shape(&self) -> [usize; 3] {
        match self.layout {
            RnnLayout::SeqFirst => [self.seq, self.batch, self.input],
            RnnLayout::BatchFirst => [self.batch, self.seq, self.input],
        }
    }

    fn state_shape(&self) -> [usize; 3] {
        match self.layout {
            RnnLayout::SeqFirst => [self.dirs(), self.batch, self.hidden],
            RnnLayout::BatchFirst => [self.batch, self.dirs(), self.hidden],
        }
    }

    /// Appends the layer to `g` reading `x`; returns its outputs (`None` where omitted) and pushes
    /// the values of the state inputs it declares onto `inputs`. Weights are scaled by
    /// `1/sqrt(fan-in)` so that pre-activations stay O(1) over long sequences.
    fn append(
        &self,
        g: &mut Graph,
        rng: &mut Rng,
        x: ValueId,
        inputs: &mut Vec<(String, HostTensor)>,
        tag: &str,
    ) -> Vec<Option<ValueId>> {
        let (h, dirs, gh) = (self.hidden, self.dirs(), self.gates() * self.hidden);
        let w = weight(g, rng, &format!("{tag}w"), &[dirs, gh, self.input], 1.0 / (self.input as f32).sqrt());
        let r = weight(g, rng, &format!("{tag}r"), &[dirs, gh, h], 1.0 / (h as f32).sqrt());
        let b = self.bias.then(|| weight(g, rng, &format!("{tag}b"), &[dirs, 2 * gh], 0.5));
        let lens = self.lens.as_ref().map(|l| {
            let dtype = if self.lens_i64 { DType::I64 } else { DType::I32 };
            g.initializer(&format!("{tag}lens"), ConstTensor::from_i64s_as(dtype, &[self.batch], l).unwrap())
        });
        let mut state = |g: &mut Graph, rng: &mut Rng, name: String| {
            let v = g.input(&name, DType::F32, known(&self.state_shape()));
            inputs.push((name, rng.tensor(&self.state_shape(), -1.0, 1.0)));
            v
        };
        let h0 = self.initial_h.then(|| state(g, rng, format!("{tag}h0")));
        let mut ins = vec![Some(x), Some(w), Some(r), b, lens, h0];
        if let Kind::Lstm { .. } = self.kind {
            let c0 = self.initial_c.then(|| state(g, rng, format!("{tag}c0")));
            let p = self.peepholes.then(|| weight(g, rng, &format!("{tag}p"), &[dirs, 3 * h], 0.5));
            ins.extend([c0, p]);
        }
        let n_out = if let Kind::Lstm { .. } = self.kind { 3 } else { 2 };
        let outputs: Vec<Option<ValueId>> = ["y", "y_h", "y_c"][..n_out]
            .iter()
            .zip(self.outputs)
            .map(|(name, on)| on.then(|| g.add_value(format!("{tag}{name}"), None)))
            .collect();
        let name = format!("{tag}cell");
        g.add_node(Node { name, op: self.op(), inputs: ins, outputs: outputs.clone() });
        outputs
    }

    /// The graph (X and the initial states as inputs, every present output as a graph output) and
    /// its input values.
    fn build(&self, rng: &mut Rng) -> (Graph, Vec<(String, HostTensor)>) {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&self.x_shape()));
        let mut inputs = vec![("x".to_owned(), rng.tensor(&self.x_shape(), -1.0, 1.0))];
        for v in self.append(&mut g, rng, x, &mut inputs, "").into_iter().flatten() {
            g.output(v);
        }
        (g, inputs)
    }

    /// Runs the case on the GPU and on the reference; returns the plan's text.
    fn check(&self, rng: &mut Rng) -> String {
        let (g, inputs) = self.build(rng);
        let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{self:?}: reference: {e}"));
        let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
        let got = s.run(&inputs).unwrap_or_else(|e| panic!("{self:?}: gpu: {e}"));
        assert_close(&format!("{self:?}"), &got, &want);
        let plan = s.last_plan().unwrap().to_string();
        assert!(plan.contains(self.symbol()) && plan.contains("input projection"), "{self:?}\n{plan}");
        plan
    }
}

/// Every hidden size in every direction, the other attributes walking their combinations.
fn sweep(seed: u64, kinds: &[Kind]) {
    let mut rng = Rng::new(seed);
    let mut i = 0;
    for &kind in kinds {
        for hidden in HIDDEN {
            for direction in DIRECTIONS {
                Problem::new(&mut rng, kind, hidden, direction, i).check(&mut rng);
                i += 1;
            }
        }
    }
}

#[test]
fn lstm_matches_the_reference() {
    sweep(0x157d, &[Kind::Lstm { input_forget: false }, Kind::Lstm { input_forget: true }]);
}

#[test]
fn gru_matches_the_reference_in_both_reset_modes() {
    sweep(0x6e0, &[Kind::Gru { linear_before_reset: false }, Kind::Gru { linear_before_reset: true }]);
}

#[test]
fn rnn_matches_the_reference() {
    sweep(0x2a2, &[Kind::Rnn]);
}

/// All 11 activations (RNN, one per direction, explicit alphas and betas; then the shared-list
/// form where the second direction's parameters fall back to defaults), and custom lists for LSTM
/// and GRU.
#[test]
fn every_cell_activation_matches_the_reference() {
    use RnnActivation::*;
    let all = [
        Relu,
        Tanh,
        Sigmoid,
        Affine,
        LeakyRelu,
        ThresholdedRelu,
        ScaledTanh,
        HardSigmoid,
        Elu,
        Softsign,
        Softplus,
    ];
    let mut rng = Rng::new(0xac7);
    for (i, &f) in all.iter().enumerate() {
        let next = all[(i + 5) % all.len()];
        let mut p =
            Problem::new(&mut rng, Kind::Rnn, 33, RnnDirection::Bidirectional, i).sized(&mut rng, 6, 2, 7);
        p.activations = vec![f, next];
        p.alphas = vec![0.4, 0.7, 0.9];
        p.betas = vec![0.3, -0.2];
        p.check(&mut rng);
        // One list for both directions; the alphas run out after the first direction.
        p.activations = vec![f];
        p.alphas = vec![0.6];
        p.betas = vec![];
        p.check(&mut rng);
    }
    let lstm_acts =
        [[HardSigmoid, Softsign, Elu], [Sigmoid, ScaledTanh, Affine], [LeakyRelu, Tanh, Softplus]];
    for (i, acts) in lstm_acts.iter().enumerate() {
        let mut p = Problem::new(&mut rng, Kind::Lstm { input_forget: i == 1 }, 31, DIRECTIONS[i], i);
        p.activations = acts.to_vec();
        p.alphas = vec![0.25, 0.8];
        p.betas = vec![0.45, 0.9];
        p.check(&mut rng);
    }
    for (i, acts) in [[HardSigmoid, Softsign], [Sigmoid, Elu], [HardSigmoid, ScaledTanh]].iter().enumerate() {
        let kind = Kind::Gru { linear_before_reset: i == 1 };
        let mut p = Problem::new(&mut rng, kind, 33, RnnDirection::Bidirectional, i);
        p.activations = [acts.as_slice(), acts.as_slice()].concat();
        p.alphas = vec![0.3];
        p.check(&mut rng);
    }
}

/// Hidden 1024 (two units per warp of a 512-thread block, 12 KiB of LSTM state in shared memory)
/// and the largest LSTM hidden size the kernel takes (4096: 48 KiB).
#[test]
fn wide_layers_loop_over_units() {
    let mut rng = Rng::new(0x1024);
    let kinds = [
        Kind::Lstm { input_forget: false },
        Kind::Gru { linear_before_reset: false },
        Kind::Gru { linear_before_reset: true },
        Kind::Rnn,
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        let mut p =
            Problem::new(&mut rng, kind, 1024, RnnDirection::Bidirectional, i).sized(&mut rng, 3, 2, 16);
        p.outputs = [true, true, true];
        p.check(&mut rng);
    }
    let p = Problem::new(&mut rng, Kind::Lstm { input_forget: false }, 4096, RnnDirection::Forward, 4);
    let mut p = p.sized(&mut rng, 2, 1, 8);
    (p.lens, p.outputs) = (None, [true, true, true]);
    p.check(&mut rng);
}

/// Zero-length and full-length sequences side by side: Y is zero past each length, Y_h (and Y_c)
/// hold the initial state for a zero-length row, in both directions and both layouts.
#[test]
fn sequence_lengths_of_zero_and_full_length() {
    let mut rng = Rng::new(0x5e9);
    let kinds = [Kind::Lstm { input_forget: false }, Kind::Gru { linear_before_reset: true }, Kind::Rnn];
    for (i, kind) in kinds.into_iter().enumerate() {
        for layout in [RnnLayout::SeqFirst, RnnLayout::BatchFirst] {
            let mut p =
                Problem::new(&mut rng, kind, 33, RnnDirection::Bidirectional, i).sized(&mut rng, 9, 4, 5);
            (p.layout, p.outputs) = (layout, [true, true, true]);
            (p.lens, p.lens_i64, p.initial_h, p.initial_c) = (Some(vec![0, 9, 1, 5]), i == 0, true, true);
            p.check(&mut rng);
        }
    }
}

/// Two stacked layers (LSTM -> Squeeze -> GRU) and a Relu on the first layer's Y_h: both layers'
/// projection scratch buffers and outputs share one arena, and a graph-internal Y feeds the next
/// layer.
#[test]
fn stacked_layers_share_the_arena() {
    let mut rng = Rng::new(0x57ac);
    let mut first = Problem::new(&mut rng, Kind::Lstm { input_forget: false }, 32, RnnDirection::Forward, 0);
    (first.seq, first.batch, first.input, first.outputs) = (11, 3, 20, [true, true, false]);
    let mut second =
        Problem::new(&mut rng, Kind::Gru { linear_before_reset: false }, 33, RnnDirection::Reverse, 2);
    (second.seq, second.batch, second.input, second.outputs) = (11, 3, 32, [true, true, false]);
    (first.layout, second.layout, first.lens, second.lens) =
        (RnnLayout::SeqFirst, RnnLayout::SeqFirst, None, None);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&first.x_shape()));
    let mut inputs = vec![("x".to_owned(), rng.tensor(&first.x_shape(), -1.0, 1.0))];
    let outs = first.append(&mut g, &mut rng, x, &mut inputs, "l0_");
    let axes = g.const_i64("axes", &[1], &[1]);
    let squeezed = g.op1(Op::Squeeze(Squeeze::default()), &[outs[0].unwrap(), axes]);
    let outs2 = second.append(&mut g, &mut rng, squeezed, &mut inputs, "l1_");
    let relu = g.relu(outs[1].unwrap());
    for v in [outs2[0].unwrap(), outs2[1].unwrap(), relu] {
        g.output(v);
    }
    let want = host::reference::eval(&g, &inputs).unwrap();
    let mut s = Session::new(ctx(), g, SessionOptions::default()).unwrap();
    assert_close("stacked", &s.run(&inputs).unwrap(), &want);
    let plan = s.last_plan().unwrap().to_string();
    assert!(plan.contains("lstm_f32") && plan.contains("gru_f32") && plan.contains("relu_f32"), "{plan}");
    // A second run (CUDA-graph replay) gives the same outputs.
    assert_close("stacked, replayed", &s.run(&inputs).unwrap(), &want);
}
