//! The f32 GEMM kernels against the CPU reference: the tensor-core kernel (`gemm_tc_f32`, 3xTF32)
//! and the CUDA-core tiled kernel with its split-K, over random shapes (k not a multiple of the
//! round, m and n not multiples of the tile), batched and broadcast MatMuls, Gemm with transposes,
//! C, alpha and beta, and operands on both load paths (16-byte vectors and strided scalars); and
//! the tensor-core kernel on weights the planner packs and splits (`gemm_tc_packed_f32`, its
//! program twin), against the reference and bit for bit against the unpacked kernel; and each of
//! them with its column tiles split over block pairs (the `_pair` entries, Hopper clusters); and
//! the large-tile kernels (`gemm_tc128_*_f32`, `gemm_tc64_*_f32`) on the shapes that reach them,
//! and their `wgmma` twins on Hopper (`gemm_wg*`, B a weight packed transposed and split).
//!
//! Each result must be within 1e-4 of the reference per element (relative, plus 1e-4 absolute)
//! and, over the whole output, within 2e-6 relative Frobenius error: TF32 alone (the tensor
//! cores without the 3x split) is ~1e-4 off and fails the second bound.

use host::selftest::Rng;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{Gemm, Op};
use planner::{ConstTensor, Graph, ValueId};

use crate::ctx;
use crate::gemm_programs::inputs;

/// A weight with random data in `[-1, 1)`.
pub(crate) fn weight(g: &mut Graph, rng: &mut Rng, name: &str, shape: &[usize]) -> ValueId {
    let t = rng.tensor(shape, -1.0, 1.0);
    g.initializer(name, ConstTensor::from_f32(shape, t.f32s(name).unwrap()).unwrap())
}

/// Runs `g` on the GPU with the tensor-core GEMM on or off and checks it against the reference;
/// the plan must name `kernel` (each of them, when several are given, space-separated).
/// (`wgmma` off: on Hopper the large tiles with a weight B would otherwise run its `gemm_wg_*`
/// twins, which [`wgmma_gemms_match_the_reference`] tests.)
fn check(what: &str, g: &Graph, feeds: &[(String, HostTensor)], tensor_cores: bool, kernel: &str) {
    let options =
        SessionOptions { tensor_core_gemm: tensor_cores, wgmma_gemm: false, ..SessionOptions::default() };
    check_with(what, g, feeds, options, kernel);
}

/// [`check`] with `options`; returns the GPU result.
fn check_with(
    what: &str,
    g: &Graph,
    feeds: &[(String, HostTensor)],
    options: SessionOptions,
    kernel: &str,
) -> Vec<f32> {
    check_within(what, g, feeds, options, kernel, 2e-6)
}

/// [`check_with`] with the bound `frob` on the relative Frobenius error.
pub(crate) fn check_within(
    what: &str,
    g: &Graph,
    feeds: &[(String, HostTensor)],
    options: SessionOptions,
    kernel: &str,
    frob: f64,
) -> Vec<f32> {
    check_bounded(what, g, feeds, options, kernel, (frob, 1e-4))
}

/// [`check_within`] with the per-element bound `elem` (`|gpu - reference| <= elem (|reference| + 1)`)
/// too.
fn check_bounded(
    what: &str,
    g: &Graph,
    feeds: &[(String, HostTensor)],
    options: SessionOptions,
    kernel: &str,
    (frob, elem): (f64, f64),
) -> Vec<f32> {
    let want = host::reference::eval(g, feeds).unwrap();
    let mut s = Session::new(ctx(), g.clone(), options).unwrap();
    let got = s.run(feeds).unwrap();
    let plan = s.last_plan().unwrap().to_string();
    // The tensor-core kernels' `_pair` entries are the same kernel over block pairs.
    for kernel in kernel.split_whitespace() {
        let paired = kernel.replace("_f32", "_pair_f32");
        assert!(plan.contains(kernel) || plan.contains(&paired), "{what}: expected {kernel}:\n{plan}");
    }
    let (gv, wv) = (got[0].1.f32s("gpu").unwrap(), want[0].1.data().to_f64s());
    assert_eq!(gv.len(), wv.len(), "{what}: length");
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (i, (&x, &w)) in gv.iter().zip(&wv).enumerate() {
        let d = x as f64 - w;
        assert!(d.abs() <= elem * (w.abs() + 1.0), "{what}: [{i}] gpu {x} reference {w}\n{plan}");
        diff += d * d;
        norm += w * w;
    }
    let rel = (diff / norm.max(f64::MIN_POSITIVE)).sqrt();
    assert!(rel <= frob, "{what}: relative Frobenius error {rel:e}\n{plan}");
    gv.to_vec()
}

/// Packing on (the default) and off.
fn packing(on: bool) -> SessionOptions {
    SessionOptions { pack_gemm_weights: on, ..SessionOptions::default() }
}

/// A GEMM of `x [m, k]` and a weight B (k x n): a MatMul, or a Gemm (B `[n, k]` with transB) with a
/// weight C `[n]`, alpha and beta; returns the graph and the feeds.
pub(crate) fn weight_gemm(
    rng: &mut Rng,
    (m, k, n): (usize, usize, usize),
    op: usize,
) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, rng, &[("x", &[m, k])]);
    let y = match op {
        0 => {
            let w = weight(&mut g, rng, "w", &[k, n]);
            g.matmul(v[0], w)
        }
        _ => {
            let trans_b = op == 2;
            let w = weight(&mut g, rng, "w", &if trans_b { [n, k] } else { [k, n] });
            let c = weight(&mut g, rng, "c", &[n]);
            let attrs = Gemm { alpha: 1.25, beta: 0.5, trans_a: false, trans_b };
            g.push(Op::Gemm(attrs), &[v[0], w, c], 1)[0]
        }
    };
    g.output(y);
    (g, feeds)
}

/// `sigmoid(x [m, k] · w [k, n] + bias [n] + r [m, n])`, w and bias weights: a GEMM whose epilogue
/// is a program; returns the graph and the feeds.
fn residual_program(rng: &mut Rng, (m, k, n): (usize, usize, usize)) -> (Graph, Vec<(String, HostTensor)>) {
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, rng, &[("x", &[m, k]), ("r", &[m, n])]);
    let w = weight(&mut g, rng, "w", &[k, n]);
    let bias = weight(&mut g, rng, "bias", &[n]);
    let h = g.matmul(v[0], w);
    let a = g.add(h, bias);
    let s = g.add(a, v[1]);
    let y = g.sigmoid(s);
    g.output(y);
    (g, feeds)
}

#[test]
fn packed_weights_on_ragged_shapes() {
    let mut rng = Rng::new(0x9ac4);
    let mut case = 0;
    for k in [1, 7, 32, 45, 256, 1024] {
        for n in [1, 13, 32, 100] {
            // MatMul, Gemm, Gemm with transB in turn; m from 9 to 200.
            let op = case % 3;
            let m = 9 + (rng.next_u64() % 192) as usize;
            case += 1;
            let (g, feeds) = weight_gemm(&mut rng, (m, k, n), op);
            let what = format!("{} {m}x{k}x{n}", ["matmul", "gemm", "gemm transB"][op]);
            check_with(&what, &g, &feeds, packing(true), "gemm_tc_packed_f32");
            check_with(&what, &g, &feeds, packing(false), "gemm_tc_f32");
        }
    }
}

#[test]
fn packed_and_unpacked_weights_give_the_same_bits() {
    // The host splits B as the kernel does (`cvt.rna.tf32.f32`) and the sums run in the same
    // order: the packed kernel's result is the unpacked one's, bit for bit.
    let mut rng = Rng::new(0x51a7);
    for (shape, op) in [((100, 45, 13), 0), ((33, 256, 100), 1), ((200, 1024, 32), 2), ((17, 7, 1), 2)] {
        let (g, feeds) = weight_gemm(&mut rng, shape, op);
        let what = format!("{shape:?} op {op}");
        let packed = check_with(&what, &g, &feeds, packing(true), "gemm_tc_packed_f32");
        let plain = check_with(&what, &g, &feeds, packing(false), "gemm_tc_f32");
        let differ = packed.iter().zip(&plain).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
        assert_eq!(differ, 0, "{what}: {differ} of {} outputs differ in bits", plain.len());
    }
}

#[test]
fn packed_weights_with_an_activation_and_a_residual_program() {
    let mut rng = Rng::new(0x9e1);
    for (m, k, n) in [(40, 45, 13), (128, 256, 100)] {
        // Gemm (transB, C) + Relu: the built-in activation.
        let mut g = Graph::new();
        let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[m, k])]);
        let w = weight(&mut g, &mut rng, "w", &[n, k]);
        let c = weight(&mut g, &mut rng, "c", &[n]);
        let attrs = Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true };
        let h = g.push(Op::Gemm(attrs), &[v[0], w, c], 1)[0];
        let y = g.relu(h);
        g.output(y);
        let what = format!("gemm+relu {m}x{k}x{n}");
        check_with(&what, &g, &feeds, packing(true), "Gemm+Relu gemm_tc_packed_f32");
        check_with(&what, &g, &feeds, packing(false), "Gemm+Relu gemm_tc_f32");
        // MatMul + bias + residual, then a sigmoid: an epilogue program.
        let (g, feeds) = residual_program(&mut rng, (m, k, n));
        let what = format!("matmul+bias+residual+sigmoid {m}x{k}x{n}");
        check_with(&what, &g, &feeds, packing(true), "gemm_tc_packed_program_f32");
        check_with(&what, &g, &feeds, packing(false), "gemm_tc_program_f32");
    }
}

#[test]
fn matmuls_of_random_shapes_on_both_kernels() {
    let mut rng = Rng::new(0x6e77);
    let pick = |rng: &mut Rng, xs: &[usize]| xs[(rng.next_u64() % xs.len() as u64) as usize];
    for case in 0..24 {
        let m = pick(&mut rng, &[9, 16, 17, 24, 33, 100, 128, 200]);
        let k = pick(&mut rng, &[1, 3, 8, 31, 32, 33, 64, 100, 256, 1024]);
        let n = pick(&mut rng, &[1, 5, 8, 32, 33, 64, 100, 256]);
        let batch = if case % 3 == 0 { pick(&mut rng, &[2, 3]) } else { 1 };
        // Every third case a batched A against a shared B (broadcast), every sixth a batched B too.
        let a_shape = if batch > 1 { vec![batch, m, k] } else { vec![m, k] };
        let b_shape = if batch > 1 && case % 2 == 0 { vec![batch, k, n] } else { vec![k, n] };
        let mut g = Graph::new();
        let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &a_shape), ("b", &b_shape)]);
        let y = g.matmul(v[0], v[1]);
        g.output(y);
        let what = format!("matmul batch {batch} {m}x{k}x{n}");
        check(&what, &g, &feeds, true, "gemm_tc_f32");
        check(&what, &g, &feeds, false, "gemm_f32");
    }
}

#[test]
fn gemm_transposes_c_alpha_beta_on_both_load_paths() {
    let mut rng = Rng::new(0x7c3);
    // k a multiple of 4 (16-byte rows: vector loads) and not (strided scalar loads), each with A
    // and B in both orientations: transA makes A k-strided, transB makes B k-contiguous.
    for (m, k, n) in [(40, 64, 48), (40, 63, 48), (130, 256, 96), (19, 1027, 33)] {
        for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
            let a_shape = if trans_a { vec![k, m] } else { vec![m, k] };
            let b_shape = if trans_b { vec![n, k] } else { vec![k, n] };
            let mut g = Graph::new();
            let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &a_shape), ("b", &b_shape), ("c", &[m, 1])]);
            let attrs = Gemm { alpha: 0.75, beta: -1.5, trans_a, trans_b };
            let y = g.push(Op::Gemm(attrs), &[v[0], v[1], v[2]], 1)[0];
            g.output(y);
            let what = format!("gemm {m}x{k}x{n} transA {trans_a} transB {trans_b}");
            check(&what, &g, &feeds, true, "gemm_tc_f32");
            check(&what, &g, &feeds, false, "gemm_f32");
        }
    }
}

#[test]
fn a_layer_norm_folded_into_the_gemm_matches_the_reference() {
    // Gemm(LayerNorm(x, scale, bias?), w, c) with constant scale, bias, w, c: the LayerNorm runs
    // in gemm_tc_packed_norm_f32's A loads (ragged k and rows, with and without bias), and the
    // unfolded plan (LayerNorm launch, then the packed GEMM) agrees.
    let mut rng = Rng::new(0x1a7e);
    for (m, k, n, with_bias) in
        [(128, 256, 96, true), (37, 263, 40, false), (200, 256, 33, true), (17, 1000, 64, true)]
    {
        let mut g = Graph::new();
        let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[m, k])]);
        let mut constant = |g: &mut Graph, name: &str, dims: &[usize]| {
            let data: Vec<f32> =
                (0..dims.iter().product::<usize>()).map(|_| rng.uniform(-1.0, 1.0)).collect();
            g.initializer(name, planner::ConstTensor::from_f32(dims, &data).unwrap())
        };
        let scale = constant(&mut g, "scale", &[k]);
        let mut ln_in = vec![v[0], scale];
        if with_bias {
            ln_in.push(constant(&mut g, "bias", &[k]));
        }
        let attrs = planner::op::LayerNormalization { epsilon: 1e-3, ..Default::default() };
        let h = g.op1(Op::LayerNormalization(attrs), &ln_in);
        let (w, c) = (constant(&mut g, "w", &[k, n]), constant(&mut g, "c", &[n]));
        let y = g.push(Op::Gemm(Gemm::default()), &[h, w, c], 1)[0];
        g.output(y);
        let what = format!("layer norm + gemm {m}x{k}x{n} bias {with_bias}");
        check(&what, &g, &feeds, true, "LayerNorm+Gemm gemm_tc_packed_norm_f32");
        let unfolded = SessionOptions { fuse_layer_norm_gemm: false, ..SessionOptions::default() };
        check_with(&what, &g, &feeds, unfolded, "layer_norm_f32");
    }
}

#[test]
fn column_tiles_split_over_block_pairs_match_the_reference() {
    // Few tiles and long k: every tensor-core entry runs as its `_pair` twin (a cluster of two
    // blocks per tile on Hopper), and agrees with the reference, pairs on or off.
    let mut rng = Rng::new(0x9a1e);
    let hopper = ctx().flavour() == host::PtxFlavour::Hopper;
    let pairs = |on: bool, packed: bool| SessionOptions {
        pair_gemm: on,
        pack_gemm_weights: packed,
        ..SessionOptions::default()
    };
    // GPT-2's MLP down-projection with its residual (a program epilogue), packed and not.
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[128, 1024]), ("r", &[128, 256])]);
    let w = weight(&mut g, &mut rng, "w", &[1024, 256]);
    let h = g.matmul(v[0], w);
    let y = g.add(h, v[1]);
    g.output(y);
    let mut cases = vec![(
        "mlp down + residual",
        g,
        feeds,
        ["gemm_tc_packed_program_pair_f32", "gemm_tc_program_pair_f32"],
    )];
    // A plain MatMul of a weight over 13 row tiles of one column tile, k 1024 + 7 (a ragged last round).
    let (g, feeds) = weight_gemm(&mut rng, (200, 1031, 32), 0);
    cases.push(("matmul 200x1031x32", g, feeds, ["gemm_tc_packed_pair_f32", "gemm_tc_pair_f32"]));
    for (what, g, feeds, [packed, plain]) in cases {
        for (on, packing) in [(true, true), (true, false), (false, true)] {
            let paired = if packing { packed } else { plain };
            let kernel = if on && hopper { paired.to_string() } else { paired.replace("_pair", "") };
            let got = check_with(what, &g, &feeds, pairs(on, packing), &kernel);
            let mut s = Session::new(ctx(), g.clone(), pairs(on, packing)).unwrap();
            s.run(&feeds).unwrap();
            let plan = s.last_plan().unwrap().to_string();
            assert_eq!(plan.contains("_pair_f32"), on && hopper, "{what}:\n{plan}");
            assert!(got.iter().all(|x| x.is_finite()), "{what}");
        }
    }
    // The LayerNorm-folded entry: a few rows, k 1000.
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("x", &[17, 1000])]);
    let scale = weight(&mut g, &mut rng, "scale", &[1000]);
    let h = g.op1(Op::LayerNormalization(Default::default()), &[v[0], scale]);
    let w = weight(&mut g, &mut rng, "w", &[1000, 64]);
    let y = g.matmul(h, w);
    g.output(y);
    let kernel = if hopper { "gemm_tc_packed_norm_pair_f32" } else { "gemm_tc_packed_norm_f32" };
    check_with("layer norm + matmul 17x1000x64", &g, &feeds, pairs(true, true), kernel);
}

#[test]
fn tile_gemms_split_over_k_match_the_reference() {
    // Shapes whose 64 x 64 tiles number fewer than two per multiprocessor with a long k: the tile
    // kernels sum chunks of k into a workspace and the reduction launch finishes (C, alpha, beta,
    // the epilogue program). 1030 x 260 is 85 tiles: four chunks of 256 over k 1004 (the last
    // ragged), B n- and k-contiguous, and a residual program; then a batch of two (grid z the
    // batch times the splits).
    let mut rng = Rng::new(0x5b17);
    for op in [0, 2] {
        let (g, feeds) = weight_gemm(&mut rng, (1030, 1004, 260), op);
        let b = if op == 0 { "n" } else { "k" };
        let what = format!("{} 1030x1004x260", ["matmul", "gemm", "gemm transB"][op]);
        check(&what, &g, &feeds, true, &format!("gemm_tc64_{b}_f32 gemm_reduce_f32"));
    }
    let (g, feeds) = residual_program(&mut rng, (1030, 1004, 260));
    let what = "matmul+bias+residual+sigmoid 1030x1004x260";
    check(what, &g, &feeds, true, "gemm_tc64_n_f32 gemm_reduce_program_f32");
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &[2, 700, 600]), ("b", &[2, 600, 260])]);
    let y = g.matmul(v[0], v[1]);
    g.output(y);
    check("matmul batched 2x700x600x260", &g, &feeds, true, "gemm_tc64_n_f32 gemm_reduce_f32");
}

#[test]
fn large_gemms_on_the_tile_kernels_match_the_reference() {
    // Shapes whose CUDA-core tiles fill the device twice over run on the large-tile tensor-core
    // kernels: 64 x 64 tiles (about 290 blocks) and 128 x 128 ones (about 150), m, n and k no
    // multiple of any tile or stage (n a multiple of 4: 16-byte rows of B), B n-contiguous (MatMul) and k-contiguous (Gemm transB, with
    // C, alpha and beta), a batched MatMul against a shared B, and an epilogue program.
    let mut rng = Rng::new(0x7113);
    for ((m, k, n), tile) in [((1030, 44, 1028), "64"), ((2050, 76, 1036), "128")] {
        for op in [0, 2] {
            let (g, feeds) = weight_gemm(&mut rng, (m, k, n), op);
            let b = if op == 0 { "n" } else { "k" };
            let what = format!("{} {m}x{k}x{n}", ["matmul", "gemm", "gemm transB"][op]);
            check(&what, &g, &feeds, true, &format!("gemm_tc{tile}_{b}_f32"));
        }
        // MatMul + bias + residual, then a sigmoid: an epilogue program.
        let (g, feeds) = residual_program(&mut rng, (m, k, n));
        check(
            &format!("matmul+bias+residual+sigmoid {m}x{k}x{n}"),
            &g,
            &feeds,
            true,
            &format!("gemm_tc{tile}_n_f32"),
        );
    }
    // A batch of 3 against one B (b_bs = 0), both batched, and a Gemm with transA (A k-strided: the CUDA-core
    // kernel, not the tile kernels).
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &[3, 700, 36]), ("b", &[36, 520])]);
    let y = g.matmul(v[0], v[1]);
    g.output(y);
    check("matmul batch 3 700x36x520", &g, &feeds, true, "gemm_tc64_n_f32");
    // Both operands batched (b_bs != 0): one launch, grid z the batch.
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &[3, 700, 36]), ("b", &[3, 36, 520])]);
    let y = g.matmul(v[0], v[1]);
    g.output(y);
    check("matmul batched a and b 3x700x36x520", &g, &feeds, true, "gemm_tc64_n_f32");
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &[64, 1030]), ("b", &[64, 1030])]);
    let attrs = Gemm { alpha: 1.0, beta: 0.0, trans_a: true, trans_b: false };
    let y = g.push(Op::Gemm(attrs), &[v[0], v[1]], 1)[0];
    g.output(y);
    check("gemm transA 1030x64x1030", &g, &feeds, true, "gemm_f32");
}

/// Checks `g` against the reference with `wgmma` on (the default: `wg` on Hopper) and off (the
/// `mma.sync` tile `mma`, everywhere), and that both give the same bits: the same products
/// (3xTF32, small terms first) in the same k order on the same tensor cores.
fn wgmma_case(what: &str, g: &Graph, feeds: &[(String, HostTensor)], kernels: (&str, &str), frob: f64) {
    wgmma_case_with(what, g, feeds, kernels, frob, SessionOptions::default());
}

/// [`wgmma_case`] with the session options `on` (the `mma.sync` run: the same, wgmma off).
fn wgmma_case_with(
    what: &str,
    g: &Graph,
    feeds: &[(String, HostTensor)],
    (wg, mma): (&str, &str),
    frob: f64,
    on: SessionOptions,
) {
    let hopper = ctx().flavour() == host::PtxFlavour::Hopper;
    let off = SessionOptions { wgmma_gemm: false, ..on };
    let on = check_within(what, g, feeds, on, if hopper { wg } else { mma }, frob);
    let off = check_within(what, g, feeds, off, mma, frob);
    let same = on.iter().zip(&off).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "{what}: wgmma and mma.sync differ");
}

/// The (Frobenius, element) bounds of an unsplit wgmma GEMM over `k`: one f32 sum over all of k
/// per output, whose rounding grows as sqrt(k). Measured on the H200 at k 1004 (operands in
/// [-0.5, 0.5]): 1.1e-4 at the worst element, 7.1e-6 relative Frobenius, against the 256-long
/// split chunks' 1e-4 / 4e-6 bounds; these are those bounds scaled by sqrt(k / 256), the
/// Frobenius one with a factor 2 of margin (a lost k tile or a stale stage errs by 1e-2 and more).
fn unsplit_bounds(k: usize) -> (f64, f64) {
    let chains = (k as f64 / 256.0).sqrt().max(1.0);
    (8e-6 * chains, 1e-4 * chains)
}

#[test]
fn wgmma_gemms_match_the_reference() {
    // On Hopper a large-tile GEMM whose B is a weight runs `gemm_wg128_f32` / `gemm_wg64_f32` on
    // the weight packed transposed and split (elsewhere the `mma.sync` tiles, the same shapes):
    // m, n and k no multiple of any tile or stage, B n-contiguous (MatMul) and k-contiguous (Gemm
    // transB, with C, alpha and beta), an epilogue program, split-K (GPT-2's down-projection at
    // batch 16 and a ragged k), a batch against one weight, each bit for bit as the `mma.sync`
    // tiles; and the TF32 entries (checked against the reference at TF32's error).
    let hopper = ctx().flavour() == host::PtxFlavour::Hopper;
    let mut rng = Rng::new(0x36a7);
    for ((m, k, n), tile) in [((1030, 44, 1028), "64"), ((2050, 76, 1036), "128"), ((4100, 260, 500), "128")]
    {
        let wg = format!("gemm_wg{tile}_f32");
        for op in [0, 1, 2] {
            let (g, feeds) = weight_gemm(&mut rng, (m, k, n), op);
            let b = if op == 2 { "k" } else { "n" };
            let what = format!("{} {m}x{k}x{n}", ["matmul", "gemm", "gemm transB"][op]);
            wgmma_case(&what, &g, &feeds, (&wg, &format!("gemm_tc{tile}_{b}_f32")), 2e-6);
        }
        let (g, feeds) = residual_program(&mut rng, (m, k, n));
        let what = format!("matmul+bias+residual+sigmoid {m}x{k}x{n}");
        wgmma_case(&what, &g, &feeds, (&wg, &format!("gemm_tc{tile}_n_f32")), 2e-6);
    }
    // n no multiple of 4 (B k-contiguous: Gemm transB): the epilogue's last four-column group of
    // a row is partly outside n.
    for (m, k, n) in [(2050, 76, 1027), (1030, 44, 1029)] {
        let (g, feeds) = weight_gemm(&mut rng, (m, k, n), 2);
        let tile = if m > 2000 { "128" } else { "64" };
        let what = format!("gemm transB {m}x{k}x{n}");
        wgmma_case(&what, &g, &feeds, (&format!("gemm_wg{tile}_f32"), &format!("gemm_tc{tile}_k_f32")), 2e-6);
    }
    // Split over k (asked for: `split_k_wgmma`): four chunks of 256 over k 1004 (the last ragged),
    // then GPT-2's 2048 x 1024 x 256 (three chunks), plain and with a program. (At k 1024 the f32
    // sums of the reference and of the GPU each carry ~1e-6 of rounding: the Frobenius bound
    // doubles.) By default the same GEMMs run unsplit on wgmma, one launch each: one f32 sum
    // over all of k per output, whose rounding grows as the square root of k (`unsplit_bounds`).
    let split = SessionOptions { split_k_wgmma: true, ..SessionOptions::default() };
    for (m, k, n) in [(1030, 1004, 260), (2048, 1024, 256)] {
        let (g, feeds) = weight_gemm(&mut rng, (m, k, n), 0);
        let what = format!("matmul split-k {m}x{k}x{n}");
        let kernels = ("gemm_wg64_f32 gemm_reduce_f32", "gemm_tc64_n_f32 gemm_reduce_f32");
        wgmma_case_with(&what, &g, &feeds, kernels, 4e-6, split);
        if hopper {
            let bounds = unsplit_bounds(k);
            let unsplit =
                check_bounded(&what, &g, &feeds, SessionOptions::default(), "gemm_wg64_f32", bounds);
            let mut s = Session::new(ctx(), g.clone(), SessionOptions::default()).unwrap();
            assert_eq!(s.run(&feeds).unwrap()[0].1.f32s("gpu").unwrap(), unsplit, "{what}: rerun");
            let plan = s.last_plan().unwrap().to_string();
            assert!(!plan.contains("gemm_reduce"), "{what}: the wgmma GEMM runs unsplit\n{plan}");
        }
        let (g, feeds) = residual_program(&mut rng, (m, k, n));
        let what = format!("matmul+program split-k {m}x{k}x{n}");
        let kernels = ("gemm_wg64_f32 gemm_reduce_program_f32", "gemm_tc64_n_f32 gemm_reduce_program_f32");
        wgmma_case_with(&what, &g, &feeds, kernels, 4e-6, split);
        if hopper {
            let bounds = unsplit_bounds(k);
            check_bounded(&what, &g, &feeds, SessionOptions::default(), "gemm_wg64_f32", bounds);
        }
    }
    // A batch of 3 against one weight (b_bs = 0).
    let mut g = Graph::new();
    let (v, feeds) = inputs(&mut g, &mut rng, &[("a", &[3, 700, 36])]);
    let w = weight(&mut g, &mut rng, "w", &[36, 520]);
    let y = g.matmul(v[0], w);
    g.output(y);
    wgmma_case("matmul batch 3 700x36x520", &g, &feeds, ("gemm_wg64_f32", "gemm_tc64_n_f32"), 2e-6);
    // TF32: one product on operands rounded to TF32, within TF32's error of the reference.
    let tf32 = SessionOptions { precision: host::Precision::Tf32, ..SessionOptions::default() };
    for ((m, k, n), tile) in [((1030, 44, 1028), "64"), ((2050, 260, 1036), "128")] {
        let (g, feeds) = weight_gemm(&mut rng, (m, k, n), 0);
        let want = host::reference::eval(&g, &feeds).unwrap();
        let mut s = Session::new(ctx(), g.clone(), tf32).unwrap();
        let got = s.run(&feeds).unwrap();
        let plan = s.last_plan().unwrap().to_string();
        let kernel = if hopper { format!("gemm_wg{tile}_tf32") } else { format!("gemm_tc{tile}_n_tf32") };
        assert!(plan.contains(&kernel), "tf32 {m}x{k}x{n}: expected {kernel}:\n{plan}");
        let (gv, wv) = (got[0].1.f32s("gpu").unwrap(), want[0].1.data().to_f64s());
        let (mut diff, mut norm) = (0.0f64, 0.0f64);
        for (x, w) in gv.iter().zip(&wv) {
            diff += (*x as f64 - w).powi(2);
            norm += w * w;
        }
        let rel = (diff / norm).sqrt();
        // TF32 rounds each operand to 11 significant bits: about 2^-11 per product, averaging
        // down over k; far above 3xTF32's 2e-6 and far below a wrong result's ~1.
        assert!(rel < 2e-3 && rel > 1e-7, "tf32 {m}x{k}x{n}: relative Frobenius error {rel:e}\n{plan}");
    }
}
