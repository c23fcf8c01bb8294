//! Reference ONNX recurrent layers `LSTM`, `GRU` and `RNN` (opset 14): forward, reverse and
//! bidirectional, `sequence_lens`, initial states, LSTM peepholes and `input_forget`, `clip`,
//! custom activations with their alpha/beta, and both layouts.
//!
//! Each direction runs its own recurrence per batch entry over the first `sequence_lens[b]` steps
//! (the reverse direction from step `len − 1` down to 0); Y is zero past a sequence's length and
//! Y_h/Y_c hold the state after the last processed step (the initial state when `len` is 0).

use planner::op::{Gru, Lstm, Recurrent, Rnn, RnnActivation, RnnDirection, RnnLayout};

use super::operand::{Floats, expect_shape, input, input_opt, ints, optional, sigmoid, softplus, tensor};
use crate::error::HostError;
use crate::reference::NodeCtx;
use crate::tensor::HostTensor;

/// An activation with its resolved alpha and beta.
#[derive(Debug, Clone, Copy)]
struct Act {
    f: RnnActivation,
    alpha: f64,
    beta: f64,
}

impl Act {
    fn apply(self, x: f64) -> f64 {
        let (a, b) = (self.alpha, self.beta);
        match self.f {
            RnnActivation::Relu => x.max(0.0),
            RnnActivation::Tanh => x.tanh(),
            RnnActivation::Sigmoid => sigmoid(x),
            RnnActivation::Affine => a * x + b,
            RnnActivation::LeakyRelu => {
                if x < 0.0 {
                    a * x
                } else {
                    x
                }
            }
            RnnActivation::ThresholdedRelu => {
                if x > a {
                    x
                } else {
                    0.0
                }
            }
            RnnActivation::ScaledTanh => a * (b * x).tanh(),
            RnnActivation::HardSigmoid => (a * x + b).clamp(0.0, 1.0),
            RnnActivation::Elu => {
                if x < 0.0 {
                    a * (x.exp() - 1.0)
                } else {
                    x
                }
            }
            RnnActivation::Softsign => x / (1.0 + x.abs()),
            RnnActivation::Softplus => softplus(x),
        }
    }
}

/// The activations of each direction: the attribute list (one list per direction, or one list
/// shared by both), or `defaults`. Alphas and betas are consumed in order by the activations that
/// take them, defaults filling in when the lists run out (ONNX Runtime's reading).
fn activations(
    node: &NodeCtx,
    c: &Recurrent,
    defaults: &[RnnActivation],
) -> Result<Vec<Vec<Act>>, HostError> {
    let dirs = c.direction.num_directions();
    let n = defaults.len();
    let names: Vec<RnnActivation> = match c.activations.len() {
        0 => defaults.repeat(dirs),
        l if l == n * dirs => c.activations.clone(),
        l if l == n => c.activations.repeat(dirs),
        l => return Err(node.err(format!("{l} activations given, expected {}", n * dirs))),
    };
    let (mut alphas, mut betas) = (c.activation_alpha.iter(), c.activation_beta.iter());
    let acts: Vec<Act> = names
        .iter()
        .map(|&f| {
            let (da, db, takes_a, takes_b) = match f {
                RnnActivation::Affine | RnnActivation::ScaledTanh => (1.0, 0.0, true, true),
                RnnActivation::HardSigmoid => (0.2, 0.5, true, true),
                RnnActivation::LeakyRelu => (0.01, 0.0, true, false),
                RnnActivation::ThresholdedRelu | RnnActivation::Elu => (1.0, 0.0, true, false),
                _ => (0.0, 0.0, false, false),
            };
            let db = if f == RnnActivation::ScaledTanh { 1.0 } else { db };
            let alpha = if takes_a { alphas.next().map_or(da, |&v| v as f64) } else { da };
            let beta = if takes_b { betas.next().map_or(db, |&v| v as f64) } else { db };
            Act { f, alpha, beta }
        })
        .collect();
    Ok(acts.chunks(n).map(<[Act]>::to_vec).collect())
}

/// The checked inputs shared by the three layers.
struct Layer {
    x: Floats,
    w: Floats,
    r: Floats,
    /// `Wb` then `Rb` per direction, `(dirs, 2·gates·H)`; zeros when absent.
    bias: Vec<f64>,
    lens: Vec<usize>,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    gates: usize,
}

fn layer(
    node: &NodeCtx,
    c: &Recurrent,
    gates: usize,
    inputs: &[Option<&HostTensor>],
) -> Result<Layer, HostError> {
    let x = input(node, inputs, 0, "X")?;
    let (w, r) = (input(node, inputs, 1, "W")?, input(node, inputs, 2, "R")?);
    let [a, b, input_size] = <[usize; 3]>::try_from(x.shape.as_slice())
        .map_err(|_| node.err(format!("X must be 3-D, got {:?}", x.shape)))?;
    let (seq, batch) = if c.layout == RnnLayout::SeqFirst { (a, b) } else { (b, a) };
    let (hidden, dirs) = (c.hidden_size, c.direction.num_directions());
    if hidden == 0 {
        return Err(node.err("hidden_size must be positive"));
    }
    expect_shape(node, &w.shape, &[dirs, gates * hidden, input_size], "W")?;
    expect_shape(node, &r.shape, &[dirs, gates * hidden, hidden], "R")?;
    let bias = match input_opt(node, inputs, 3, "B")? {
        Some(b) => {
            expect_shape(node, &b.shape, &[dirs, 2 * gates * hidden], "B")?;
            b.data
        }
        None => vec![0.0; dirs * 2 * gates * hidden],
    };
    let lens = match optional(inputs, 4) {
        Some(t) => {
            let l = ints(node, t, "sequence_lens")?;
            if l.len() != batch || l.iter().any(|&v| v < 0 || v as usize > seq) {
                return Err(node.err(format!("sequence_lens {l:?} must be {batch} lengths in 0..={seq}")));
            }
            l.iter().map(|&v| v as usize).collect()
        }
        None => vec![seq; batch],
    };
    Ok(Layer { x, w, r, bias, lens, seq, batch, input: input_size, hidden, dirs, gates })
}

impl Layer {
    fn state_shape(&self, layout: RnnLayout) -> Vec<usize> {
        match layout {
            RnnLayout::SeqFirst => vec![self.dirs, self.batch, self.hidden],
            RnnLayout::BatchFirst => vec![self.batch, self.dirs, self.hidden],
        }
    }

    fn state_offset(&self, layout: RnnLayout, d: usize, b: usize) -> usize {
        match layout {
            RnnLayout::SeqFirst => (d * self.batch + b) * self.hidden,
            RnnLayout::BatchFirst => (b * self.dirs + d) * self.hidden,
        }
    }

    /// Optional initial state input `slot`, in the layout's state shape.
    fn initial(
        &self,
        node: &NodeCtx,
        c: &Recurrent,
        inputs: &[Option<&HostTensor>],
        slot: usize,
        what: &str,
    ) -> Result<Option<Floats>, HostError> {
        let t = input_opt(node, inputs, slot, what)?;
        if let Some(t) = &t {
            expect_shape(node, &t.shape, &self.state_shape(c.layout), what)?;
        }
        Ok(t)
    }

    /// Pre-activations of gate rows `g·H..(g+1)·H` for direction `d`: `W x + R h + Wb + Rb`.
    fn gate(&self, d: usize, g: usize, x: &[f64], h: &[f64]) -> Vec<f64> {
        let (hs, gh) = (self.hidden, self.gates * self.hidden);
        (0..hs)
            .map(|j| {
                let row = d * gh + g * hs + j;
                let wx: f64 = x.iter().zip(&self.w.data[row * self.input..]).map(|(a, b)| a * b).sum();
                let rh: f64 = h.iter().zip(&self.r.data[row * hs..]).map(|(a, b)| a * b).sum();
                let bo = d * 2 * gh + g * hs + j;
                wx + rh + self.bias[bo] + self.bias[bo + gh]
            })
            .collect()
    }

    /// Runs `cell(d, x_t, states)` over each direction and batch entry; `states[0]` is h. Returns Y
    /// and the final value of every state, in the layout's shapes.
    fn scan(
        &self,
        c: &Recurrent,
        init: &[Option<Floats>],
        mut cell: impl FnMut(usize, &[f64], &mut [Vec<f64>]),
    ) -> (Vec<f64>, Vec<Vec<f64>>) {
        let hs = self.hidden;
        let mut y = vec![0.0; self.seq * self.dirs * self.batch * hs];
        let mut finals = vec![vec![0.0; self.dirs * self.batch * hs]; init.len()];
        for d in 0..self.dirs {
            let reverse = c.direction == RnnDirection::Reverse
                || (c.direction == RnnDirection::Bidirectional && d == 1);
            for b in 0..self.batch {
                let so = self.state_offset(c.layout, d, b);
                let mut states: Vec<Vec<f64>> = init
                    .iter()
                    .map(|i| i.as_ref().map_or(vec![0.0; hs], |t| t.data[so..so + hs].to_vec()))
                    .collect();
                let len = self.lens[b];
                for k in 0..len {
                    let t = if reverse { len - 1 - k } else { k };
                    let xo = match c.layout {
                        RnnLayout::SeqFirst => (t * self.batch + b) * self.input,
                        RnnLayout::BatchFirst => (b * self.seq + t) * self.input,
                    };
                    cell(d, &self.x.data[xo..xo + self.input], &mut states);
                    let yo = match c.layout {
                        RnnLayout::SeqFirst => ((t * self.dirs + d) * self.batch + b) * hs,
                        RnnLayout::BatchFirst => ((b * self.seq + t) * self.dirs + d) * hs,
                    };
                    y[yo..yo + hs].copy_from_slice(&states[0]);
                }
                for (f, s) in finals.iter_mut().zip(&states) {
                    f[so..so + hs].copy_from_slice(s);
                }
            }
        }
        (y, finals)
    }

    fn outputs(
        &self,
        node: &NodeCtx,
        c: &Recurrent,
        y: Vec<f64>,
        finals: Vec<Vec<f64>>,
    ) -> Result<Vec<HostTensor>, HostError> {
        let y_shape = match c.layout {
            RnnLayout::SeqFirst => vec![self.seq, self.dirs, self.batch, self.hidden],
            RnnLayout::BatchFirst => vec![self.batch, self.seq, self.dirs, self.hidden],
        };
        let mut outs = vec![tensor(node, self.x.dtype, y_shape, y)?];
        for f in finals {
            outs.push(tensor(node, self.x.dtype, self.state_shape(c.layout), f)?);
        }
        Ok(outs)
    }
}

fn clip(c: &Recurrent, v: f64) -> f64 {
    match c.clip {
        Some(t) => v.clamp(-(t as f64), t as f64),
        None => v,
    }
}

/// ONNX `LSTM`: gates (i, o, f, c) with `i = f(Wi x + Ri h + Pi⊙C + b)`, `f` likewise (or
/// `1 − i` with `input_forget`), `c̃ = g(Wc x + Rc h + b)`, `C = f⊙C + i⊙c̃`,
/// `o = f(Wo x + Ro h + Po⊙C_new + b)`, `h = o⊙h(C)`. Defaults f = Sigmoid, g = h = Tanh.
/// Inputs X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P? `(dirs, 3H)` as (Pi, Po, Pf).
/// Outputs Y, Y_h, Y_c.
pub fn lstm(
    node: &NodeCtx,
    attrs: &Lstm,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let c = &attrs.common;
    let l = layer(node, c, 4, inputs)?;
    let acts = activations(node, c, &[RnnActivation::Sigmoid, RnnActivation::Tanh, RnnActivation::Tanh])?;
    let init = [l.initial(node, c, inputs, 5, "initial_h")?, l.initial(node, c, inputs, 6, "initial_c")?];
    let hs = l.hidden;
    let peep = match input_opt(node, inputs, 7, "P")? {
        Some(p) => {
            expect_shape(node, &p.shape, &[l.dirs, 3 * hs], "P")?;
            p.data
        }
        None => vec![0.0; l.dirs * 3 * hs],
    };
    let (y, finals) = l.scan(c, &init, |d, x, st| {
        let (h, cell) = (&st[0], &st[1]);
        let [fa, ga, ha] = [acts[d][0], acts[d][1], acts[d][2]];
        let (pi, po, pf) = (&peep[d * 3 * hs..], &peep[d * 3 * hs + hs..], &peep[d * 3 * hs + 2 * hs..]);
        let (gi, go, gf, gc) =
            (l.gate(d, 0, x, h), l.gate(d, 1, x, h), l.gate(d, 2, x, h), l.gate(d, 3, x, h));
        let mut new_h = vec![0.0; hs];
        let mut new_c = vec![0.0; hs];
        for j in 0..hs {
            let i = fa.apply(clip(c, gi[j] + pi[j] * cell[j]));
            let f = if attrs.input_forget { 1.0 - i } else { fa.apply(clip(c, gf[j] + pf[j] * cell[j])) };
            let cand = ga.apply(clip(c, gc[j]));
            new_c[j] = f * cell[j] + i * cand;
            let o = fa.apply(clip(c, go[j] + po[j] * new_c[j]));
            new_h[j] = o * ha.apply(new_c[j]);
        }
        st[0] = new_h;
        st[1] = new_c;
    });
    l.outputs(node, c, y, finals)
}

/// ONNX `GRU`: gates (z, r, h) with `z = f(Wz x + Rz h + b)`, `r = f(Wr x + Rr h + b)`,
/// `h̃ = g(Wh x + (r⊙h) Rhᵀ + Rbh + Wbh)` or, with `linear_before_reset`,
/// `g(Wh x + r⊙(h Rhᵀ + Rbh) + Wbh)`, and `h = (1 − z)⊙h̃ + z⊙h`. Defaults f = Sigmoid, g = Tanh.
/// Inputs X, W, R, B?, sequence_lens?, initial_h?; outputs Y, Y_h.
pub fn gru(
    node: &NodeCtx,
    attrs: &Gru,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let c = &attrs.common;
    let l = layer(node, c, 3, inputs)?;
    let acts = activations(node, c, &[RnnActivation::Sigmoid, RnnActivation::Tanh])?;
    let init = [l.initial(node, c, inputs, 5, "initial_h")?];
    let (hs, gh) = (l.hidden, 3 * l.hidden);
    let (y, finals) = l.scan(c, &init, |d, x, st| {
        let h = &st[0];
        let [fa, ga] = [acts[d][0], acts[d][1]];
        let (gz, gr) = (l.gate(d, 0, x, h), l.gate(d, 1, x, h));
        let z: Vec<f64> = gz.iter().map(|&v| fa.apply(clip(c, v))).collect();
        let r: Vec<f64> = gr.iter().map(|&v| fa.apply(clip(c, v))).collect();
        let rh: Vec<f64> = r.iter().zip(h).map(|(a, b)| a * b).collect();
        let mut new_h = vec![0.0; hs];
        for j in 0..hs {
            let row = d * gh + 2 * hs + j;
            let wx: f64 = x.iter().zip(&l.w.data[row * l.input..]).map(|(a, b)| a * b).sum();
            let (wb, rb) = (l.bias[d * 2 * gh + 2 * hs + j], l.bias[d * 2 * gh + gh + 2 * hs + j]);
            let rrow = &l.r.data[row * hs..(row + 1) * hs];
            let rec = if attrs.linear_before_reset {
                r[j] * (h.iter().zip(rrow).map(|(a, b)| a * b).sum::<f64>() + rb)
            } else {
                rh.iter().zip(rrow).map(|(a, b)| a * b).sum::<f64>() + rb
            };
            let cand = ga.apply(clip(c, wx + rec + wb));
            new_h[j] = (1.0 - z[j]) * cand + z[j] * h[j];
        }
        st[0] = new_h;
    });
    l.outputs(node, c, y, finals)
}

/// ONNX `RNN`: `h = f(W x + R h + Wb + Rb)`, default f = Tanh. Inputs X, W, R, B?,
/// sequence_lens?, initial_h?; outputs Y, Y_h.
pub fn rnn(
    node: &NodeCtx,
    attrs: &Rnn,
    inputs: &[Option<&HostTensor>],
) -> Result<Vec<HostTensor>, HostError> {
    let c = &attrs.common;
    let l = layer(node, c, 1, inputs)?;
    let acts = activations(node, c, &[RnnActivation::Tanh])?;
    let init = [l.initial(node, c, inputs, 5, "initial_h")?];
    let (y, finals) = l.scan(c, &init, |d, x, st| {
        st[0] = l.gate(d, 0, x, &st[0]).into_iter().map(|v| acts[d][0].apply(clip(c, v))).collect();
    });
    l.outputs(node, c, y, finals)
}

#[cfg(test)]
#[path = "rnn_tests.rs"]
mod tests;
