//! The GEMM lowering's choices (split-K, the tensor-core and tile launches) and the program
//! epilogue's addressing.

use super::*;

fn p(m: u32, n: u32, k: u32, batch: u32) -> GemmParams {
    GemmParams { m, n, k, batch, ..GemmParams::default() }
}

#[test]
fn the_tile_kernels_take_the_gemms_that_fill_the_device() {
    use kernels_gpu::abi::KernelId as K;
    let o = PlanOptions::default();
    // A contiguous [m, k] x [k, n] MatMul (B n-contiguous) or Gemm transB (B k-contiguous).
    let mm = |m: u32, n: u32, k: u32, trans_b: bool| GemmParams {
        a_rs: k as u64,
        a_cs: 1,
        b_rs: if trans_b { 1 } else { n as u64 },
        b_cs: if trans_b { k as u64 } else { 1 },
        ..p(m, n, k, 1)
    };
    let kernel = |q: &GemmParams| tile_launch(q, &o).map(|l| (l.kernel, l.grid));
    let split = |q: &GemmParams| tile_launch(q, &o).map(|l| (l.grid, l.splits, l.k_chunk));
    // The physics MLP at batch 16384: 256 tiles of 128 x 128.
    assert_eq!(kernel(&mm(16384, 256, 256, false)), Some((K::GemmTc128NF32, [2, 128, 1])));
    assert_eq!(kernel(&mm(16384, 256, 256, true)), Some((K::GemmTc128KF32, [2, 128, 1])));
    // GPT-2's QKV projection at batch 16 x sequence 128: 96 large tiles, 384 small ones.
    assert_eq!(kernel(&mm(2048, 768, 256, false)), Some((K::GemmTc64NF32, [12, 32, 1])));
    // Its attention output projection and MLP down-projection: 128 small tiles, one per
    // multiprocessor, so k is split in two (k 256) or three (k 1024, chunks of 352).
    assert_eq!(split(&mm(2048, 256, 256, false)), Some(([4, 32, 2], 2, 128)));
    assert_eq!(split(&mm(2048, 256, 1024, false)), Some(([4, 32, 3], 3, 352)));
    assert_eq!(split_k(&mm(2048, 256, 1024, false), &o), (3, 352));
    assert_eq!(tensor_core(&mm(2048, 256, 1024, false), &o), None);
    // Too short a k to split (fewer than four k tiles a chunk), or too few tiles even split:
    // the small-m tensor-core kernel's.
    assert_eq!(kernel(&mm(2048, 256, 128, false)), None);
    assert!(tensor_core(&mm(2048, 256, 128, false), &o).is_some());
    assert_eq!(kernel(&mm(1024, 256, 1024, false)), None);
    assert!(tensor_core(&mm(1024, 256, 1024, false), &o).is_some());
    // A column or a few (the physics MLP's last layer at batch 16384): the small-m kernel's.
    assert_eq!(kernel(&mm(16384, 1, 256, true)), None);
    assert!(tensor_core(&mm(16384, 1, 256, true), &o).is_some());
    // Between one and two waves of small tiles: split in two where k allows.
    assert_eq!(split(&mm(4096, 192, 512, false)), Some(([3, 64, 2], 2, 256)));
    // n 64 (the GNN's edge GEMMs, 800k x 64) or 192: the 128-column tiles would idle a half or
    // a quarter of their columns: the 64-column ones; n 1000 pads both alike.
    assert_eq!(kernel(&mm(800_000, 64, 128, false)), Some((K::GemmTc64NF32, [1, 12500, 1])));
    assert_eq!(kernel(&mm(16384, 192, 256, false)), Some((K::GemmTc64NF32, [3, 256, 1])));
    assert_eq!(kernel(&mm(16384, 1000, 256, true)).map(|k| k.0), Some(K::GemmTc128KF32));
    // At least two waves: no split.
    assert_eq!(split(&mm(4096, 512, 1024, false)), Some(([8, 64, 1], 1, 1024)));
    // On a packed weight (wgmma) the same tiles run unsplit, unless asked.
    assert_eq!(splits_of(&mm(2048, 256, 1024, false), true, &o), (1, 1024));
    assert_eq!(splits_of(&mm(2048, 256, 1024, false), false, &o), (3, 352));
    let asked = PlanOptions { split_k_wgmma: true, ..o };
    assert_eq!(splits_of(&mm(2048, 256, 1024, false), true, &asked), (3, 352));
    // Rows of B not 16-byte aligned, A k-strided, the options off: not the tile kernels.
    assert_eq!(kernel(&mm(4096, 1022, 256, false)), None);
    assert_eq!(kernel(&GemmParams { a_rs: 1, a_cs: 4096, ..mm(4096, 1024, 256, false) }), None);
    for off in [PlanOptions { tile_gemm: false, ..o }, PlanOptions { tensor_core_gemm: false, ..o }] {
        assert_eq!(tile_launch(&mm(16384, 256, 256, false), &off), None);
    }
}

/// The flat-index unravel of the kernels (`ew_offsets`), on the host.
fn unravel(e: &EwProgramParams, i: u64) -> [u64; EW_MAX_INPUTS] {
    use kernels_gpu::abi::MAX_RANK;
    if e.rank == 0 {
        return [i; EW_MAX_INPUTS];
    }
    let (mut rem, mut o) = (i, [0u64; EW_MAX_INPUTS]);
    for d in (MAX_RANK - e.rank as usize..MAX_RANK).rev() {
        let idx = rem % e.out_shape[d];
        rem /= e.out_shape[d];
        for (k, ok) in o.iter_mut().enumerate() {
            *ok += idx * e.strides[k][d];
        }
    }
    o
}

#[test]
fn gemm_aligned_programs_address_what_the_flat_unravel_does() {
    use crate::plan::fuse::EwProgram;
    let program = EwProgram { instrs: vec![kernels_gpu::abi::EwInstr::default()], out_reg: 0 };
    // (output dims, the GEMM's batch / m / n over them, input shapes, aligned expected)
    type Case<'a> = (&'a [usize], [u32; 3], &'a [&'a [usize]], bool);
    let cases: [Case; 7] = [
        // Bias row over a [m, n] output; a residual; a bias over a batched output.
        (&[24, 64], [1, 24, 64], &[&[24, 64], &[64]], true),
        (&[2, 12, 64], [2, 12, 64], &[&[2, 12, 64], &[1, 1, 64], &[2, 12, 64]], true),
        // A MatMul whose batch folded into m: the bias is still linear in the row.
        (&[2, 12, 64], [1, 24, 64], &[&[2, 12, 64], &[64]], true),
        // A per-batch column broadcast: linear in batch, row and column.
        (&[3, 5, 7], [3, 5, 7], &[&[3, 5, 7], &[3, 1, 7]], true),
        // Folded batch with an input varying by batch only: the row spans two dims.
        (&[3, 5, 7], [1, 15, 7], &[&[3, 5, 7], &[3, 1, 1]], false),
        // An attention mask over heads: [1, 4, 16, 16] output, [1, 1, 16, 16] mask.
        (&[1, 4, 16, 16], [4, 16, 16], &[&[1, 4, 16, 16], &[1, 1, 16, 16]], true),
        (&[8, 1, 9], [8, 1, 9], &[&[8, 1, 9], &[1, 1, 9], &[8, 1, 1]], true),
    ];
    for (od, [batch, m, n], shapes, aligned) in cases {
        let e = crate::plan::lower::program_params(&program, shapes, od).unwrap();
        let a = gemm_aligned(e, batch, m, n);
        let r = kernels_gpu::abi::MAX_RANK - 3;
        let is_aligned = a.rank == 3 && a.out_shape[r..] == [batch as u64, m as u64, n as u64];
        assert_eq!(is_aligned, aligned, "{od:?} {shapes:?}: {a:?}");
        if !is_aligned {
            assert_eq!(a, e, "{od:?} {shapes:?}: unchanged when not aligned");
            continue;
        }
        for b in 0..batch as u64 {
            for i in 0..m as u64 {
                for j in 0..n as u64 {
                    let flat = unravel(&e, (b * m as u64 + i) * n as u64 + j);
                    let direct: [u64; EW_MAX_INPUTS] = std::array::from_fn(|k| {
                        b * a.strides[k][r] + i * a.strides[k][r + 1] + j * a.strides[k][r + 2]
                    });
                    assert_eq!(
                        flat[..shapes.len()],
                        direct[..shapes.len()],
                        "{od:?} {shapes:?} ({b}, {i}, {j})"
                    );
                }
            }
        }
    }
}

/// `ew_program_f32`'s 32-bit offsets (`EwProgramParams::fast_offsets`, through the divisors the
/// planner fills in) address what the flat 64-bit unravel does, for broadcasts of every rank the
/// collapse leaves, also after `gemm_aligned` reshapes the dims; at 2^31 elements and more the
/// divisors are left out (64-bit offsets). The program launch covers every element, one a thread.
#[test]
fn programs_32_bit_offsets_address_what_the_flat_unravel_does() {
    use crate::plan::fuse::EwProgram;
    let program = EwProgram { instrs: vec![kernels_gpu::abi::EwInstr::default()], out_reg: 0 };
    type Case<'a> = (&'a [usize], &'a [&'a [usize]]);
    let cases: [Case; 7] = [
        (&[2, 3, 5, 7], &[&[2, 3, 5, 7], &[3, 1, 7], &[5, 1], &[]]),
        (&[4, 1, 6], &[&[4, 1, 6], &[1, 1, 6]]),
        (&[7], &[&[7], &[1]]),
        (&[3, 1000, 3], &[&[1, 1000, 1], &[3, 1, 3]]),
        (&[2, 3, 2, 3, 2, 3, 2, 3], &[&[2, 1, 2, 1, 2, 1, 2, 1], &[1, 3, 1, 3, 1, 3, 1, 3]]),
        // A requantization after a convolution of batch 64: a per-channel scale.
        (&[64, 32, 64, 64], &[&[64, 32, 64, 64], &[32, 1, 1]]),
        (&[1, 1 << 30], &[&[1, 1 << 30], &[1]]),
    ];
    for (od, shapes) in cases {
        let e = crate::plan::lower::program_params(&program, shapes, od).unwrap();
        assert_eq!(e.fast_div, u32::from(e.rank > 0), "{od:?} {shapes:?}: {e:?}");
        let grid = crate::plan::lower::one_thread_each(e.elems).unwrap();
        assert!(grid[0] as u64 * crate::plan::GRID_STRIDE_THREADS as u64 >= e.elems, "{od:?}: {grid:?}");
        let check = |p: &EwProgramParams, i: u64| {
            if p.fast_div != 0 {
                let fast = p.fast_offsets(i as u32).map(u64::from);
                assert_eq!(fast[..shapes.len()], unravel(p, i)[..shapes.len()], "{od:?} {shapes:?} at {i}");
            }
        };
        let last = e.elems - 1;
        let sample: Vec<u64> = if e.elems <= 1 << 16 {
            (0..e.elems).collect()
        } else {
            (0..1 << 16)
                .chain((0..1 << 14).map(|k| last - k))
                .chain((1..1 << 12).map(|k| k * (last / 4096)))
                .collect()
        };
        for &i in &sample {
            check(&e, i);
        }
        if let [b, m, n] = od[..] {
            let a = gemm_aligned(e, b as u32, m as u32, n as u32);
            for &i in &sample {
                check(&a, i);
            }
        }
    }
    let big = crate::plan::lower::program_params(
        &program,
        &[&[1 << 16, 1 << 15, 2], &[1 << 15, 1]],
        &[1 << 16, 1 << 15, 2],
    );
    assert_eq!(
        big.map(|e| (e.fast_div, e.div_m, e.elems)),
        Ok((0, [0; kernels_gpu::abi::MAX_RANK], 1 << 32))
    );
    assert_eq!(crate::plan::lower::one_thread_each(257), Ok([2, 1, 1]));
    assert!(crate::plan::lower::one_thread_each(1 << 40).is_err());
}

/// Options with the tensor-core GEMM off (the CUDA-core kernel and its split-K).
fn cuda_cores() -> PlanOptions {
    PlanOptions { tensor_core_gemm: false, ..PlanOptions::default() }
}

#[test]
fn the_tensor_core_gemm_takes_what_would_underfill_the_device() {
    let o = PlanOptions::default();
    // GPT-2's projections at seq 128: one launch each, k split over the warps of a block.
    let launch = |m, n, k| tensor_core(&p(m, n, k, 1), &o).map(|l| (l.grid, l.warps, l.pair));
    assert_eq!(launch(128, 768, 256), Some(([24, 8, 1], 4, false)));
    // The MLP down-projection: 64 tiles of 32 rounds want 16 warps each, a pair of blocks.
    assert_eq!(launch(128, 256, 1024), Some(([16, 8, 1], 8, true)));
    let no_pairs = PlanOptions { pair_gemm: false, ..o };
    assert_eq!(
        tensor_core(&p(128, 256, 1024, 1), &no_pairs).map(|l| (l.grid, l.warps)),
        Some(([8, 8, 1], 8))
    );
    // Mamba2's out-projection at 1 x 256 (128 tiles of 16 rounds want 9 warps): a pair would
    // hold no more warps than one block of 8.
    assert_eq!(launch(256, 256, 512), Some(([8, 16, 1], 8, false)));
    // At least four warps, also where k has fewer rounds (the others only help finish the
    // tile): a TICL encoder's projections at sequence 10.
    assert_eq!(launch(24, 64, 64), Some(([2, 2, 1], 4, false)));
    assert_eq!(launch(16, 32, 20), Some(([1, 1, 1], 4, false)));
    assert_eq!(launch(10, 96, 32), Some(([3, 1, 1], 4, false)));
    // GEMV range, big enough for the CUDA-core tiles, or switched off: not taken.
    assert_eq!(launch(8, 768, 256), None);
    assert_eq!(launch(2048, 2048, 4096), None);
    assert_eq!(tensor_core(&p(128, 768, 256, 1), &cuda_cores()), None);
    // An empty output (no columns, no batch) never gets a zero-block grid from it.
    assert_eq!(launch(20, 0, 5), None);
    assert_eq!(tensor_core(&p(20, 7, 5, 0), &o), None);
    // Where it is taken, no split-K workspace is planned.
    assert_eq!(split_k(&p(128, 256, 1024, 1), &o), (1, 1024));
}

#[test]
fn split_k_fills_the_device_only_when_tiles_cannot() {
    let o = cuda_cores();
    // GPT-2's MLP down-projection: 8 tiles, k 1024 -> 16 chunks of 64.
    assert_eq!(split_k(&p(128, 256, 1024, 1), &o), (16, 64));
    // k too short, or enough tiles, or a GEMV: no split.
    assert_eq!(split_k(&p(128, 256, 64, 1), &o).0, 1);
    assert_eq!(split_k(&p(1024, 1024, 4096, 1), &o).0, 1);
    assert_eq!(split_k(&p(4, 256, 4096, 1), &o).0, 1);
    // Chunks are multiples of the k step and cover k exactly once.
    for k in [128, 129, 700, 1000, 4097] {
        let (splits, chunk) = split_k(&p(70, 90, k, 3), &o);
        assert_eq!(chunk % kernels_gpu::abi::GEMM_BK, 0);
        assert!(splits * chunk >= k && (splits - 1) * chunk < k, "k {k}: {splits} x {chunk}");
    }
}

#[test]
fn the_precision_picks_the_tile_entries_and_is_recorded_in_the_plan() {
    use crate::plan::{Precision, Step};
    use crate::tensor_info::{DType, Dim};
    use crate::{ConstTensor, Graph};
    // A tile GEMM (4096 x 256 x 1024, B n-contiguous), a transB one (k-contiguous) and a small-m
    // one (24 rows: the packed tensor-core kernel, exact in every precision).
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(4096), Dim::Known(256)]);
    let w = g.initializer("w", ConstTensor::from_f32(&[256, 1024], &vec![0.5; 256 * 1024]).unwrap());
    let y = g.matmul(x, w);
    let wt = g.initializer("wt", ConstTensor::from_f32(&[1024, 256], &vec![0.5; 256 * 1024]).unwrap());
    let attrs = crate::op::Gemm { alpha: 1.0, beta: 0.0, trans_a: false, trans_b: true };
    let yt = g.push(Op::Gemm(attrs), &[x, wt], 1)[0];
    let x2 = g.input("x2", DType::F32, vec![Dim::Known(24), Dim::Known(256)]);
    let z = g.matmul(x2, w);
    for v in [y, yt, z] {
        g.output(v);
    }
    for (precision, suffix) in [
        (Precision::Exact, "f32"),
        (Precision::Tf32, "tf32"),
        (Precision::F16, "f16"),
        (Precision::Bf16, "bf16"),
    ] {
        // Without wgmma the `mma.sync` tiles (B read as stored), with it (the Hopper default)
        // their `wgmma` twins on the packed weights; f16 and bf16 have no `wgmma` entries and
        // keep the tiles.
        let tiles = [format!("gemm_tc128_n_{suffix}"), format!("gemm_tc128_k_{suffix}")];
        let wg = if precision.has_wgmma() {
            [format!("gemm_wg128_{suffix}"), format!("gemm_wg128_{suffix}")]
        } else {
            tiles.clone()
        };
        for (wgmma_gemm, want) in [(false, tiles), (true, wg)] {
            let o = PlanOptions { precision, wgmma_gemm, ..PlanOptions::default() };
            let plan = crate::plan::compile(&g, &crate::Binding::new(), &o).unwrap();
            assert_eq!(plan.precision, precision);
            let kernels: Vec<&str> = (plan.steps.iter())
                .filter_map(|s| match s {
                    Step::Kernel { kernel, .. } if kernel.symbol().starts_with("gemm") => {
                        Some(kernel.symbol())
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(kernels[..2], want, "{plan}");
            assert!(kernels[2].starts_with("gemm_tc_packed") && kernels[2].ends_with("_f32"), "{plan}");
        }
    }
}

#[test]
fn a_wgmma_gemm_reads_its_weight_packed_transposed_and_split() {
    use crate::plan::{Arg, Precision, Step};
    use crate::tensor_info::{DType, Dim};
    use crate::{ConstTensor, Graph};
    use kernels_gpu::abi::{GemmTile, KernelId, gemm_wg_packed_len};
    // x [4096, 252] · w [252, 1000]: 128 x 128 tiles. The same weight read by a second MatMul
    // is packed once; a B that is an input is not packed.
    let (k, n) = (252usize, 1000usize);
    let data: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(4096), Dim::Known(k)]);
    let w = g.initializer("w", ConstTensor::from_f32(&[k, n], &data).unwrap());
    let y = g.matmul(x, w);
    let x2 = g.input("x2", DType::F32, vec![Dim::Known(4096), Dim::Known(k)]);
    let y2 = g.matmul(x2, w);
    let b = g.input("b", DType::F32, vec![Dim::Known(k), Dim::Known(n)]);
    let y3 = g.matmul(x, b);
    for v in [y, y2, y3] {
        g.output(v);
    }
    for (precision, kernel, exact) in
        [(Precision::Exact, KernelId::GemmWg128F32, true), (Precision::Tf32, KernelId::GemmWg128Tf32, false)]
    {
        let o = PlanOptions { precision, ..PlanOptions::default() };
        let plan = crate::plan::compile(&g, &crate::Binding::new(), &o).unwrap();
        let launches: Vec<_> = (plan.steps.iter())
            .filter_map(|s| match s {
                Step::Kernel { kernel, args, shared_bytes, block, .. } => {
                    Some((*kernel, args.clone(), *shared_bytes, *block))
                }
                _ => None,
            })
            .collect();
        assert_eq!(launches.len(), 3, "{plan}");
        let Arg::Value(packed) = launches[0].1[3] else { panic!("{plan}") };
        for (kern, args, shared, block) in &launches[..2] {
            assert_eq!(*kern, kernel, "{plan}");
            assert_eq!(args[3], Arg::Value(packed), "{plan}");
            assert_eq!((*shared, *block), (GemmTile::LARGE.wg_shared_bytes(exact), [256, 1, 1]), "{plan}");
            let Arg::Params(p) = &args[0] else { panic!("{plan}") };
            use kernels_gpu::abi::GemmParams as P;
            let field = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap());
            let strides =
                [std::mem::offset_of!(P, b_rs), std::mem::offset_of!(P, b_cs), std::mem::offset_of!(P, b_bs)];
            assert_eq!(strides.map(field), [1, 252, 0], "{plan}");
        }
        let unpacked = if exact { KernelId::GemmTc128NF32 } else { KernelId::GemmTc128NTf32 };
        assert_eq!(launches[2].0, unpacked, "{plan}");
        let c = &plan.constants[&packed];
        assert_eq!(c.dims, [gemm_wg_packed_len(k as u32, n as u32, exact) as usize], "{plan}");
        let bits: Vec<u32> = c.bytes.as_chunks::<4>().0.iter().map(|b| u32::from_le_bytes(*b)).collect();
        let plane = n * k;
        for (j, kk) in [(0, 0), (999, 251), (517, 100)] {
            let v = data[kk * n + j];
            let (big, small) = crate::plan::tc_pack::split(v);
            assert_eq!(bits[j * k + kk], if exact { big } else { crate::plan::tc_pack::tf32(v) });
            if exact {
                assert_eq!(bits[plane + j * k + kk], small);
            }
        }
    }
}

#[test]
fn a_short_reduction_with_few_rows_runs_on_the_tiled_kernel_not_the_gemv() {
    use crate::plan::Step;
    use crate::tensor_info::{DType, Dim};
    assert!(gemv(&p(4, 4096, 256, 1)) && !gemv(&p(4, 4096, 5, 8)) && !gemv(&p(9, 64, 256, 1)));
    // Mamba2's inter-chunk state pass: [8, 4, 5] x [8, 5, 4096].
    let mut g = crate::Graph::new();
    let known = |d: &[usize]| d.iter().map(|&n| Dim::Known(n)).collect::<Vec<_>>();
    let a = g.input("a", DType::F32, known(&[8, 4, 5]));
    let b = g.input("b", DType::F32, known(&[8, 5, 4096]));
    let y = g.matmul(a, b);
    g.output(y);
    let plan = crate::plan::compile(&g, &crate::Binding::new(), &PlanOptions::default()).unwrap();
    let kernels: Vec<&str> = (plan.steps.iter())
        .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(kernel.symbol()) } else { None })
        .collect();
    assert_eq!(kernels, ["gemm_f32"], "{plan}");
}

#[test]
fn a_batch_of_single_rows_read_through_a_transpose_folds_into_one_gemm() {
    // torch's nn.MultiheadAttention (batch first) projects x [1, seq, d] transposed to
    // [seq, 1, d]: A rows of one element each, `d` apart across the batch, B a shared weight.
    let (seq, d, n) = (2048usize, 32usize, 96usize);
    let a = operand_view(&[seq, 1, d], Some(&[d as u64, (seq * d) as u64, 1]), true);
    let b = operand_view(&[d, n], None, false);
    let q = matmul_params(a, b, None).unwrap();
    assert_eq!((q.m, q.n, q.k, q.batch), (seq as u32, n as u32, d as u32, 1));
    assert_eq!((q.a_rs, q.a_cs), (d as u64, 1));
    // Two rows per batch entry keep their own stride: no fold (rows seq * d apart, batches d).
    let a = operand_view(&[seq, 2, d], Some(&[d as u64, (seq * d) as u64, 1]), true);
    let q = matmul_params(a, operand_view(&[d, n], None, false), None).unwrap();
    assert_eq!((q.m, q.batch, q.a_rs, q.a_bs), (2, seq as u32, (seq * d) as u64, d as u64));
}

#[test]
fn operand_views_reshaped_and_batches_of_two_levels() {
    use crate::plan::movement::reshape_strides;
    // Merging nested dims, splitting one, size-1 dims anywhere; a merge across a gap needs a copy.
    assert_eq!(reshape_strides(&[2, 3, 4], &[12, 4, 1], &[6, 4]), Some(vec![4, 1]));
    assert_eq!(reshape_strides(&[2, 8, 4], &[4, 8, 1], &[2, 2, 4, 4]), Some(vec![4, 32, 8, 1]));
    let v = reshape_strides(&[3, 1, 5], &[5, 99, 1], &[1, 15, 1]).unwrap();
    assert_eq!(v[1], 1, "size-1 dims take any stride: {v:?}");
    assert_eq!(reshape_strides(&[2, 3, 4], &[4, 8, 1], &[6, 4]), None);
    assert_eq!(reshape_strides(&[2, 3], &[3, 1], &[7]), None);
    // Mamba2's `bclhn,bcshn->bclsh`: A = C [b, c, l, h, n] read as [b, c, h, l, n]: the batch
    // (b c) outside, the heads inside, rows h n apart; the result [b, c, h, l, s] written
    // through the transpose to [b, c, l, s, h].
    let (b, c, l, h, n) = (2usize, 4usize, 64usize, 8usize, 16usize);
    let src = [(c * l * h * n) as u64, (l * h * n) as u64, (h * n) as u64, n as u64, 1];
    let view = [src[0], src[1], src[3], src[2], src[4]];
    let dims = [b, c, h, l, n];
    let bt = [src[0], src[1], src[3], 1, src[2]];
    let y = output_strides(&[b, c, h, l, l], &[0, 1, 3, 4, 2]);
    let q = matmul_params(
        operand_view(&dims, Some(&view), true),
        operand_view(&[b, c, h, n, l], Some(&bt), false),
        Some(&y),
    )
    .unwrap();
    assert_eq!(
        (q.m, q.n, q.k, q.batch, q.batch_inner),
        (l as u32, l as u32, n as u32, (b * c * h) as u32, h as u32)
    );
    assert_eq!((q.a_bs, q.a_bs2, q.a_rs, q.a_cs), (src[1], src[3], src[2], 1));
    assert_eq!((q.y_bs, q.y_bs2, q.y_rs, q.y_cs), ((l * l * h) as u64, 1, (l * h) as u64, h as u64));
    // Matrix (o, i) of the batch at o * a_bs + i * a_bs2, and so for Y.
    assert_eq!((q.a_at(h as u64 + 3), q.y_at(h as u64 + 3)), (src[1] + 3 * src[3], (l * l * h) as u64 + 3));
    assert_eq!(q.y_offset(0, 2, 5), (2 * l * h + 5 * h) as u64);
    // Three levels do not walk.
    let a = operand_view(&[2, 3, 5, 4, 4], Some(&[20, 160, 4, 40, 1]), true);
    assert!(matmul_params(a, operand_view(&[2, 3, 5, 4, 4], None, false), None).is_err());
}

/// An f16 / bf16 model's GEMMs take the precision of its type without `wgmma`
/// (`PlanOptions::narrow_gemms`): the plan records it and names the tiles' `_f16` / `_bf16`
/// entries; a chosen precision, the switch off, `wgmma` GEMMs (exact: as fast, more accurate),
/// or a GEMM of f32 operands keep the plan as it was.
#[test]
fn a_narrow_models_gemms_multiply_in_its_type() {
    use crate::plan::{Precision, Step};
    use crate::tensor_info::{DType, Dim};
    use crate::{ConstTensor, Graph};
    // x [4096, 256] · w [256, 1024] in `dtype`; `wide`: both cast to f32 first.
    let model = |dtype: DType, wide: bool| {
        let mut g = Graph::new();
        let x = g.input("x", dtype, vec![Dim::Known(4096), Dim::Known(256)]);
        let data: Vec<f64> = (0..256 * 1024).map(|i| ((i % 7) as f64 - 3.0) / 8.0).collect();
        let w = g.initializer("w", ConstTensor::from_f64s(dtype, &[256, 1024], &data).unwrap());
        let (x, w) = if wide {
            let up = |g: &mut Graph, v| g.op1(Op::Cast(crate::op::Cast::to(DType::F32)), &[v]);
            (up(&mut g, x), up(&mut g, w))
        } else {
            (x, w)
        };
        let y = g.matmul(x, w);
        g.output(y);
        g
    };
    let gemm_kernels = |plan: &crate::plan::Plan| -> Vec<&'static str> {
        (plan.steps.iter())
            .filter_map(|s| match s {
                Step::Kernel { kernel, .. } if kernel.symbol().starts_with("gemm") => Some(kernel.symbol()),
                _ => None,
            })
            .collect()
    };
    let tiles = PlanOptions { wgmma_gemm: false, ..PlanOptions::default() };
    for (dtype, precision, suffix) in
        [(DType::F16, Precision::F16, "_f16"), (DType::BF16, Precision::Bf16, "_bf16")]
    {
        let plan = crate::plan::compile(&model(dtype, false), &crate::Binding::new(), &tiles).unwrap();
        assert_eq!(plan.precision, precision, "{plan}");
        let kernels = gemm_kernels(&plan);
        assert!(
            kernels.len() == 1 && kernels[0].starts_with("gemm_tc128") && kernels[0].ends_with(suffix),
            "{plan}"
        );
        assert!(
            plan.lifted.iter().any(|l| l.starts_with(&format!("GEMMs in {precision}"))),
            "{:?}",
            plan.lifted
        );
        // Switched off, or another precision chosen: as asked.
        for (o, want) in [
            (PlanOptions { narrow_gemms: false, ..tiles }, Precision::Exact),
            (PlanOptions { precision: Precision::Tf32, ..tiles }, Precision::Tf32),
            (PlanOptions::default(), Precision::Exact),
        ] {
            let plan = crate::plan::compile(&model(dtype, false), &crate::Binding::new(), &o).unwrap();
            assert_eq!(plan.precision, want, "{plan}");
        }
        // The operands cast up to f32 first: the model multiplies f32.
        let plan = crate::plan::compile(&model(dtype, true), &crate::Binding::new(), &tiles).unwrap();
        assert_eq!(plan.precision, Precision::Exact, "{plan}");
    }
}

#[test]
fn a_transpose_read_by_several_matmuls_is_a_view_only_if_all_walk_it() {
    // RecurrentGemma's block-diagonal gates: x (B·L, H, w) permuted to (H, B·L, w), read by two
    // batched MatMuls; a third, elementwise reader makes the transpose a copy again.
    use crate::constant::ConstTensor;
    use crate::graph::Graph;
    use crate::op::{Op, Transpose};
    use crate::tensor_info::{Binding, DType};
    for elementwise_reader in [false, true] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [12usize, 2, 4]);
        let x = g.op1(Op::Relu, &[x]);
        let t = g.op1(Op::Transpose(Transpose { perm: Some(vec![1, 0, 2]) }), &[x]);
        for name in ["w1", "w2"] {
            let w = g.initializer(name, ConstTensor::from_f32(&[2, 4, 4], &[0.5; 32]).unwrap());
            let y = g.op1(Op::MatMul, &[t, w]);
            g.output(y);
        }
        if elementwise_reader {
            let z = g.op1(Op::Neg, &[t]);
            g.output(z);
        }
        let plan = crate::plan::compile(&g, &Binding::new(), &PlanOptions::default()).unwrap().to_string();
        let steps = |k: &str| plan.lines().filter(|l| l.starts_with('#') && l.contains(k)).count();
        assert_eq!(steps("transpose_f32"), elementwise_reader as usize, "{plan}");
        assert_eq!(steps("MatMul"), 2, "{plan}");
    }
}

#[test]
fn a_result_is_written_through_its_transpose_however_many_read_the_transpose() {
    // torch 2.11's Llama rotary table: `freqs = (inv_freq (1, 4, 1) @ positions (1, 1, 16))`,
    // transposed, then `cat(freqs, freqs)`: the transpose's output read twice by one Concat. The
    // GEMM writes the transposed layout (no transpose step) or a plain one a transpose step then
    // moves: never both (session 42: both, so the table was transposed twice on the GPU).
    use crate::constant::ConstTensor;
    use crate::graph::Graph;
    use crate::op::{Concat, Op, Transpose};
    use crate::plan::Step;
    use crate::tensor_info::{Binding, DType};
    use kernels_gpu::abi::GemmParams as P;
    for matmul_reader in [false, true] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [1usize, 1, 16]);
        let x = g.op1(Op::Relu, &[x]);
        let f =
            g.initializer("inv_freq", ConstTensor::from_f32(&[1, 4, 1], &[1.0, 0.1, 0.01, 0.001]).unwrap());
        let y = g.op1(Op::MatMul, &[f, x]);
        let t = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 2, 1]) }), &[y]);
        let c = g.op1(Op::Concat(Concat { axis: -1 }), &[t, t]);
        g.output(c);
        if matmul_reader {
            // The transpose is also a MatMul operand: it reads the result as written.
            let w = g.initializer("w", ConstTensor::from_f32(&[4, 3], &[0.5; 12]).unwrap());
            let z = g.op1(Op::MatMul, &[t, w]);
            g.output(z);
        }
        let plan = crate::plan::compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let transposes = text.lines().filter(|l| l.starts_with('#') && l.contains("transpose_f32")).count();
        let matmul = |s: &&Step| matches!(s, Step::Kernel { label, .. } if label.starts_with("MatMul"));
        let Some(Step::Kernel { args, .. }) = plan.steps.iter().find(matmul) else { panic!("{text}") };
        let Arg::Params(p) = &args[0] else { panic!("{text}") };
        let field = |at: usize| u64::from_le_bytes(p[at..at + 8].try_into().unwrap());
        let written_through =
            (field(std::mem::offset_of!(P, y_rs)), field(std::mem::offset_of!(P, y_cs))) != (0, 0);
        assert_eq!(transposes + written_through as usize, 1, "{text}");
    }
    // Of weights alone (positions a constant `Range`), the table is hoisted whole: the transpose
    // the GEMM writes through is a view, and the Concat reading it runs once too.
    let mut g = Graph::new();
    let f = g.initializer("inv_freq", ConstTensor::from_f32(&[1, 4, 1], &[1.0, 0.1, 0.01, 0.001]).unwrap());
    let pos: Vec<f32> = (0..16).map(|i| i as f32).collect();
    let x = g.initializer("positions", ConstTensor::from_f32(&[1, 1, 16], &pos).unwrap());
    let y = g.op1(Op::MatMul, &[f, x]);
    let t = g.op1(Op::Transpose(Transpose { perm: Some(vec![0, 2, 1]) }), &[y]);
    let c = g.op1(Op::Concat(Concat { axis: -1 }), &[t, t]);
    let input = g.input("h", DType::F32, [1usize, 16, 8]);
    let z = g.op1(Op::Mul, &[input, c]);
    g.output(z);
    let text = crate::plan::compile(&g, &Binding::new(), &PlanOptions::default()).unwrap().to_string();
    let steps: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert!(steps.iter().all(|l| l.contains(" once ") != l.contains("Mul mul_f32")), "{text}");
    assert!(!text.contains("transpose_f32"), "{text}");
}

#[test]
fn a_short_k_over_many_row_tiles_keeps_b_resident() {
    // Off by default (slower on the GNN, session 48).
    let small = GemmTile::SMALL;
    assert_eq!(resident_rows(&p(800_000, 64, 128, 1), small, true, true, &PlanOptions::default()), None);
    let o = PlanOptions { resident_b: true, ..PlanOptions::default() };
    let blocks = 2 * o.sm_count;
    // The GNN's edge GEMM (800k x 128 -> 64, A gathered): two blocks a multiprocessor.
    assert_eq!(resident_rows(&p(800_000, 64, 128, 1), small, true, true, &o), Some(blocks));
    // k of four tiles at most (five: B would not fit beside the stages twice a multiprocessor).
    assert_eq!(resident_rows(&p(800_000, 64, 100, 1), small, true, true, &o), Some(blocks));
    assert_eq!(resident_rows(&p(800_000, 64, 129, 1), small, true, true, &o), None);
    // Fewer than four row tiles a block: the plain entry.
    let enough = 4 * blocks * 64;
    assert_eq!(resident_rows(&p(enough, 64, 128, 1), small, true, true, &o), Some(blocks));
    assert_eq!(resident_rows(&p(enough - 64, 64, 128, 1), small, true, true, &o), None);
    // Two column tiles share the device's blocks.
    assert_eq!(resident_rows(&p(800_000, 128, 128, 1), small, true, true, &o), Some(blocks / 2));
    // TF32, A not as segments (or with a program epilogue), the 128 x 128 tile, a batch, split-K:
    // not taken.
    assert_eq!(resident_rows(&p(800_000, 64, 128, 1), small, false, true, &o), None);
    assert_eq!(resident_rows(&p(800_000, 64, 128, 1), small, true, false, &o), None);
    assert_eq!(resident_rows(&p(800_000, 64, 128, 1), GemmTile::LARGE, true, true, &o), None);
    assert_eq!(resident_rows(&p(800_000, 64, 128, 2), small, true, true, &o), None);
    let split = GemmParams { splits: 2, ..p(800_000, 64, 128, 1) };
    assert_eq!(resident_rows(&split, small, true, true, &o), None);
}
