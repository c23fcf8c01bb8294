//! GEMMs reading A where it lies (`planner::plan::gemm_cat`): rows gathered from a table and
//! columns concatenated side by side, read by the `wgmma` GEMM's loads (`gemm_wg*_cat_*`) with no
//! gather or concatenation launched. Each case runs with `wgmma` on (on Hopper: the `_cat`
//! entry, no gather step) and off (the gathers and copies, then the `mma.sync` tiles), both
//! against the reference and bit for bit against each other (the same products in the same
//! order: only where A's rows come from differs).

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, Gemm, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;
use crate::gemm::{check_within, weight};

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// Random indices in `[-rows, rows)` (negative ones count from the end) of `dtype` (i64 / i32).
fn indices(rng: &mut Rng, shape: &[usize], rows: usize, dtype: DType) -> HostTensor {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n).map(|_| (rng.next_u64() % (2 * rows as u64)) as i64 - rows as i64).collect();
    match dtype {
        DType::I32 => HostTensor::new(shape.to_vec(), v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
        _ => HostTensor::new(shape.to_vec(), v),
    }
    .unwrap()
}

fn f32_input(
    g: &mut Graph,
    rng: &mut Rng,
    feeds: &mut Vec<(String, HostTensor)>,
    name: &str,
    shape: &[usize],
) -> ValueId {
    feeds.push((name.to_owned(), rng.tensor(shape, -1.0, 1.0)));
    g.input(name, DType::F32, known(shape))
}

fn index_input(
    g: &mut Graph,
    rng: &mut Rng,
    feeds: &mut Vec<(String, HostTensor)>,
    (name, shape, rows, dtype): (&str, &[usize], usize, DType),
) -> ValueId {
    feeds.push((name.to_owned(), indices(rng, shape, rows, dtype)));
    g.input(name, dtype, known(shape))
}

fn i64s(g: &mut Graph, name: &str, v: &[i64]) -> ValueId {
    g.initializer(name, ConstTensor::from_i64(&[v.len()], v).unwrap())
}

/// Runs `g` with `wgmma` on and off (module doc); on Hopper the first run's plan must name
/// `kernel` and no `gather`.
fn case(what: &str, g: &Graph, feeds: &[(String, HostTensor)], kernels: (&str, &str)) {
    case_with(what, g, feeds, kernels, SessionOptions::default())
}

/// [`case`] with the session options `on` for the `wgmma` run.
fn case_with(
    what: &str,
    g: &Graph,
    feeds: &[(String, HostTensor)],
    (kernel, mma): (&str, &str),
    on: SessionOptions,
) {
    let hopper = ctx().flavour() == host::PtxFlavour::Hopper;
    let got = check_within(what, g, feeds, on, if hopper { kernel } else { mma }, 2e-6);
    let off = SessionOptions { wgmma_gemm: false, ..on };
    let want = check_within(what, g, feeds, off, mma, 2e-6);
    assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{what}: the two paths differ");
    if hopper {
        let mut s = Session::new(ctx(), g.clone(), on).unwrap();
        s.run(feeds).unwrap();
        let plan = s.last_plan().unwrap().to_string();
        // No gather kernel and no copy of a concatenation: the GEMM's step names the nodes it
        // took over.
        let steps: Vec<&str> = plan.lines().filter(|l| l.starts_with('#')).collect();
        let moved = steps.iter().any(|l| l.contains("gather") || l.contains("strided_copy"));
        let named = steps.iter().any(|l| l.contains("Gather") || l.contains("Concat"));
        assert!(!moved && named, "{what}: A is read where it lies\n{plan}");
    }
}

/// An edge MLP over `m` edges of a `rows`-node table, `relu(cat([h[src], h[dst]], -1) · W^T +
/// b)` as `gather_concat` leaves it: a GatherND of the stacked `[m, 2, 1]` indices reshaped to
/// `[m, 128]` (Gemm transB with C).
fn stacked_edge_mlp(rng: &mut Rng, m: usize, rows: usize) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let h = f32_input(&mut g, rng, &mut feeds, "h", &[rows, 64]);
    let ix = index_input(&mut g, rng, &mut feeds, ("ix", &[m, 2, 1], rows, DType::I64));
    let gathered = g.op1(Op::GatherNd(op::GatherNd { batch_dims: 0 }), &[h, ix]);
    let shape = i64s(&mut g, "shape", &[m as i64, 128]);
    let a = g.op1(Op::Reshape(op::Reshape::default()), &[gathered, shape]);
    let w = weight(&mut g, rng, "w", &[64, 128]);
    let c = weight(&mut g, rng, "c", &[64]);
    let y = g.push(Op::Gemm(Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true }), &[a, w, c], 1)[0];
    let y = g.op1(Op::Relu, &[y]);
    g.output(y);
    (g, feeds)
}

#[test]
fn gemms_read_gathered_and_concatenated_rows_where_they_lie() {
    let mut rng = Rng::new(0xca7);
    // 17000 rows: enough 64 x 64 tiles (two per multiprocessor) for the large-tile kernels.
    let (m, rows) = (17_000, 3_000);

    // An edge MLP as `gather_concat` leaves it.
    let (g, feeds) = stacked_edge_mlp(&mut rng, m, rows);
    case("stacked gather", &g, &feeds, ("gemm_wg64_cat_f32", "gemm_tc64_k_f32"));

    // The same edge MLP as a user writes it, `cat([h[ei[0]], h[ei[1]]], -1)` of an `[2, m]` edge
    // index: `gather_concat` stacks the two index rows, and the GEMM reads each row of `ei`
    // where it lies (offsets 0 and m) instead of the stacked copy.
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let h = f32_input(&mut g, &mut rng, &mut feeds, "h", &[rows, 64]);
    let ei = index_input(&mut g, &mut rng, &mut feeds, ("ei", &[2, m], rows, DType::I64));
    let rows_of: Vec<ValueId> = [0i64, -1]
        .iter()
        .map(|&r| {
            let k = g.initializer(&format!("k{r}"), ConstTensor::from_i64(&[], &[r]).unwrap());
            let ix = g.op1(Op::Gather(op::Gather { axis: 0 }), &[ei, k]);
            g.op1(Op::Gather(op::Gather { axis: 0 }), &[h, ix])
        })
        .collect();
    let a = g.op1(Op::Concat(op::Concat { axis: -1 }), &rows_of);
    let w = weight(&mut g, &mut rng, "w", &[64, 128]);
    let c = weight(&mut g, &mut rng, "c", &[64]);
    let y = g.push(Op::Gemm(Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true }), &[a, w, c], 1)[0];
    g.output(y);
    case("edge index rows", &g, &feeds, ("gemm_wg64_cat_f32", "gemm_tc64_k_f32"));

    // A node update: `cat([h, z], -1) · W` of two values of their own, widths 64 and 36.
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let h = f32_input(&mut g, &mut rng, &mut feeds, "h", &[m, 64]);
    let z = f32_input(&mut g, &mut rng, &mut feeds, "z", &[m, 36]);
    let a = g.op1(Op::Concat(op::Concat { axis: -1 }), &[h, z]);
    let w = weight(&mut g, &mut rng, "w", &[100, 64]);
    let y = g.matmul(a, w);
    g.output(y);
    case("concatenation", &g, &feeds, ("gemm_wg64_cat_f32", "gemm_tc64_n_f32"));

    // Two tables gathered, then concatenated: `cat([x[i], t[j]], -1) · W`, with 128 output
    // columns (the 128 x 128 tiles).
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let x = f32_input(&mut g, &mut rng, &mut feeds, "x", &[rows, 32]);
    let t = f32_input(&mut g, &mut rng, &mut feeds, "t", &[rows + 7, 48]);
    let i = index_input(&mut g, &mut rng, &mut feeds, ("i", &[m], rows, DType::I64));
    let j = index_input(&mut g, &mut rng, &mut feeds, ("j", &[m], rows + 7, DType::I64));
    let gx = g.op1(Op::Gather(op::Gather { axis: 0 }), &[x, i]);
    let gt = g.op1(Op::Gather(op::Gather { axis: 0 }), &[t, j]);
    let a = g.op1(Op::Concat(op::Concat { axis: 1 }), &[gx, gt]);
    let w = weight(&mut g, &mut rng, "w", &[80, 128]);
    let y = g.matmul(a, w);
    g.output(y);
    case("two gathers", &g, &feeds, ("gemm_wg128_cat_f32", "gemm_tc128_n_f32"));

    // One gather: `x[i] · W` (an embedding feeding a projection), int64 and int32 indices.
    for dtype in [DType::I64, DType::I32] {
        let mut g = Graph::new();
        let mut feeds = Vec::new();
        let x = f32_input(&mut g, &mut rng, &mut feeds, "x", &[rows, 64]);
        let i = index_input(&mut g, &mut rng, &mut feeds, ("i", &[m], rows, dtype));
        let a = g.op1(Op::Gather(op::Gather { axis: 0 }), &[x, i]);
        let w = weight(&mut g, &mut rng, "w", &[64, 64]);
        let y = g.matmul(a, w);
        g.output(y);
        case(&format!("one gather, {dtype} indices"), &g, &feeds, ("gemm_wg64_cat_f32", "gemm_tc64_n_f32"));
    }
}

#[test]
fn many_row_tiles_of_a_short_k_keep_b_resident() {
    // 70 003 rows: over four 64-row tiles for each of two blocks per multiprocessor (132 SMs),
    // so the `_cat` GEMM without a program epilogue keeps B in shared memory and loops over row
    // tiles (`gemm_wg64_cat_resident_f32`); the last tile is ragged. The same products in the
    // same order as the one-tile-a-block entries: bit for bit the `mma.sync` path's results.
    let mut rng = Rng::new(0x5e5);
    let (m, rows) = (70_003, 5_000);
    let (g, feeds) = stacked_edge_mlp(&mut rng, m, rows);
    // Resident B is off by default (slower on the GNN): the plain entry; on when asked.
    let resident = SessionOptions { resident_b: true, ..SessionOptions::default() };
    case("edge MLP", &g, &feeds, ("gemm_wg64_cat_f32", "gemm_tc64_k_f32"));
    case_with(
        "edge MLP, B resident",
        &g,
        &feeds,
        ("gemm_wg64_cat_resident_f32", "gemm_tc64_k_f32"),
        resident,
    );

    // A node update of k 100 (four k tiles, the last partial) and 48 output columns.
    let m = 70_001;
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let h = f32_input(&mut g, &mut rng, &mut feeds, "h", &[m, 64]);
    let z = f32_input(&mut g, &mut rng, &mut feeds, "z", &[m, 36]);
    let a = g.op1(Op::Concat(op::Concat { axis: -1 }), &[h, z]);
    let w = weight(&mut g, &mut rng, "w", &[100, 48]);
    let y = g.matmul(a, w);
    g.output(y);
    case_with(
        "node update, B resident",
        &g,
        &feeds,
        ("gemm_wg64_cat_resident_f32", "gemm_tc64_n_f32"),
        resident,
    );
}
