//! Token-by-token generation from a Mamba-style language model with its recurrent state on the
//! GPU (`SessionOptions::stateful`): one run over the prompt (the prefill) leaves the causal
//! convolution's window and the selective scan's state on the device, then every further run
//! takes one token and continues from them. The model is built in code (a token embedding, one
//! Mamba block: input projection, causal depthwise convolution with SiLU, selective scan gated
//! by z, output projection and residual, then the LM head) with deterministic random
//! weights, so the tokens mean nothing; what the example shows is the loop. At the end the last
//! step's logits are checked against one CPU-reference run over the whole generated sequence.
//!
//! Without a GPU the CPU reference runs the whole sequence again for every token (it keeps no
//! state between runs).
//!
//! `cargo run --release --example decode`

use std::time::Instant;

use ferrofuse::host::{Context, HostTensor, Session, SessionOptions, reference, selftest::Rng};
use ferrofuse::planner::op::{CausalConvWithState, ConvActivation, Op, SelectiveScan, Split};
use ferrofuse::planner::{ConstTensor, DType, Dim, Graph, ValueId};

/// Vocabulary.
const VOCAB: usize = 64;
/// Model width, inner width, state size, conv width.
const D: usize = 32;
const E: usize = 64;
const N: usize = 8;
const K: usize = 4;

/// A weight of `dims`, uniform in ±`scale`.
fn weight(g: &mut Graph, rng: &mut Rng, name: &str, dims: &[usize], scale: f32) -> ValueId {
    let n: usize = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|_| rng.uniform(-scale, scale)).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).expect("sized"))
}

/// The model: `tokens [1, len]` (i64, `len` symbolic) -> `logits [1, len, VOCAB]`.
fn model() -> Graph {
    let mut rng = Rng::new(0xdec0de);
    let mut g = Graph::new();
    let tokens = g.input("tokens", DType::I64, vec![Dim::Known(1), Dim::Symbol("len".into())]);
    let embed = weight(&mut g, &mut rng, "embed", &[VOCAB, D], 1.0);
    let h = g.gather(embed, tokens, 0); // [1, len, D]
    // Input projection to x and the gate z, each [1, len, E], channels-first for the sequence ops.
    let w_in = weight(&mut g, &mut rng, "w_in", &[D, 2 * E], 0.3);
    let xz = g.matmul(h, w_in);
    let sizes = g.const_i64("sizes", &[2], &[E as i64, E as i64]);
    let parts = g.push(Op::Split(Split { axis: -1, split: None, num_outputs: None }), &[xz, sizes], 2);
    let x = g.transpose(parts[0], &[0, 2, 1]);
    let z = g.transpose(parts[1], &[0, 2, 1]);
    let w_conv = weight(&mut g, &mut rng, "w_conv", &[E, K], 0.5);
    let b_conv = weight(&mut g, &mut rng, "b_conv", &[E], 0.1);
    let conv = CausalConvWithState { activation: ConvActivation::Silu, ..Default::default() };
    let u = g.push(Op::CausalConvWithState(conv), &[x, w_conv, b_conv], 1)[0];
    // Input-dependent step size, B and C (channels-first).
    let w_dt = weight(&mut g, &mut rng, "w_dt", &[D, E], 0.3);
    let w_b = weight(&mut g, &mut rng, "w_b", &[D, N], 0.3);
    let w_c = weight(&mut g, &mut rng, "w_c", &[D, N], 0.3);
    let project = |g: &mut Graph, w: ValueId| {
        let p = g.matmul(h, w);
        g.transpose(p, &[0, 2, 1])
    };
    let (delta, bm, cm) = (project(&mut g, w_dt), project(&mut g, w_b), project(&mut g, w_c));
    let a: Vec<f32> = (0..E * N).map(|i| -1.0 - (i % N) as f32).collect();
    let a = g.initializer("A", ConstTensor::from_f32(&[E, N], &a).expect("sized"));
    let d_skip = weight(&mut g, &mut rng, "D", &[E], 1.0);
    let dt_bias = weight(&mut g, &mut rng, "dt_bias", &[E], 0.5);
    let scan = SelectiveScan { delta_softplus: true };
    let ins = vec![Some(u), Some(delta), Some(a), Some(bm), Some(cm), Some(d_skip), Some(z), Some(dt_bias)];
    let y = g.push_opt(Op::SelectiveScan(scan), ins, 1)[0]; // [1, E, len]
    let y = g.transpose(y, &[0, 2, 1]);
    let w_out = weight(&mut g, &mut rng, "w_out", &[E, D], 1.0);
    let out = g.matmul(y, w_out);
    let h2 = g.add(h, out);
    let head = weight(&mut g, &mut rng, "head", &[D, VOCAB], 0.5);
    let logits = g.matmul(h2, head);
    g.output(logits);
    g
}

/// The tokens as the model's input.
fn tokens(t: &[i64]) -> Vec<(String, HostTensor)> {
    vec![("tokens".to_string(), HostTensor::new(vec![1, t.len()], t.to_vec()).expect("sized"))]
}

/// The last position's logits of `outputs` and their argmax.
fn last_logits(outputs: &[(String, HostTensor)]) -> anyhow::Result<(Vec<f64>, i64)> {
    let v = outputs.first().ok_or_else(|| anyhow::anyhow!("no output"))?.1.data().to_f64s();
    let last = v[v.len() - VOCAB..].to_vec();
    let best = (0..VOCAB).max_by(|&i, &j| last[i].total_cmp(&last[j])).unwrap_or(0);
    Ok((last, best as i64))
}

fn main() -> anyhow::Result<()> {
    let graph = model();
    let prompt: Vec<i64> = vec![1, 7, 3, 12, 5, 9, 2, 30];
    let steps = 24;
    let mut seq = prompt.clone();
    match Context::new(0) {
        Ok(ctx) => {
            let options = SessionOptions { stateful: true, ..SessionOptions::default() };
            let mut session = Session::new(&ctx, graph.clone(), options)?;
            let started = Instant::now();
            let (_, mut next) = last_logits(&session.run(&tokens(&prompt))?)?;
            println!("prefill of {} tokens: {:.2} ms", prompt.len(), started.elapsed().as_secs_f64() * 1e3);
            let mut logits = Vec::new();
            let started = Instant::now();
            for _ in 0..steps {
                seq.push(next);
                // One token in; the state the previous run left on the device carries the rest.
                (logits, next) = last_logits(&session.run(&tokens(&[next]))?)?;
            }
            let per = started.elapsed().as_secs_f64() * 1e6 / steps as f64;
            println!("{steps} decode steps: {per:.1} us each (host time, including the copies)");
            println!("state slots: {:?}", session.state_slots().iter().map(|s| &s.name).collect::<Vec<_>>());
            // The last step saw the whole sequence through its state: one reference run over
            // the sequence gives the same logits at its last position.
            let (want, _) = last_logits(&reference::eval(&graph, &tokens(&seq))?)?;
            let err = logits.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f64, f64::max);
            println!("last step vs one reference run over all {} tokens: max |diff| {err:.2e}", seq.len());
            if err > 1e-3 {
                anyhow::bail!("decoding step by step diverged from the prefill of the same sequence");
            }
        }
        Err(no_gpu) => {
            eprintln!("{no_gpu}; using the CPU reference executor (the whole sequence for each token)");
            // What a GPU would run: the stateful plans of the prefill and of one step.
            let options = SessionOptions { stateful: true, ..SessionOptions::default() };
            let plan_options = ferrofuse::host::session::plan_options(&options, 132, true);
            for len in [prompt.len(), 1] {
                let binding = ferrofuse::planner::Binding::new().with("len", len);
                let plan = ferrofuse::planner::plan::compile(&graph, &binding, &plan_options)?;
                println!(
                    "GPU plan for {len} token(s): {} steps, {} state slots",
                    plan.steps.len(),
                    plan.states.len()
                );
            }
            let (_, mut next) = last_logits(&reference::eval(&graph, &tokens(&prompt))?)?;
            for _ in 0..steps {
                seq.push(next);
                (_, next) = last_logits(&reference::eval(&graph, &tokens(&seq))?)?;
            }
        }
    }
    println!("prompt:    {prompt:?}");
    println!("generated: {:?}", &seq[prompt.len()..]);
    Ok(())
}
