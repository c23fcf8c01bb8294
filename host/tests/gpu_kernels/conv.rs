//! The convolution-family kernels through `Session` against the CPU reference: Conv 1-D to 3-D
//! (grouped, depthwise, strided, dilated, padded, every `auto_pad`, with and without bias and a
//! fused Relu) on the `wgmma` implicit GEMM of Hopper (tile edges at 64 and 128 positions and
//! channels, depths around its k step of 32; TF32 too), the portable implicit GEMM (tile edges:
//! output channels per group and output columns around 64, GEMM depths around the k step of 16)
//! and the direct path; ConvTranspose
//! (strides, dilations, pads, output_padding, output_shape, groups); MaxPool and its Indices
//! (exactly, with ties, both storage orders) and AveragePool (`ceil_mode`, `count_include_pad`, dilations, `auto_pad`).
//! Floating-point results must agree within `1e-5 · (|want| + 1)`; weights are scaled by
//! `1 / sqrt(fan-in)` so outputs stay near 1.

use host::selftest::Rng;
use host::tensor::TensorData;
use host::{HostTensor, Session, SessionOptions};
use planner::op::{self, AutoPad, Op};
use planner::{ConstTensor, DType, Dim, Graph, ValueId};

use crate::ctx;

fn known(shape: &[usize]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Known(d)).collect()
}

/// Equal names, shapes and dtypes; values equal (`exact`) or within `1e-5 · (|want| + 1)`.
fn assert_matches(what: &str, exact: bool, got: &[(String, HostTensor)], want: &[(String, HostTensor)]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gn, g), (wn, w)) in got.iter().zip(want) {
        assert_eq!((gn, g.shape(), g.dtype()), (wn, w.shape(), w.dtype()), "{what}");
        if let (TensorData::I64(gv), TensorData::I64(wv)) = (g.data(), w.data()) {
            for (i, (a, b)) in gv.iter().zip(wv).enumerate() {
                assert_eq!(a, b, "{what}: {gn}[{i}]: gpu {a}, reference {b}");
            }
            continue;
        }
        let (TensorData::F32(gv), TensorData::F32(wv)) = (g.data(), w.data()) else {
            panic!("{what}: not f32 or i64")
        };
        for (i, (&a, &b)) in gv.iter().zip(wv).enumerate() {
            let (a, b) = (a as f64, b as f64);
            let ok = if exact || b.is_infinite() { a == b } else { (a - b).abs() <= 1e-5 * (b.abs() + 1.0) };
            assert!(ok, "{what}: {gn}[{i}]: gpu {a}, reference {b}");
        }
    }
}

/// Runs `g` on input `x` on the GPU and on the reference; returns the plan's text.
fn check(what: &str, exact: bool, g: Graph, x: HostTensor) -> String {
    check_with(what, exact, g, x, SessionOptions::default())
}

/// [`check`] with session options `o`.
fn check_with(what: &str, exact: bool, g: Graph, x: HostTensor, o: SessionOptions) -> String {
    let inputs = vec![("x".to_owned(), x)];
    let want = host::reference::eval(&g, &inputs).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    let mut s = Session::new(ctx(), g, o).unwrap();
    let got = s.run(&inputs).unwrap_or_else(|e| panic!("{what}: gpu: {e}"));
    assert_matches(what, exact, &got, &want);
    s.last_plan().unwrap().to_string()
}

/// Whether the device runs the Hopper flavour (the `wgmma` kernels).
fn hopper() -> bool {
    ctx().flavour() == host::PtxFlavour::Hopper
}

fn weight(g: &mut Graph, rng: &mut Rng, name: &str, dims: &[usize], scale: f32) -> ValueId {
    let data: Vec<f32> = (0..dims.iter().product()).map(|_| rng.uniform(-scale, scale)).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).unwrap())
}

fn int(rng: &mut Rng, lo: usize, hi: usize) -> usize {
    lo + (rng.next_u64() % (hi - lo + 1) as u64) as usize
}

/// True with probability `1 / n`.
fn one_in(rng: &mut Rng, n: u64) -> bool {
    rng.next_u64().is_multiple_of(n)
}

fn pick<T: Copy>(rng: &mut Rng, from: &[T]) -> T {
    from[(rng.next_u64() % from.len() as u64) as usize]
}

/// One Conv problem.
#[derive(Debug, Clone)]
struct ConvCase {
    batch: usize,
    group: usize,
    /// Input channels per group.
    cg: usize,
    /// Output channels per group.
    mg: usize,
    spatial: Vec<usize>,
    kernel: Vec<usize>,
    attrs: op::Conv,
    bias: bool,
    relu: bool,
}

impl ConvCase {
    /// A random case with `nd` spatial dims and `mg` output channels per group.
    fn random(rng: &mut Rng, nd: usize, mg: usize) -> ConvCase {
        let group = pick(rng, &[1, 1, 2, 3]);
        let kernel: Vec<usize> = (0..nd).map(|_| int(rng, 1, if nd == 3 { 3 } else { 5 })).collect();
        let dilations: Vec<usize> = (0..nd).map(|_| int(rng, 1, 2)).collect();
        let strides: Vec<usize> = (0..nd).map(|_| int(rng, 1, 3)).collect();
        let pads: Vec<usize> = (0..2 * nd).map(|i| int(rng, 0, kernel[i % nd] - 1)).collect();
        let max_extra = [40, 12, 4][nd - 1];
        let spatial: Vec<usize> =
            (0..nd).map(|a| (kernel[a] - 1) * dilations[a] + 1 + int(rng, 0, max_extra)).collect();
        let auto_pad = pick(
            rng,
            &[AutoPad::NotSet, AutoPad::NotSet, AutoPad::SameUpper, AutoPad::SameLower, AutoPad::Valid],
        );
        // ONNX: explicit pads only without auto_pad.
        let pads = if auto_pad == AutoPad::NotSet { pads } else { vec![] };
        let attrs = op::Conv { auto_pad, dilations, group, kernel_shape: vec![], pads, strides };
        ConvCase {
            batch: int(rng, 1, 2),
            group,
            cg: int(rng, 1, 6),
            mg,
            spatial,
            kernel,
            attrs,
            bias: !one_in(rng, 3),
            relu: one_in(rng, 3),
        }
    }

    fn x_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.cg * self.group];
        s.extend(&self.spatial);
        s
    }

    fn graph(&self, rng: &mut Rng) -> Graph {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&self.x_shape()));
        let maps = self.mg * self.group;
        let mut w_dims = vec![maps, self.cg];
        w_dims.extend(&self.kernel);
        let fan_in = (self.cg * self.kernel.iter().product::<usize>()) as f32;
        let w = weight(&mut g, rng, "w", &w_dims, 1.0 / fan_in.sqrt());
        let mut ins = vec![x, w];
        if self.bias {
            ins.push(weight(&mut g, rng, "b", &[maps], 1.0));
        }
        let mut y = g.op1(Op::Conv(self.attrs.clone()), &ins);
        if self.relu {
            y = g.relu(y);
        }
        g.output(y);
        g
    }

    /// Runs the case; `gemm` says which kernel the plan must use (the `mma.sync`-free implicit
    /// GEMM: the `wgmma` one is switched off).
    fn run(&self, rng: &mut Rng, gemm: bool) {
        let symbol = if gemm { "conv_gemm_f32" } else { "conv_direct_f32" };
        self.run_on(rng, symbol, SessionOptions { wgmma_gemm: false, ..SessionOptions::default() });
    }

    /// Runs the case with options `o`; the plan must use kernel `symbol`. Within `1e-5 (|want| +
    /// 1)` of the reference, as every precision's products are f32-accurate but TF32's.
    fn run_on(&self, rng: &mut Rng, symbol: &str, o: SessionOptions) {
        let what = format!("{self:?}");
        let x = rng.tensor(&self.x_shape(), -1.0, 1.0);
        let plan = check_with(&what, false, self.graph(rng), x, o);
        assert!(plan.contains(symbol), "{what}:\n{plan}");
        if self.relu {
            assert!(plan.contains("Conv+Relu"), "{what}: the Relu is fused:\n{plan}");
        }
    }
}

#[test]
fn conv_direct_matches_the_reference() {
    let mut rng = Rng::new(0xc0d1);
    for case in 0..60 {
        let nd = 1 + case % 3;
        let mg = pick(&mut rng, &[1, 2, 5, 16, 31]);
        ConvCase::random(&mut rng, nd, mg).run(&mut rng, false);
    }
    // Depthwise 2-D, 3x3, stride 2, SAME_UPPER (MobileNet style).
    let mut c = ConvCase::random(&mut rng, 2, 1);
    (c.group, c.cg, c.spatial, c.kernel) = (32, 1, vec![17, 17], vec![3, 3]);
    c.attrs =
        op::Conv { auto_pad: AutoPad::SameUpper, group: 32, strides: vec![2, 2], ..op::Conv::default() };
    c.run(&mut rng, false);
    // More outputs (640 000 an image) than the capped grid has threads: the grid-stride loop.
    (c.group, c.cg, c.spatial, c.bias) = (64, 1, vec![100, 100], true);
    c.attrs = op::Conv { pads: vec![1; 4], group: 64, ..op::Conv::default() };
    c.run(&mut rng, false);
}

#[test]
fn conv_implicit_gemm_matches_the_reference() {
    let mut rng = Rng::new(0x6e33);
    for case in 0..40 {
        let nd = 1 + case % 3;
        let mg = pick(&mut rng, &[32, 33, 63, 64, 65, 100, 128]);
        ConvCase::random(&mut rng, nd, mg).run(&mut rng, true);
    }
    // Tile edges: output columns N·O of 63, 64, 65 and 129; GEMM depths C·taps of 15, 16, 17, 1.
    for (batch, cg, len, k) in
        [(1, 15, 63, 1), (1, 16, 64, 1), (1, 17, 65, 1), (3, 1, 43, 1), (2, 4, 66, 2), (1, 1, 8, 1)]
    {
        let mut c = ConvCase::random(&mut rng, 1, 64);
        (c.batch, c.group, c.cg, c.spatial, c.kernel) = (batch, 1, cg, vec![len], vec![k]);
        c.attrs = op::Conv::default();
        c.run(&mut rng, true);
    }
    // A ResNet-style 3x3 layer, 64 -> 64 channels, pad 1, with bias and Relu.
    let mut c = ConvCase::random(&mut rng, 2, 64);
    (c.batch, c.group, c.cg, c.spatial, c.kernel, c.bias, c.relu) =
        (2, 1, 64, vec![14, 14], vec![3, 3], true, true);
    c.attrs = op::Conv { pads: vec![1; 4], ..op::Conv::default() };
    c.run(&mut rng, true);
}

#[test]
fn conv_on_the_wgmma_tensor_cores_matches_the_reference() {
    // Elsewhere than on Hopper the same problems run the portable implicit GEMM.
    let wg = if hopper() { "conv_wg" } else { "conv_gemm_f32" };
    let mut rng = Rng::new(0x3a7c);
    // Random 1-D to 3-D problems: strides, dilations, pads, groups of 16 to 130 output channels.
    for case in 0..30 {
        let nd = 1 + case % 3;
        let mg = pick(&mut rng, &[16, 17, 63, 64, 65, 100, 130]);
        ConvCase::random(&mut rng, nd, mg).run_on(&mut rng, wg, SessionOptions::default());
    }
    // Tile edges: output positions 63, 64, 65, 129 and 128 x 128 tiles; depths 1, 31, 32, 33, 97.
    for (batch, cg, len, k, mg) in
        [(1, 1, 63, 1, 64), (1, 31, 64, 1, 64), (1, 32, 65, 1, 65), (3, 11, 43, 3, 128), (2, 97, 129, 1, 127)]
    {
        let mut c = ConvCase::random(&mut rng, 1, mg);
        (c.batch, c.group, c.cg, c.spatial, c.kernel) = (batch, 1, cg, vec![len], vec![k]);
        c.attrs = op::Conv::default();
        c.run_on(&mut rng, wg, SessionOptions::default());
    }
    // The users' CNN layers: 3 -> 32 and 64 -> 128 channels, 3x3, pad 1, batch 4 (128 x 128
    // tiles fill the device), Relu and bias; and a strided 7x7 stem (ResNet's).
    for (cg, mg, side, k, stride, pad) in [(3, 32, 64, 3, 1, 1), (64, 128, 16, 3, 1, 1), (3, 64, 45, 7, 2, 3)]
    {
        let mut c = ConvCase::random(&mut rng, 2, mg);
        (c.batch, c.group, c.cg, c.spatial, c.kernel, c.bias, c.relu) =
            (4, 1, cg, vec![side, side], vec![k, k], true, true);
        c.attrs = op::Conv { pads: vec![pad; 4], strides: vec![stride; 2], ..op::Conv::default() };
        c.run_on(&mut rng, wg, SessionOptions::default());
    }
    // Too few tiles for the device: split over k (2 and 4 splits) and reduced with the bias, the
    // Relu and groups (the CNN's last layers at batch 1).
    for (batch, group, cg, mg, side, bias) in [(1, 2, 64, 64, 5, false), (1, 1, 128, 128, 16, true)] {
        let mut c = ConvCase::random(&mut rng, 2, mg);
        (c.batch, c.group, c.cg, c.spatial, c.kernel, c.bias, c.relu) =
            (batch, group, cg, vec![side, side], vec![3, 3], bias, true);
        c.attrs = op::Conv { pads: vec![1; 4], group, ..op::Conv::default() };
        c.run_on(&mut rng, if hopper() { "split-k reduce" } else { wg }, SessionOptions::default());
    }
    if !hopper() {
        return;
    }
    // TF32: rounded operands, within TF32's error of the reference.
    let mut c = ConvCase::random(&mut rng, 2, 64);
    (c.batch, c.group, c.cg, c.spatial, c.kernel) = (2, 1, 16, vec![20, 20], vec![3, 3]);
    c.attrs = op::Conv { pads: vec![1; 4], ..op::Conv::default() };
    let x = rng.tensor(&c.x_shape(), -1.0, 1.0);
    let g = c.graph(&mut rng);
    let inputs = vec![("x".to_owned(), x)];
    let want = host::reference::eval(&g, &inputs).unwrap();
    let o = SessionOptions { precision: host::Precision::Tf32, ..SessionOptions::default() };
    let mut s = Session::new(ctx(), g, o).unwrap();
    let got = s.run(&inputs).unwrap();
    let plan = s.last_plan().unwrap().to_string();
    assert!(plan.contains("conv_wg64_tf32"), "{plan}");
    let (TensorData::F32(gv), TensorData::F32(wv)) = (got[0].1.data(), want[0].1.data()) else {
        panic!("not f32")
    };
    let err = gv.iter().zip(wv).map(|(a, b)| ((a - b) as f64).powi(2)).sum::<f64>().sqrt();
    let norm = wv.iter().map(|b| (*b as f64).powi(2)).sum::<f64>().sqrt();
    assert!(err <= 1e-3 * norm, "tf32: relative error {}", err / norm);
    assert!(err > 0.0, "tf32 rounds: the result cannot be exact");
}

/// One ConvTranspose problem.
fn conv_transpose_case(rng: &mut Rng, nd: usize) -> (Graph, Vec<usize>, String) {
    let group = pick(rng, &[1, 1, 2]);
    let (cg, mg, batch) = (int(rng, 1, 4), int(rng, 1, 4), int(rng, 1, 2));
    let kernel: Vec<usize> = (0..nd).map(|_| int(rng, 1, 4)).collect();
    let strides: Vec<usize> = (0..nd).map(|_| int(rng, 1, 3)).collect();
    let dilations: Vec<usize> = (0..nd).map(|_| int(rng, 1, 2)).collect();
    // output_padding must stay below the stride or the dilation.
    let output_padding: Vec<usize> = (0..nd).map(|a| int(rng, 0, strides[a].max(dilations[a]) - 1)).collect();
    let spatial: Vec<usize> = (0..nd).map(|_| int(rng, 1, [20, 7, 4][nd - 1])).collect();
    // Pads that leave at least one output position of the natural size.
    let natural: Vec<usize> = (0..nd)
        .map(|a| strides[a] * (spatial[a] - 1) + output_padding[a] + (kernel[a] - 1) * dilations[a] + 1)
        .collect();
    let mut pads = vec![0; 2 * nd];
    for a in 0..nd {
        pads[a] = int(rng, 0, (kernel[a] - 1).min(natural[a] - 1));
        pads[nd + a] = int(rng, 0, (kernel[a] - 1).min(natural[a] - 1 - pads[a]));
    }
    let mut attrs =
        op::ConvTranspose { dilations, group, pads, strides, output_padding, ..op::ConvTranspose::default() };
    match rng.next_u64() % 4 {
        0 => {
            // A requested output a little larger or smaller than the natural one.
            attrs.output_shape = (0..nd)
                .map(|a| {
                    let natural =
                        attrs.strides[a] * (spatial[a] - 1) + (kernel[a] - 1) * attrs.dilations[a] + 1;
                    natural + int(rng, 0, 2)
                })
                .collect();
            attrs.pads.clear();
        }
        1 => {
            attrs.auto_pad = pick(rng, &[AutoPad::SameUpper, AutoPad::SameLower]);
            attrs.pads.clear();
            attrs.output_padding.clear();
        }
        _ => {}
    }
    let mut g = Graph::new();
    let mut x_shape = vec![batch, cg * group];
    x_shape.extend(&spatial);
    let x = g.input("x", DType::F32, known(&x_shape));
    let mut w_dims = vec![cg * group, mg];
    w_dims.extend(&kernel);
    let w = weight(&mut g, rng, "w", &w_dims, 0.5);
    let mut ins = vec![x, w];
    if one_in(rng, 2) {
        ins.push(weight(&mut g, rng, "b", &[mg * group], 1.0));
    }
    let y = g.op1(Op::ConvTranspose(attrs.clone()), &ins);
    g.output(y);
    (g, x_shape, format!("ConvTranspose {attrs:?} X {w_dims:?}"))
}

#[test]
fn conv_transpose_matches_the_reference() {
    let mut rng = Rng::new(0x7c0f);
    for case in 0..45 {
        let (g, x_shape, what) = conv_transpose_case(&mut rng, 1 + case % 3);
        let x = rng.tensor(&x_shape, -1.0, 1.0);
        let plan = check(&format!("case {case}: {what}"), false, g, x);
        assert!(plan.contains("conv_transpose_f32"), "{plan}");
    }
}

/// A random pooling problem with `nd` spatial dims: (X shape, kernel, strides, dilations, pads,
/// auto_pad, ceil_mode).
type PoolCase = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>, AutoPad, bool);

fn pool_case(rng: &mut Rng, nd: usize) -> PoolCase {
    let kernel: Vec<usize> = (0..nd).map(|_| int(rng, 1, 4)).collect();
    let strides: Vec<usize> = (0..nd).map(|_| int(rng, 1, 3)).collect();
    let dilations: Vec<usize> = (0..nd).map(|_| int(rng, 1, 2)).collect();
    let pads: Vec<usize> = (0..2 * nd).map(|i| int(rng, 0, kernel[i % nd] - 1)).collect();
    let extra = [40, 12, 5][nd - 1];
    let mut x = vec![int(rng, 1, 2), int(rng, 1, 5)];
    x.extend((0..nd).map(|a| (kernel[a] - 1) * dilations[a] + 1 + int(rng, 0, extra)));
    let auto_pad = pick(
        rng,
        &[
            AutoPad::NotSet,
            AutoPad::NotSet,
            AutoPad::NotSet,
            AutoPad::SameUpper,
            AutoPad::SameLower,
            AutoPad::Valid,
        ],
    );
    let ceil = auto_pad == AutoPad::NotSet && one_in(rng, 2);
    let pads = if auto_pad == AutoPad::NotSet { pads } else { vec![] };
    (x, kernel, strides, dilations, pads, auto_pad, ceil)
}

#[test]
fn max_pool_matches_the_reference_exactly() {
    let mut rng = Rng::new(0x3a9f);
    for case in 0..60 {
        let (x_shape, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) =
            pool_case(&mut rng, 1 + case % 3);
        let storage_order = (rng.next_u64() % 2) as i64;
        let attrs =
            op::MaxPool { auto_pad, ceil_mode, dilations, kernel_shape, pads, strides, storage_order };
        // Every other case asks for the Indices output too.
        let outputs = 1 + case % 2;
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&x_shape));
        for y in g.push_opt(Op::MaxPool(attrs.clone()), vec![Some(x)], outputs) {
            g.output(y);
        }
        // Small integers half the time: ties, where the first maximum must win.
        let mut data = rng.tensor(&x_shape, -5.0, 5.0);
        if case % 4 >= 2 {
            let v: Vec<f32> = data.data().to_f64s().iter().map(|v| v.floor() as f32).collect();
            data = HostTensor::new(x_shape.clone(), v).unwrap();
        }
        let plan = check(&format!("case {case}: {attrs:?} X {x_shape:?} outputs {outputs}"), true, g, data);
        assert!(plan.contains("pool_f32"), "{plan}");
        if outputs == 2 {
            assert!(plan.contains("max_pool_indices_f32"), "{plan}");
        }
    }
}

#[test]
fn average_pool_matches_the_reference() {
    let mut rng = Rng::new(0xa7e9);
    for case in 0..60 {
        let (x_shape, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) =
            pool_case(&mut rng, 1 + case % 3);
        let count_include_pad = one_in(&mut rng, 2);
        let attrs = op::AveragePool {
            auto_pad,
            ceil_mode,
            count_include_pad,
            dilations,
            kernel_shape,
            pads,
            strides,
        };
        check_pool(&mut rng, &format!("case {case}: {attrs:?}"), Op::AveragePool(attrs), &x_shape);
    }
}

/// `op` (a pooling of one input) on a random `x_shape` input against the reference.
fn check_pool(rng: &mut Rng, what: &str, op: Op, x_shape: &[usize]) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(x_shape));
    let y = g.op1(op, &[x]);
    g.output(y);
    let plan = check(&format!("{what} X {x_shape:?}"), false, g, rng.tensor(x_shape, -5.0, 5.0));
    assert!(plan.contains("pool_f32"), "{plan}");
}

#[test]
fn lp_pool_matches_the_reference() {
    let mut rng = Rng::new(0x1b90);
    for case in 0..40 {
        let (x_shape, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode) =
            pool_case(&mut rng, 1 + case % 3);
        let p = [1, 2, 3][case % 3];
        let attrs = op::LpPool { auto_pad, ceil_mode, dilations, kernel_shape, p, pads, strides };
        check_pool(&mut rng, &format!("case {case}: {attrs:?}"), Op::LpPool(attrs), &x_shape);
    }
}

/// `y = relu(conv(x) · s + r)` with `s` a per-channel scale `[1, M, 1, 1]` and `r` a residual of
/// the output's shape computed from `x` (so it lives in the arena): the program after the
/// convolution (`Conv+Sum[..]`, an `Op::FusedConv`).
fn conv_with_program_graph(rng: &mut Rng, (batch, c, m, side): (usize, usize, usize, usize)) -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[batch, c, side, side]));
    let w = weight(&mut g, rng, "w", &[m, c, 3, 3], 0.2);
    let b = weight(&mut g, rng, "b", &[m], 0.5);
    let y = g.op1(Op::Conv(op::Conv { pads: vec![1; 4], ..op::Conv::default() }), &[x, w, b]);
    let s = weight(&mut g, rng, "s", &[1, m, 1, 1], 2.0);
    let scaled = g.op1(Op::Mul, &[y, s]);
    // The residual: a 1x1 convolution of x to m channels (an arena value of Y's shape).
    let wr = weight(&mut g, rng, "wr", &[m, c, 1, 1], 0.5);
    let r = g.op1(Op::Conv(op::Conv::default()), &[x, wr]);
    let sum = g.add(scaled, r);
    let out = g.relu(sum);
    g.output(out);
    g
}

/// A Conv whose result feeds an elementwise program (a per-channel scale, a residual add and a
/// Relu) applies the program in its epilogue on the `wgmma` tensor cores when asked
/// (`conv_program_epilogue`), also split over k (the reduction applies it), and otherwise (the
/// default) as a program step after the convolution, as after the CUDA-core kernels; each matches
/// the reference.
#[test]
fn a_program_after_a_conv_runs_in_its_epilogue_and_matches_the_reference() {
    let mut rng = Rng::new(0xc0f7);
    let portable = SessionOptions { wgmma_gemm: false, ..SessionOptions::default() };
    let epilogue = SessionOptions { conv_program_epilogue: true, ..SessionOptions::default() };
    // (batch, input channels, output channels, side): many tiles; few tiles (split over k).
    for (shape, split) in [((4, 16, 64, 20), false), ((1, 128, 128, 16), true)] {
        let g = conv_with_program_graph(&mut rng, shape);
        let x = rng.tensor(&[shape.0, shape.1, shape.3, shape.3], -1.0, 1.0);
        let plan = check_with(&format!("{shape:?}"), false, g.clone(), x.clone(), epilogue);
        assert!(plan.contains("Conv+"), "{plan}");
        if hopper() {
            assert!(plan.contains("conv_wg"), "{plan}");
            assert_eq!(plan.contains("gemm_reduce_program_f32"), split, "{plan}");
            assert!(!plan.contains("ew_program_f32"), "{plan}");
        }
        let plan =
            check_with(&format!("{shape:?} after"), false, g.clone(), x.clone(), SessionOptions::default());
        if hopper() {
            assert!(plan.contains("conv_wg") && plan.contains("ew_program_f32"), "{plan}");
        }
        let plan = check_with(&format!("{shape:?} portable"), false, g, x, portable);
        assert!(plan.contains("conv_gemm_f32") && plan.contains("ew_program_f32"), "{plan}");
    }
}
