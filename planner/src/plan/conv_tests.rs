use super::{Window, window};
use crate::op::{self, AutoPad, Op};
use crate::plan::{Arg, Plan, PlanOptions, Step, compile};
use crate::tensor_info::{Binding, DType, Dim};
use crate::{ConstTensor, Graph, ValueId};
use kernels_gpu::abi::{Activation, CONV_SHARED_BYTES, ConvParams, KernelId, PoolOp, PoolParams};

fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect()
}

fn conv_params(step: &Step) -> ConvParams {
    let Step::Kernel { args, .. } = step else { panic!("{step:?}") };
    let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
    assert_eq!(b.len(), core::mem::size_of::<ConvParams>());
    let v = u32s(b);
    let a3 = |i: usize| [v[i], v[i + 1], v[i + 2]];
    ConvParams {
        batch: v[0],
        in_channels: v[1],
        out_channels: v[2],
        groups: v[3],
        in_size: a3(4),
        out_size: a3(7),
        kernel: a3(10),
        strides: a3(13),
        dilations: a3(16),
        pad_begin: a3(19).map(|p| p as i32),
        has_bias: v[22],
        act: v[23],
        act_alpha: f32::from_bits(v[24]),
        splits: v[25],
    }
}

fn pool_params(step: &Step) -> PoolParams {
    let Step::Kernel { args, .. } = step else { panic!("{step:?}") };
    let Arg::Params(b) = &args[0] else { panic!("{args:?}") };
    assert_eq!(b.len(), core::mem::size_of::<PoolParams>());
    let planes = u64::from_ne_bytes(b[..8].try_into().unwrap());
    let v = u32s(&b[8..]);
    let a3 = |i: usize| [v[i], v[i + 1], v[i + 2]];
    PoolParams {
        planes,
        in_size: a3(0),
        out_size: a3(3),
        kernel: a3(6),
        strides: a3(9),
        dilations: a3(12),
        pad_begin: a3(15),
        pad_end: a3(18),
        op: v[21],
        count_include_pad: v[22],
        storage_order: v[23],
        lp: v[24],
        _pad: v[25],
    }
}

fn kernel_steps(plan: &Plan) -> Vec<(KernelId, &Step)> {
    plan.steps
        .iter()
        .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some((*kernel, s)) } else { None })
        .collect()
}

fn weight(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
    let n = dims.iter().product();
    g.initializer(name, ConstTensor::from_f32(dims, &vec![0.5; n]).unwrap())
}

fn known(dims: &[usize]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Known(d)).collect()
}

fn geo(input: &[usize], k: &[usize], s: &[usize], pads: &[usize], ap: AutoPad, ceil: bool) -> Window {
    window(input, k, s, &[], pads, ap, ceil).unwrap()
}

#[test]
fn window_geometry_follows_the_onnx_rules() {
    assert_eq!(geo(&[5], &[3], &[], &[1, 1], AutoPad::NotSet, false).out, [5]);
    assert_eq!(geo(&[5], &[3], &[2], &[1, 1], AutoPad::NotSet, false).out, [3]);
    assert_eq!(geo(&[5], &[3], &[2], &[1, 1], AutoPad::Valid, false).out, [2]);
    let up = geo(&[5], &[4], &[2], &[], AutoPad::SameUpper, false);
    assert_eq!((up.out[0], up.pad_begin[0], up.pad_end[0]), (3, 1, 2));
    let low = geo(&[5], &[4], &[2], &[], AutoPad::SameLower, false);
    assert_eq!((low.out[0], low.pad_begin[0], low.pad_end[0]), (3, 2, 1));
    // ceil_mode rounds up, but a window that would start in the end padding is dropped.
    assert_eq!(geo(&[4], &[3], &[2], &[], AutoPad::NotSet, true).out, [2]);
    assert_eq!(geo(&[5], &[2], &[2], &[0, 1], AutoPad::NotSet, true).out, [3]);
    assert_eq!(geo(&[4], &[1], &[2], &[0, 1], AutoPad::NotSet, true).out, [2]);
    assert!(window(&[2], &[3], &[], &[], &[], AutoPad::NotSet, false).is_err());
    assert!(window(&[4], &[3], &[0], &[], &[], AutoPad::NotSet, false).is_err());
}

/// Conv(3 -> 16, 3x3, pad 1) + Relu -> MaxPool 2x2 -> Conv(16 -> 64, 3x3, stride 2, bias) ->
/// AveragePool(3x3, stride 2, ceil, count_include_pad) -> GlobalAveragePool.
#[test]
fn a_small_cnn_lowers_to_conv_pool_and_reduce_kernels() {
    let mut g = Graph::new();
    let x = g.input(
        "x",
        DType::F32,
        vec![Dim::Symbol("n".into()), Dim::Known(3), Dim::Known(32), Dim::Known(32)],
    );
    let w1 = weight(&mut g, "w1", &[16, 3, 3, 3]);
    let c1 = op::Conv { pads: vec![1, 1, 1, 1], ..op::Conv::default() };
    let h = g.op1(Op::Conv(c1), &[x, w1]);
    let h = g.relu(h);
    let mp = op::MaxPool { kernel_shape: vec![2, 2], strides: vec![2, 2], ..op::MaxPool::default() };
    let h = g.push_opt(Op::MaxPool(mp), vec![Some(h)], 1)[0];
    let (w2, b2) = (weight(&mut g, "w2", &[64, 16, 3, 3]), weight(&mut g, "b2", &[64]));
    let c2 = op::Conv { strides: vec![2, 2], ..op::Conv::default() };
    let h = g.op1(Op::Conv(c2), &[h, w2, b2]);
    let ap = op::AveragePool {
        kernel_shape: vec![3, 3],
        strides: vec![2, 2],
        ceil_mode: true,
        count_include_pad: true,
        pads: vec![1, 1, 1, 1],
        ..op::AveragePool::default()
    };
    let h = g.op1(Op::AveragePool(ap), &[h]);
    let y = g.op1(Op::GlobalAveragePool, &[h]);
    g.output(y);
    // The portable flavour (no wgmma): the second Conv runs the CUDA-core implicit GEMM.
    let portable = PlanOptions { wgmma_gemm: false, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new().with("n", 2), &portable).unwrap();
    let text = plan.to_string();
    let steps = kernel_steps(&plan);
    let kernels: Vec<KernelId> = steps.iter().map(|s| s.0).collect();
    assert_eq!(
        kernels,
        [
            KernelId::ConvDirectF32,
            KernelId::PoolF32,
            KernelId::ConvGemmF32,
            KernelId::PoolF32,
            KernelId::ReduceF32
        ],
        "{text}"
    );
    assert!(text.contains("Conv+Relu conv_direct_f32"), "{text}");
    let p = conv_params(steps[0].1);
    assert_eq!((p.batch, p.in_channels, p.out_channels, p.groups), (2, 3, 16, 1));
    assert_eq!(
        (p.in_size, p.out_size, p.kernel, p.pad_begin),
        ([1, 32, 32], [1, 32, 32], [1, 3, 3], [0, 1, 1])
    );
    assert_eq!((p.has_bias, p.act), (0, Activation::Relu as u32));
    let p = pool_params(steps[1].1);
    assert_eq!((p.planes, p.in_size, p.out_size, p.op), (32, [1, 32, 32], [1, 16, 16], PoolOp::Max as u32));
    let Step::Kernel { grid, block, shared_bytes, .. } = steps[2].1 else { unreachable!() };
    let p = conv_params(steps[2].1);
    // 16x16 -> 7x7, two images: 98 columns in two 64-wide tiles, one 64-channel tile.
    assert_eq!((p.out_size, p.strides, p.has_bias, p.act), ([1, 7, 7], [1, 2, 2], 1, 0));
    assert_eq!((*grid, *block, *shared_bytes), ([2, 1, 1], [16, 16, 1], CONV_SHARED_BYTES));
    let p = pool_params(steps[3].1);
    // 7 + 2 padding, window 3, stride 2, ceil: 4 outputs (the 4th starts at 6 < 7 + 1).
    assert_eq!(
        (p.out_size, p.pad_begin, p.pad_end, p.count_include_pad),
        ([1, 4, 4], [0, 1, 1], [0, 1, 1], 1)
    );
    // Hopper: it runs on wgmma (98 positions in two 64-row tiles, one 64-channel tile), reading
    // its weights packed with the tap table; the weights themselves are not uploaded.
    let plan = compile(&g, &Binding::new().with("n", 2), &PlanOptions::default()).unwrap();
    let steps = kernel_steps(&plan);
    let Step::Kernel { kernel, grid, block, shared_bytes, args, .. } = steps[2].1 else { unreachable!() };
    assert_eq!((*kernel, *grid, *block), (KernelId::ConvWg64F32, [1, 2, 1], [128, 1, 1]), "{plan}");
    assert_eq!(Some(*shared_bytes), KernelId::ConvWg64F32.large_shared_bytes());
    let Arg::Value(packed) = args[3] else { panic!("{args:?}") };
    let p = conv_params(steps[2].1);
    assert_eq!(plan.constants[&packed].dims, [kernels_gpu::abi::conv_wg_packed_len(&p, true) as usize]);
    // The first Conv (16 output channels, 3 input channels) takes wgmma too, in 64 x 32 tiles:
    // 2048 positions.
    assert_eq!(steps[0].0, KernelId::ConvWg32F32, "{plan}");
    let names: Vec<&str> = plan.constants.keys().map(|v| plan.values[v.index()].name.as_str()).collect();
    assert_eq!(names, ["b2", "w1/conv-packed", "w2/conv-packed"], "{plan}");
}

/// A direct convolution of `x` (`[n, c, d, h, w]`) by `w` (`[m, c/g, kd, kh, kw]`) at `p`.
fn direct_conv(p: &ConvParams, x: &[f32], w: &[f32]) -> Vec<f32> {
    let (g, [d, h, wd], [od, oh, ow]) =
        (p.groups as usize, p.in_size.map(|v| v as usize), p.out_size.map(|v| v as usize));
    let (c, m) = (p.in_channels as usize, p.out_channels as usize);
    let (cg, mg) = (c / g, m / g);
    let k = p.kernel.map(|v| v as usize);
    let mut y = vec![0f32; p.batch as usize * m * od * oh * ow];
    let at = |o: usize, t: usize, i: usize, n: usize| {
        let q = (o * p.strides[i] as usize + t * p.dilations[i] as usize) as i64 - p.pad_begin[i] as i64;
        (q >= 0 && (q as usize) < n).then_some(q as usize)
    };
    for b in 0..p.batch as usize {
        for oc in 0..m {
            for (pos, out) in y[(b * m + oc) * od * oh * ow..][..od * oh * ow].iter_mut().enumerate() {
                let o = [pos / (oh * ow), pos / ow % oh, pos % ow];
                let mut acc = 0f64;
                for ci in 0..cg {
                    for tz in 0..k[0] {
                        for ty in 0..k[1] {
                            for tx in 0..k[2] {
                                let (Some(z), Some(yy), Some(xx)) =
                                    (at(o[0], tz, 0, d), at(o[1], ty, 1, h), at(o[2], tx, 2, wd))
                                else {
                                    continue;
                                };
                                let xc = b * c + oc / mg * cg + ci;
                                let xv = x[((xc * d + z) * h + yy) * wd + xx];
                                let wv = w[(((oc * cg + ci) * k[0] + tz) * k[1] + ty) * k[2] + tx];
                                acc += xv as f64 * wv as f64;
                            }
                        }
                    }
                }
                *out = acc as f32;
            }
        }
    }
    y
}

/// The `wgmma` convolution's operands as the kernel reads them (each group's packed weights, the
/// tap table, window origins checked per axis) compute the convolution: the kernel's gather
/// emulated on the host against a direct convolution, over strides, dilations, pads, groups and
/// 1-D to 3-D.
#[test]
fn the_packed_conv_weights_and_tap_table_compute_the_convolution() {
    use kernels_gpu::abi::{conv_depth, conv_wg_table_at, gemm_wg_packed_ld};
    let mut seed = 0x9e37_79b9u64;
    let mut next = |n: u32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as u32
    };
    for case in 0..40 {
        let nd = 1 + case % 3;
        let mut p = ConvParams {
            batch: 1 + next(2),
            groups: 1 + next(3),
            in_size: [1; 3],
            out_size: [1; 3],
            kernel: [1; 3],
            strides: [1; 3],
            dilations: [1; 3],
            ..ConvParams::default()
        };
        p.in_channels = p.groups * (1 + next(4));
        p.out_channels = p.groups * (1 + next(5));
        for i in 3 - nd..3 {
            p.kernel[i] = 1 + next(3);
            p.strides[i] = 1 + next(2);
            p.dilations[i] = 1 + next(2);
            p.pad_begin[i] = next(p.kernel[i]) as i32;
            let extent = (p.kernel[i] - 1) * p.dilations[i] + 1;
            p.in_size[i] = extent + next(6);
            p.out_size[i] = (p.in_size[i] + 2 * p.pad_begin[i] as u32 - extent) / p.strides[i] + 1;
        }
        let xs = (p.batch * p.in_channels * p.in_size.iter().product::<u32>()) as usize;
        let k = conv_depth(&p);
        let ws = (p.out_channels * k) as usize;
        let x: Vec<f32> = (0..xs).map(|i| ((i * 7919) % 23) as f32 / 11.0 - 1.0).collect();
        let w: Vec<f32> = (0..ws).map(|i| ((i * 104_729) % 19) as f32 / 9.0 - 1.0).collect();
        let want = direct_conv(&p, &x, &w);
        let packed = super::super::tc_pack::pack_conv(&w, &p, true).unwrap();
        let f = |i: usize| f32::from_bits(packed[i]);
        let (groups, mg) = (p.groups as usize, (p.out_channels / p.groups) as usize);
        let (ld, table) = (gemm_wg_packed_ld(k) as usize, conv_wg_table_at(&p, true) as usize);
        let group_len = 2 * mg * ld;
        let plane: usize = p.out_size.iter().product::<u32>() as usize;
        let [d, h, wd] = p.in_size.map(|v| v as i64);
        let mut got = vec![0f32; want.len()];
        for gi in 0..groups {
            for row in 0..p.batch as usize * plane {
                let (b, pos) = (row / plane, row % plane);
                let [_, oh, ow] = p.out_size.map(|v| v as usize);
                let o = [pos / (oh * ow), pos / ow % oh, pos % ow];
                let at: [i64; 3] =
                    std::array::from_fn(|i| (o[i] * p.strides[i] as usize) as i64 - p.pad_begin[i] as i64);
                let chan = (b * p.in_channels as usize + gi * (p.in_channels as usize / groups)) as i64;
                let base = chan * d * h * wd + (at[0] * h + at[1]) * wd + at[2];
                for j in 0..mg {
                    let mut acc = 0f64;
                    for kk in 0..k as usize {
                        let e = |q: usize| packed[table + 4 * kk + q] as i32 as i64;
                        let inside = at[0] + e(1) >= 0
                            && at[0] + e(1) < d
                            && at[1] + e(2) >= 0
                            && at[1] + e(2) < h
                            && at[2] + e(3) >= 0
                            && at[2] + e(3) < wd;
                        if !inside {
                            continue;
                        }
                        let xv = x[(base + e(0)) as usize] as f64;
                        let wv = f(gi * group_len + j * ld + kk) as f64
                            + f(gi * group_len + mg * ld + j * ld + kk) as f64;
                        acc += xv * wv;
                    }
                    got[(b * p.out_channels as usize + gi * mg + j) * plane + pos] = acc as f32;
                }
            }
        }
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-5 * (b.abs() + 1.0), "case {case} {p:?}: [{i}] {a} vs {b}");
        }
    }
}

#[test]
fn depthwise_one_d_and_transposed_convolutions() {
    let mut g = Graph::new();
    // Depthwise 1-D conv, SAME_UPPER, dilation 2: a thread per output.
    let x = g.input("x", DType::F32, known(&[1, 8, 50]));
    let w = weight(&mut g, "w", &[8, 1, 4]);
    let dw = op::Conv { group: 8, dilations: vec![2], auto_pad: AutoPad::SameUpper, ..op::Conv::default() };
    let h = g.op1(Op::Conv(dw), &[x, w]);
    // ConvTranspose 1-D, stride 3, output_shape larger than the natural size: a negative pad.
    let wt = weight(&mut g, "wt", &[8, 2, 3]);
    let ct = op::ConvTranspose { strides: vec![3], output_shape: vec![153], ..op::ConvTranspose::default() };
    let y = g.op1(Op::ConvTranspose(ct), &[h, wt]);
    g.output(y);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let steps = kernel_steps(&plan);
    assert_eq!(
        steps.iter().map(|s| s.0).collect::<Vec<_>>(),
        [KernelId::ConvDirectF32, KernelId::ConvTransposeF32]
    );
    let p = conv_params(steps[0].1);
    // Extent (4 - 1) * 2 + 1 = 7: 6 padding, 3 before and 3 after.
    assert_eq!(
        (p.groups, p.in_size, p.out_size, p.kernel, p.dilations),
        (8, [1, 1, 50], [1, 1, 50], [1, 1, 4], [1, 1, 2])
    );
    assert_eq!(p.pad_begin, [0, 0, 3]);
    let p = conv_params(steps[1].1);
    // Natural size 3 * 49 + 3 = 150; 153 requested: total pad -3, of which -3 - floor(-3 / 2) = -1
    // goes first.
    assert_eq!((p.in_channels, p.out_channels, p.out_size, p.pad_begin), (8, 2, [1, 1, 153], [0, 0, -1]));
}

#[test]
fn unsupported_forms_are_refused_with_the_reason() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[1, 2, 3, 3, 3, 3]));
    let w = weight(&mut g, "w", &[2, 2, 1, 1, 1, 1]);
    let y = g.op1(Op::Conv(op::Conv::default()), &[x, w]);
    g.output(y);
    let e = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap_err().to_string();
    assert!(e.contains("1 node(s)") && e.contains("4-D convolution"), "{e}");
}

#[test]
fn max_pool_indices_take_a_second_step() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[2, 3, 6, 7]));
    let mp = op::MaxPool { kernel_shape: vec![2, 2], storage_order: 1, ..op::MaxPool::default() };
    let outs = g.push_opt(Op::MaxPool(mp), vec![Some(x)], 2);
    g.output(outs[0]);
    g.output(outs[1]);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let steps = kernel_steps(&plan);
    assert_eq!(
        steps.iter().map(|s| s.0).collect::<Vec<_>>(),
        [KernelId::PoolF32, KernelId::MaxPoolIndicesF32]
    );
    let p = pool_params(steps[1].1);
    assert_eq!((p.planes, p.out_size, p.storage_order), (6, [1, 5, 6], 1));
}

/// A Conv whose tiles cannot fill the device (the CNN's 128-channel 16 x 16 layer at batch 1: 8
/// tiles of 36 k tiles) splits its depth over the `wgmma` blocks and reduces the partials with
/// the bias and the activation.
#[test]
fn a_conv_of_few_tiles_splits_its_depth_and_reduces_with_the_epilogue() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[1, 128, 16, 16]));
    let (w, b) = (weight(&mut g, "w", &[128, 128, 3, 3]), weight(&mut g, "b", &[128]));
    let y = g.op1(Op::Conv(op::Conv { pads: vec![1; 4], ..op::Conv::default() }), &[x, w, b]);
    let y = g.relu(y);
    g.output(y);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let steps = kernel_steps(&plan);
    assert_eq!(
        steps.iter().map(|s| s.0).collect::<Vec<_>>(),
        [KernelId::ConvWg64F32, KernelId::GemmReduceF32]
    );
    let Step::Kernel { grid, args, .. } = steps[0].1 else { unreachable!() };
    // 256 positions x 128 channels in 64 x 64 tiles, 9 splits of 128 depths (1152 in all).
    let p = conv_params(steps[0].1);
    assert_eq!((*grid, p.splits, kernels_gpu::abi::conv_k_chunk(&p)), ([2, 4, 9], 9, 128), "{plan}");
    let (Arg::Value(ws), Step::Kernel { args: reduce, label, .. }) = (&args[8], steps[1].1) else {
        panic!("{plan}")
    };
    assert_eq!(plan.values[ws.index()].dims, Some(vec![9 * 128 * 256]));
    assert_eq!(label, "Conv+Relu split-k reduce");
    assert!(matches!(&reduce[2], Arg::Value(v) if v == ws), "{plan}");
    // Portable: no split, the CUDA-core implicit GEMM.
    let portable = PlanOptions { wgmma_gemm: false, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &portable).unwrap();
    assert_eq!(kernel_steps(&plan).iter().map(|s| s.0).collect::<Vec<_>>(), [KernelId::ConvGemmF32]);
}

/// A Conv whose result an elementwise program reads (a per-channel scale, a residual and a Relu)
/// becomes an `Op::FusedConv`: on Hopper one `wgmma` launch carrying the program (split over k,
/// the reduction carries it), elsewhere the CUDA-core kernel writing Y and the program over Y in
/// place.
#[test]
fn a_program_after_a_conv_fuses_into_its_epilogue() {
    for (batch, c, m, side, split) in [(4, 16, 64, 20, false), (1, 128, 128, 16, true)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, known(&[batch, c, side, side]));
        let (w, b) = (weight(&mut g, "w", &[m, c, 3, 3]), weight(&mut g, "b", &[m]));
        let y = g.op1(Op::Conv(op::Conv { pads: vec![1; 4], ..op::Conv::default() }), &[x, w, b]);
        let s = weight(&mut g, "s", &[1, m, 1, 1]);
        let scaled = g.op1(Op::Mul, &[y, s]);
        let wr = weight(&mut g, "wr", &[m, c, 1, 1]);
        let r = g.op1(Op::Conv(op::Conv::default()), &[x, wr]);
        let sum = g.add(scaled, r);
        let out = g.relu(sum);
        let w2 = weight(&mut g, "w2", &[m, m, 1, 1]);
        let y2 = g.op1(Op::Conv(op::Conv::default()), &[out, w2]);
        g.output(y2);
        // By default the program runs after the convolution; asked, in its epilogue.
        let after = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        assert!(kernel_steps(&after).iter().any(|s| s.0 == KernelId::EwProgramF32), "{after}");
        let asked = PlanOptions { conv_program_epilogue: true, ..PlanOptions::default() };
        let plan = compile(&g, &Binding::new(), &asked).unwrap();
        let steps = kernel_steps(&plan);
        let fused: Vec<_> = steps
            .iter()
            .filter(|s| matches!(s.1, Step::Kernel { label, .. } if label.starts_with("Conv+")))
            .collect();
        let kinds: Vec<KernelId> = fused.iter().map(|s| s.0).collect();
        let want = if split {
            vec![KernelId::ConvWg128F32, KernelId::GemmReduceProgramF32]
        } else {
            vec![KernelId::ConvWg64F32]
        };
        assert_eq!(kinds.len(), want.len(), "{plan}");
        assert!(kinds[0] == KernelId::ConvWg64F32 || kinds[0] == KernelId::ConvWg128F32, "{plan}");
        assert_eq!(kinds[1..], want[1..], "{plan}");
        assert!(steps.iter().all(|s| s.0 != KernelId::EwProgramF32), "{plan}");
        // `[p, e, x, w, b, x1, x2, x3, y]` (split: the partials take the identity program, the
        // reduction `[p, e, c, ws, x1, x2, x3, y]` the program): its instructions, the scale and
        // the residual as x1 and x2.
        let (Step::Kernel { args, .. }, x1) = (if split { (fused[1].1, 4) } else { (fused[0].1, 5) }) else {
            unreachable!()
        };
        let Arg::Params(e) = &args[1] else { panic!("{args:?}") };
        // `EwProgramParams::n_instr`: after `elems` (u64) and `rank` (u32).
        let n_instr = u32::from_le_bytes(e[12..16].try_into().unwrap());
        assert!(n_instr > 0, "{plan}");
        // Aligned to [batch, out_channels, out_plane]: the kernels compute its offsets without
        // dividing (`conv_store` traps on any other rank).
        assert_eq!(u32::from_le_bytes(e[8..12].try_into().unwrap()), 3, "{plan}");
        assert!(
            matches!(args[x1..x1 + 3], [Arg::Value(_), Arg::Value(_), Arg::Null]),
            "the scale and the residual as x1, x2:\n{plan}"
        );
        // Portable: the CUDA-core kernel, then the program over its output in place.
        let portable = PlanOptions { wgmma_gemm: false, ..PlanOptions::default() };
        let plan = compile(&g, &Binding::new(), &portable).unwrap();
        let steps = kernel_steps(&plan);
        let i = steps.iter().position(|s| s.0 == KernelId::EwProgramF32).expect("a program step");
        assert!(matches!(steps[i - 1].1, Step::Kernel { label, .. } if label.starts_with("Conv+")), "{plan}");
        let (Step::Kernel { args: conv_args, .. }, Step::Kernel { args: prog_args, .. }) =
            (steps[i - 1].1, steps[i].1)
        else {
            unreachable!()
        };
        let (Some(Arg::Value(y)), Some(Arg::Value(x0)), Some(Arg::Value(o))) =
            (conv_args.last(), prog_args.get(1), prog_args.last())
        else {
            panic!("{plan}")
        };
        assert!(y == x0 && y == o, "the program runs over the convolution's output in place:\n{plan}");
    }
}

/// A program whose inputs' offsets are not linear in the image, the channel and the output
/// position (a scale per channel and output row) is not applied in the `wgmma` convolution's
/// epilogue: the convolution writes Y and a program step finishes it in place.
#[test]
fn a_program_not_aligned_to_the_output_runs_after_the_wgmma_convolution() {
    let (c, m, side) = (16, 64, 20);
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[4, c, side, side]));
    let w = weight(&mut g, "w", &[m, c, 3, 3]);
    let y = g.op1(Op::Conv(op::Conv { pads: vec![1; 4], ..op::Conv::default() }), &[x, w]);
    let s = weight(&mut g, "s", &[1, m, side, 1]);
    let scaled = g.op1(Op::Mul, &[y, s]);
    let out = g.relu(scaled);
    g.output(out);
    let asked = PlanOptions { conv_program_epilogue: true, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &asked).unwrap();
    let kinds: Vec<KernelId> = kernel_steps(&plan).iter().map(|s| s.0).collect();
    assert_eq!(kinds.last(), Some(&KernelId::EwProgramF32), "{plan}");
    assert!(matches!(kinds[kinds.len() - 2], KernelId::ConvWg64F32 | KernelId::ConvWg32F32), "{plan}");
}
