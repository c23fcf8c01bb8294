//! Staged runs (data-dependent shapes) on the GPU: the cost of a NonZero in the middle of a model.
//!
//! Workload: `host::selftest::selected_rows_graph` (1000 rows of 4 features; the rows with a
//! positive first feature go through a 4 -> 8 linear layer, ReLU, and a sum). Printed, wall clock
//! per `Session::run` (inputs in, outputs out, the count read back mid-run), median and p95 over
//! warm runs:
//! - `staged, same count`: one input again and again (its plans cached, the region warm);
//! - `staged, 3 counts in turn`: three inputs with different counts (all seen before);
//! - `static, rows given`: the same work when the caller passes the selected rows (no NonZero, one
//!   plan replayed as a CUDA graph) — what the staging costs on top;
//! - `new count`: the first run of a count never seen (the stages after NonZero are planned
//!   again; their constants come from the session's pool, so nothing is uploaded).
//!
//! Also the device allocations of the warm staged runs (0 expected) and the run-time region's size.
//!
//! Run with `cargo bench --features gpu --bench staged` (or the gpu-pack runner's `--bench`).

use std::time::Instant;

use host::selftest::{Rng, selected_rows_graph, selected_rows_input};
use host::{Context, HostTensor, Session, SessionOptions};
use planner::op::{self, Op};
use planner::{ConstTensor, DType, Dim, Graph};

const ROWS: usize = 1000;
const RUNS: usize = 2000;

/// The part of the workload after the selection, on rows the caller selected.
fn static_graph(selected: usize) -> Graph {
    let mut g = Graph::new();
    let x = g.input("picked", DType::F32, vec![Dim::Known(selected), Dim::Known(4)]);
    let w: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
    let w = g.initializer("w", ConstTensor::from_f32(&[4, 8], &w).unwrap());
    let b = g.initializer("b", ConstTensor::from_f32(&[8], &[0.1; 8]).unwrap());
    let h = g.matmul(x, w);
    let hb = g.add(h, b);
    let y = g.relu(hb);
    let total = g.op1(Op::ReduceSum(op::Reduce { keepdims: false, ..Default::default() }), &[y]);
    g.output(y);
    g.output(total);
    g
}

/// Median and p95 wall-clock microseconds of `RUNS` calls of `f` (after 50 warm-up calls).
fn time(mut f: impl FnMut(usize)) -> (f64, f64) {
    (0..50).for_each(&mut f);
    let mut t: Vec<f64> = (0..RUNS)
        .map(|i| {
            let start = Instant::now();
            f(i);
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    (t[RUNS / 2], t[RUNS * 95 / 100])
}

fn report(name: &str, (median, p95): (f64, f64)) {
    println!("{name:<28} median {median:>8.1} us   p95 {p95:>8.1} us");
}

fn main() {
    let ctx = Context::new(0).expect("the staged bench needs an NVIDIA GPU");
    println!(
        "staged runs on {}: {ROWS} rows x 4 features, NonZero of the first feature's sign",
        ctx.info().name
    );
    let mut rng = Rng::new(7);
    let inputs: Vec<HostTensor> =
        [0.5, 0.2, 0.8].iter().map(|&p| selected_rows_input(&mut rng, ROWS, p)).collect();
    let mut s = Session::new(&ctx, selected_rows_graph(ROWS), SessionOptions::default()).unwrap();
    let run = |s: &mut Session, x: &HostTensor| s.run(&[("x".into(), x.clone())]).unwrap();
    let counts: Vec<usize> = inputs.iter().map(|x| run(&mut s, x)[0].1.shape()[0]).collect();
    println!("selected rows per input: {counts:?}");
    let warm = s.allocation_count();
    report("staged, same count", time(|_| drop(run(&mut s, &inputs[0]))));
    report("staged, 3 counts in turn", time(|i| drop(run(&mut s, &inputs[i % 3]))));
    println!(
        "device allocations in warm staged runs: {}; run-time region {} bytes (peak use {})",
        s.allocation_count() - warm,
        s.region_stats().capacity,
        s.region_stats().high_water
    );
    // Rows the caller selected: the static remainder, graph-replayed.
    let picked: Vec<f32> = {
        let x = inputs[0].f32s("x").unwrap();
        x.chunks(4).filter(|r| r[0] > 0.0).flatten().copied().collect()
    };
    let picked = HostTensor::new(vec![counts[0], 4], picked).unwrap();
    let mut st = Session::new(&ctx, static_graph(counts[0]), SessionOptions::default()).unwrap();
    report("static, rows given", time(|_| drop(st.run(&[("picked".into(), picked.clone())]).unwrap())));
    // Counts never seen: each first run plans the stages after NonZero.
    let (mut fresh, before) = (Vec::new(), s.allocation_count());
    for k in 0..20 {
        let x = selected_rows_input(&mut rng, ROWS, 0.3 + 0.02 * k as f64);
        let start = Instant::now();
        run(&mut s, &x);
        fresh.push(start.elapsed().as_secs_f64() * 1e6);
    }
    fresh.sort_by(f64::total_cmp);
    println!(
        "new count (first run, plans the rest): median {:.1} us over {} runs; device allocations {}",
        fresh[fresh.len() / 2],
        fresh.len(),
        s.allocation_count() - before
    );
}
