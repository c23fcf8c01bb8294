//! Plan compilation tests: GEMM lowering of a small MLP, MLP chains, unsupported-node listing,
//! fusion boundaries.

use super::*;
use crate::ConstTensor;
use crate::op::{Gemm, Op};
use crate::tensor_info::Dim;

fn mlp() -> Graph {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Symbol("batch".into()), Dim::Known(64)]);
    let mut h = x;
    for (i, (k, n)) in [(64, 256), (256, 256), (256, 1)].into_iter().enumerate() {
        let w = g.initializer(&format!("w{i}"), ConstTensor::from_f32(&[k, n], &vec![0.01; k * n]).unwrap());
        let b = g.initializer(&format!("b{i}"), ConstTensor::from_f32(&[n], &vec![0.1; n]).unwrap());
        let y = g.push(Op::Gemm(Gemm::default()), &[h, w, b], 1)[0];
        h = if i == 2 { g.sigmoid(y) } else { g.relu(y) };
    }
    g.output(h);
    g
}

#[test]
fn an_mlp_compiles_to_one_cluster_launch_on_hopper() {
    for batch in 1..=4 {
        let plan = compile(&mlp(), &Binding::new().with("batch", batch), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        assert_eq!(plan.steps.len(), 1, "{text}");
        assert!(text.contains("MLP[Gemm+Relu, Gemm+Relu, Gemm+Sigmoid] mlp_f32"), "{text}");
        // The hidden activations stay on chip: no arena at all.
        assert_eq!(plan.memory.arena_bytes, 0, "{text}");
        assert_eq!(plan.weights.len(), 6);
    }
    // Past the kernel's row limit the layers are GEMVs again.
    let plan = compile(&mlp(), &Binding::new().with("batch", 5), &PlanOptions::default()).unwrap();
    assert_eq!(plan.steps.len(), 3, "{plan}");
}

#[test]
fn mlp_chains_break_at_values_read_elsewhere() {
    // The first hidden activation is also a graph output: layers 2 and 3 still chain.
    let mut g = mlp();
    let first = g.nodes[1].output(0).unwrap();
    g.output(first);
    let plan = compile(&g, &Binding::new().with("batch", 1), &PlanOptions::default()).unwrap();
    let text = plan.to_string();
    assert_eq!(plan.steps.len(), 2, "{text}");
    assert!(text.contains("Gemm+Relu gemv_f32") && text.contains("MLP[Gemm+Relu, Gemm+Sigmoid]"), "{text}");
}

#[test]
fn an_mlp_compiles_to_three_fused_gemv_launches() {
    let options = PlanOptions { cluster_mlp: false, ..PlanOptions::default() };
    let plan = compile(&mlp(), &Binding::new().with("batch", 1), &options).unwrap();
    let text = plan.to_string();
    assert_eq!(plan.steps.len(), 3, "{text}");
    assert!(text.contains("Gemm+Relu gemv_f32") && text.contains("Gemm+Sigmoid gemv_f32"), "{text}");
    assert_eq!(plan.weights.len(), 6);
    // Two hidden activations live in the arena, never at the same time as a third.
    assert_eq!(plan.memory.arena_bytes, 2 * 1024, "{text}");
    let big = compile(&mlp(), &Binding::new().with("batch", 512), &PlanOptions::default()).unwrap();
    assert!(big.to_string().contains("gemm_tc_packed_f32"), "larger batches take the tensor-core kernel");
    let json = serde_json::to_string(&plan).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
}

#[test]
fn every_node_without_a_kernel_is_listed() {
    let mut g = Graph::new();
    // f64 operands, which none of the kernels takes (Relu would: it has an f64 kernel).
    let x = g.input("x", DType::F64, vec![Dim::Known(4), Dim::Known(8), Dim::Known(8)]);
    let s = g.op1(Op::Mod(crate::op::Mod { fmod: true }), &[x, x]);
    let t = g.op1(Op::Det, &[s]);
    let r = g.op1(Op::Sigmoid, &[t]);
    g.output(r);
    match compile(&g, &Binding::new(), &PlanOptions::default()) {
        Err(PlanError::NoKernel { nodes }) => {
            let ops: Vec<&str> = nodes.iter().map(|(_, op, _)| *op).collect();
            assert_eq!(ops, ["Mod", "Det", "Sigmoid"]);
        }
        other => panic!("expected NoKernel, got {other:?}"),
    }
}

/// Nodes touching a dtype no GPU kernel takes (int16, uint32, float8, int4, ...) are refused by
/// name and dtype before lowering, the f32 ones beside them are not.
#[test]
fn nodes_of_dtypes_without_gpu_kernels_are_refused_naming_the_dtype() {
    let mut g = Graph::new();
    // Integer arithmetic and casts take every width and the coded types; the float kernels do not.
    let x = g.input("x", DType::I16, vec![Dim::Known(4)]);
    let y = g.op1(Op::Add, &[x, x]);
    let f = g.op1(Op::Cast(crate::op::Cast::to(DType::Coded(crate::Coded::F8E4M3FN))), &[y]);
    let back = g.op1(Op::Cast(crate::op::Cast::to(DType::F32)), &[f]);
    let r = g.op1(Op::Relu, &[back]);
    let s = g.op1(Op::Sigmoid, &[f]);
    let t = g.op1(Op::Relu, &[y]);
    g.output(r);
    g.output(s);
    g.output(t);
    match compile(&g, &Binding::new(), &PlanOptions::default()) {
        Err(e @ PlanError::NoKernel { .. }) => {
            let text = e.to_string();
            let PlanError::NoKernel { nodes } = e else { unreachable!() };
            let ops: Vec<&str> = nodes.iter().map(|(_, op, _)| *op).collect();
            assert_eq!(ops, ["Sigmoid", "Relu"], "{text}");
            assert!(
                text.contains("int16") && text.contains("float8e4m3fn") && text.contains("--device cpu"),
                "{text}"
            );
        }
        other => panic!("expected NoKernel, got {other:?}"),
    }
}

#[test]
fn without_fusion_each_activation_is_its_own_launch() {
    let o = PlanOptions { fuse_activations: false, fuse_gemm_programs: false, ..PlanOptions::default() };
    let plan = compile(&mlp(), &Binding::new().with("batch", 2), &o).unwrap();
    assert_eq!(plan.steps.len(), 6);
}

/// A three-input Max between fusable elementwise ops stays out of their program (the program
/// compiler reads two operands of a binary op): the Relu and Neg are lowered around it.
#[test]
fn a_variadic_max_is_not_fused_as_a_binary_op() {
    let mut g = Graph::new();
    let dims = vec![Dim::Known(4), Dim::Known(8)];
    let x = g.input("x", DType::F32, dims.clone());
    let a = g.input("a", DType::F32, dims.clone());
    let b = g.input("b", DType::F32, dims);
    let r = g.relu(x);
    let m = g.op1(crate::op::Op::Max, &[r, a, b]);
    let n = g.op1(crate::op::Op::Neg, &[m]);
    g.output(n);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let text = plan.to_string();
    // Relu and Neg cannot form a program across the Max: three launches at least, and the
    // Max's launch reads all three inputs.
    assert!(plan.steps.len() >= 3, "{text}");
    let max_line = text.lines().find(|l| l.contains("Max")).unwrap_or_else(|| panic!("{text}"));
    assert!(max_line.contains(&format!("{a}@input")) && max_line.contains(&format!("{b}@input")), "{text}");
}

/// The kernel and B argument of each GEMM step of `plan`.
fn gemm_b_args(plan: &Plan) -> Vec<(KernelId, ValueId)> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::Kernel { kernel, args, .. } if kernel.symbol().starts_with("gemm") => {
                let b =
                    args.iter().filter_map(|a| if let Arg::Value(v) = a { Some(*v) } else { None }).nth(1);
                Some((*kernel, b?))
            }
            _ => None,
        })
        .collect()
}

/// `Gemm(x, w, bias)` with x `[40, 45]` and w `[45, 13]` (`[13, 45]` with transB) a weight; the
/// graph, w's data as `B[k][j]`, and w.
fn gemm_with_weight(trans_b: bool) -> (Graph, Vec<Vec<f32>>, ValueId) {
    let (m, k, n) = (40, 45, 13);
    let b: Vec<Vec<f32>> =
        (0..k).map(|kk| (0..n).map(|j| ((kk * 7 + j * 3) % 11) as f32 * 0.37 - 1.3).collect()).collect();
    let (dims, data): ([usize; 2], Vec<f32>) = if trans_b {
        ([n, k], (0..n * k).map(|i| b[i % k][i / k]).collect())
    } else {
        ([k, n], b.iter().flatten().copied().collect())
    };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(m), Dim::Known(k)]);
    let w = g.initializer("w", ConstTensor::from_f32(&dims, &data).unwrap());
    let bias = g.initializer("bias", ConstTensor::from_f32(&[n], &vec![0.5; n]).unwrap());
    let y = g.push(Op::Gemm(Gemm { trans_b, ..Gemm::default() }), &[x, w, bias], 1)[0];
    g.output(y);
    (g, b, w)
}

#[test]
fn a_tensor_core_gemm_reads_its_weight_packed_and_split() {
    use kernels_gpu::abi::{gemm_tc_packed_len, gemm_tc_packed_offset};
    for trans_b in [false, true] {
        let (g, b, w) = gemm_with_weight(trans_b);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let text = plan.to_string();
        let [(kernel, packed)] = gemm_b_args(&plan)[..] else { panic!("{text}") };
        assert_eq!(kernel, KernelId::GemmTcPackedF32, "{text}");
        let len = gemm_tc_packed_len(45, 13) as usize;
        assert_eq!(len, 2 * 2 * 512);
        assert_eq!(plan.values[packed.index()].name, "w/tc-packed");
        assert_eq!(plan.values[packed.index()].dims, Some(vec![len]));
        // The packed weight replaces w on the device; the bias stays.
        assert!(!plan.constants.contains_key(&w) && !plan.weights.contains(&w), "{text}");
        assert_eq!(plan.weights.len(), 2, "{text}");
        let c = &plan.constants[&packed];
        assert_eq!((c.dtype, c.dims.clone(), c.bytes.len()), (DType::F32, vec![len], 4 * len));
        let word =
            |i: u64| u32::from_le_bytes(c.bytes[4 * i as usize..4 * i as usize + 4].try_into().unwrap());
        // Lane 5 (g 1, t 1) of column tile 1, round 1: B[40 + q][9], zero from k 45 (q = 5).
        let at = gemm_tc_packed_offset(1, 1, 2, 5);
        for q in 0..8 {
            let (big, small) = if q < 5 { tc_pack::split(b[40 + q][9]) } else { (0, 0) };
            assert_eq!((word(at + q as u64), word(at + 8 + q as u64)), (big, small), "q {q}");
        }
        // Lane 31 (g 7, t 3) of column tile 1, round 0: column 15 is past n.
        let at = gemm_tc_packed_offset(1, 0, 2, 31);
        assert!((0..16).all(|q| word(at + q) == 0));
        // Lane 0 of the first entry: B[q][0].
        assert!((0..8).all(|q| (word(q), word(8 + q)) == tc_pack::split(b[q as usize][0])));
        plan.validate().unwrap();
    }
}

#[test]
fn a_weight_two_gemms_read_alike_is_packed_once() {
    let mut g = Graph::new();
    let x1 = g.input("x1", DType::F32, vec![Dim::Known(40), Dim::Known(64)]);
    let x2 = g.input("x2", DType::F32, vec![Dim::Known(24), Dim::Known(64)]);
    let w = g.initializer("w", ConstTensor::from_f32(&[64, 32], &vec![0.25; 64 * 32]).unwrap());
    let y1 = g.matmul(x1, w);
    let y2 = g.matmul(x2, w);
    g.output(y1);
    g.output(y2);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let b = gemm_b_args(&plan);
    assert_eq!(b.len(), 2, "{plan}");
    assert!(b.iter().all(|&(k, v)| k == KernelId::GemmTcPackedF32 && v == b[0].1), "{plan}");
    assert_eq!(plan.constants.keys().copied().collect::<Vec<_>>(), [b[0].1], "{plan}");
}

#[test]
fn weights_stay_unpacked_when_b_is_an_input_batched_or_packing_is_off() {
    // Packing off: the weight itself is read.
    let (g, _, w) = gemm_with_weight(false);
    let o = PlanOptions { pack_gemm_weights: false, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &o).unwrap();
    assert_eq!(gemm_b_args(&plan), [(KernelId::GemmTcF32, w)], "{plan}");
    assert!(plan.constants.contains_key(&w) && plan.values.len() == g.values.len(), "{plan}");
    // B a graph input.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(40), Dim::Known(45)]);
    let b = g.input("b", DType::F32, vec![Dim::Known(45), Dim::Known(13)]);
    let y = g.matmul(x, b);
    g.output(y);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    assert_eq!(gemm_b_args(&plan), [(KernelId::GemmTcF32, b)], "{plan}");
    assert!(plan.constants.is_empty(), "{plan}");
    // A weight with one matrix per batch (b_bs != 0).
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(2), Dim::Known(40), Dim::Known(45)]);
    let w = g.initializer("w", ConstTensor::from_f32(&[2, 45, 13], &vec![0.5; 2 * 45 * 13]).unwrap());
    let y = g.matmul(x, w);
    g.output(y);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    assert_eq!(gemm_b_args(&plan), [(KernelId::GemmTcF32, w)], "{plan}");
}

#[test]
fn integer_arithmetic_lowers_to_int_arith_and_a_run_time_divisor_is_checked_on_the_device() {
    let mut g = Graph::new();
    let a = g.input("a", DType::I64, vec![Dim::Known(4), Dim::Known(3)]);
    let b = g.input("b", DType::I64, vec![Dim::Known(3)]);
    let two = g.const_i64("two", &[], &[2]);
    let sum = g.add(a, b);
    let neg = g.op1(Op::Neg, &[sum]);
    let half = g.div(neg, two);
    let m = g.op1(Op::Mod(crate::op::Mod { fmod: false }), &[half, two]);
    g.output(m);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let kernels: Vec<KernelId> = (plan.steps.iter())
        .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
        .collect();
    assert_eq!(kernels, [KernelId::IntArith; 4], "{plan}");
    // A constant divisor without zeros needs no check.
    assert!(plan.checks.is_empty(), "{plan}");
    // A run-time divisor may hold a zero: its kernel takes the status word, and the plan's check
    // names the node for the error the session reports.
    let mut g = Graph::new();
    let a = g.input("a", DType::I32, vec![Dim::Known(4)]);
    let b = g.input("b", DType::I32, vec![Dim::Known(4)]);
    let q = g.div(a, b);
    g.output(q);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let [Step::Kernel { kernel: KernelId::IntArith, args, .. }] = plan.steps.as_slice() else {
        panic!("{plan}")
    };
    assert!(args.iter().any(|a| matches!(a, Arg::Status)), "{plan}");
    let [check] = plan.checks.as_slice() else { panic!("{:?}", plan.checks) };
    assert_eq!((check.node.as_str(), check.op.as_str()), (g.nodes[0].name.as_str(), "Div"));
    assert!(check.detail.contains("division by zero"), "{}", check.detail);
    // The code the kernel raises the word to is the one the check holds.
    let Some(Arg::Params(bytes)) = args.first() else { panic!("{plan}") };
    let at = std::mem::offset_of!(kernels_gpu::abi::CompareParams, status_code);
    let code = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!((code, check.code), (check.code, logic::status_code(NodeId(0))));
}

#[test]
fn a_reshaped_graph_input_is_read_in_place() {
    // GPT-2's `input_ids.view(-1, seq)` before the embedding Gather: the kernel reads the input's
    // own buffer (no copy step, no slot), through a chain of views too (of other shapes: a view
    // to the same shape is no op at all).
    let mut g = Graph::new();
    let ids = g.input("ids", DType::I64, [2usize, 8]);
    let s1 = g.const_i64("s1", &[2], &[-1, 16]);
    let v1 = g.reshape(ids, s1);
    let s2 = g.const_i64("s2", &[1], &[16]);
    let v2 = g.reshape(v1, s2);
    let table = g.initializer("table", ConstTensor::from_f32(&[50, 8], &vec![0.5; 400]).unwrap());
    let e = g.op1(Op::Gather(crate::op::Gather { axis: 0 }), &[table, v2]);
    g.output(e);
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let text = plan.to_string();
    assert_eq!(plan.steps.len(), 1, "{text}");
    assert!(text.contains(&format!("{v2}@input")), "{text}");
    assert_eq!(plan.memory.home(v2), ids);
    assert!(plan.memory.slots[v1.index()].is_none() && plan.memory.slots[v2.index()].is_none(), "{text}");
    // A result that could overwrite its operand in place never takes a graph input's buffer.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [4usize]);
    let s = g.const_i64("s", &[2], &[2, 2]);
    let v = g.reshape(x, s);
    let r = g.relu(v);
    let n = g.op1(Op::Neg, &[r]);
    let y = g.op1(Op::Exp, &[n]);
    g.output(y);
    let options = PlanOptions { fuse_elementwise: false, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &options).unwrap();
    assert!(plan.memory.slots[v.index()].is_none(), "{plan}");
    assert!(plan.memory.slots[r.index()].is_some(), "{plan}");
    assert!(!plan.memory.in_place.iter().any(|&(src, _)| src == v), "{plan}");
}

#[test]
fn a_tile_gemm_takes_the_program_entrys_operands_with_the_identity_program() {
    // x [4096, 256] · w [256, 1024]: the 128 x 128 tile kernel, its weight unpacked, launched
    // with `[p, e, a, b, c, x1, x2, x3, y]`: e the identity program, C and x1..x3 null.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(4096), Dim::Known(256)]);
    let w = g.initializer("w", ConstTensor::from_f32(&[256, 1024], &vec![0.5; 256 * 1024]).unwrap());
    let y = g.matmul(x, w);
    g.output(y);
    // (The `mma.sync` tiles: wgmma, the Hopper default, reads the weight packed.)
    let o = PlanOptions { wgmma_gemm: false, ..PlanOptions::default() };
    let plan = compile(&g, &Binding::new(), &o).unwrap();
    assert_eq!(gemm_b_args(&plan), [(KernelId::GemmTc128NF32, w)], "{plan}");
    let Some(Step::Kernel { args, .. }) = plan.steps.first() else { panic!("{plan}") };
    let identity = kernels_gpu::abi::EwProgramParams {
        n_inputs: 1,
        out_reg: kernels_gpu::abi::ew_src::INPUT0,
        ..Default::default()
    };
    assert_eq!(args.len(), 9, "{plan}");
    assert_eq!(args[1], Arg::Params(super::lower::bytes_of(&identity)), "{plan}");
    assert_eq!(args[4..8], [Arg::Null, Arg::Null, Arg::Null, Arg::Null], "{plan}");
    assert_eq!(args[8], Arg::Value(y), "{plan}");
}

#[test]
fn a_tile_gemm_split_over_k_reduces_its_partials_in_a_second_launch() {
    // GPT-2's MLP down-projection at batch 16: 2048 x 1024 by a [1024, 256] weight, 128 small
    // tiles: three k chunks into a planned workspace, then the reduction over columns and rows.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(2048), Dim::Known(1024)]);
    let w = g.initializer("w", ConstTensor::from_f32(&[1024, 256], &vec![0.5; 1024 * 256]).unwrap());
    let y = g.matmul(x, w);
    g.output(y);
    for wgmma_gemm in [false, true] {
        // (The wgmma tiles split only when asked: split_k_wgmma.)
        let o = PlanOptions { wgmma_gemm, split_k_wgmma: true, ..PlanOptions::default() };
        let plan = compile(&g, &Binding::new(), &o).unwrap();
        let tile = if wgmma_gemm { KernelId::GemmWg64F32 } else { KernelId::GemmTc64NF32 };
        split_k_launches(&plan, tile);
    }
    // By default the wgmma tile runs unsplit: one launch, no workspace in the arena.
    let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
    let launches: Vec<_> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Kernel { kernel, grid, .. } => Some((*kernel, *grid)),
            _ => None,
        })
        .collect();
    assert_eq!(launches, [(KernelId::GemmWg64F32, [4, 32, 1])], "{plan}");
    assert_eq!(plan.memory.arena_bytes, 0, "{plan}");
}

/// The split-K launches of `a_tile_gemm_split_over_k_reduces_its_partials_in_a_second_launch`'s
/// plan with the tile entry `tile`.
fn split_k_launches(plan: &Plan, tile: KernelId) {
    let text = plan.to_string();
    let kernels: Vec<_> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Kernel { kernel, grid, args, .. } => Some((*kernel, *grid, args.clone())),
            _ => None,
        })
        .collect();
    let [(k0, g0, a0), (k1, g1, a1)] = &kernels[..] else { panic!("{text}") };
    assert_eq!((*k0, *g0), (tile, [4, 32, 3]), "{text}");
    assert_eq!((*k1, *g1), (KernelId::GemmReduceF32, [1, 2048, 1]), "{text}");
    // The partials' launch writes the workspace the reduction reads.
    let (Some(Arg::Value(ws)), Some(Arg::Value(read))) = (a0.last(), a1.get(2)) else { panic!("{text}") };
    assert_eq!(ws, read, "{text}");
    assert_eq!(plan.values[ws.index()].dims, Some(vec![3 * 2048 * 256]), "{text}");
}

/// GPT-2's spelled-out GELU-tanh after a GEMM, in f16 (constants rounded to f16): widened, it
/// still runs as the built-in GeluTanh epilogue (within f16's rounding); the same program in f32
/// with those rounded constants is no GeluTanh at f32's tolerance.
#[test]
fn an_f16_gelu_tanh_runs_as_the_built_in_activation_once_widened() {
    let gelu = |dtype: DType| {
        let mut g = Graph::new();
        let x = g.input("x", dtype, vec![Dim::Known(64), Dim::Known(256)]);
        let w: Vec<f64> = (0..256 * 256).map(|i| ((i % 97) as f64 - 48.0) / 512.0).collect();
        let w = g.initializer("w", crate::ConstTensor::from_f64s(dtype, &[256, 256], &w).unwrap());
        let k = |g: &mut Graph, name: &str, v: f64| {
            // The f16 value either way (as an f16 export carries it).
            let v = half::f16::from_f64(v).to_f64();
            g.initializer(name, crate::ConstTensor::from_f64s(dtype, &[], &[v]).unwrap())
        };
        let (c0, c1, c2, c3) = (
            k(&mut g, "c0", 0.044715),
            k(&mut g, "c1", 0.7978845608),
            k(&mut g, "c2", 1.0),
            k(&mut g, "c3", 0.5),
        );
        let h = g.op1(Op::MatMul, &[x, w]);
        let h2 = g.op1(Op::Mul, &[h, h]);
        let h3 = g.op1(Op::Mul, &[h2, h]);
        let t = g.op1(Op::Mul, &[h3, c0]);
        let u = g.op1(Op::Add, &[h, t]);
        let v = g.op1(Op::Mul, &[u, c1]);
        let th = g.op1(Op::Tanh, &[v]);
        let a = g.op1(Op::Add, &[th, c2]);
        let b = g.op1(Op::Mul, &[h, c3]);
        let y = g.op1(Op::Mul, &[b, a]);
        g.output(y);
        compile(&g, &Binding::new(), &PlanOptions::default()).unwrap().to_string()
    };
    let narrow = gelu(DType::F16);
    assert!(narrow.contains("GeluTanh"), "{narrow}");
    let wide = gelu(DType::F32);
    assert!(!wide.contains("GeluTanh"), "{wide}");
}

/// A scatter whose data is computed in the plan and read nowhere else writes its updates over
/// that data in place: no copy of the data to the output; a graph input's data is still copied.
#[test]
fn a_scatter_updates_computed_data_in_place() {
    use crate::op::{ScatterNd, ScatterReduction};
    for computed in [false, true] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, vec![Dim::Known(100), Dim::Known(64)]);
        let i = g.input("i", DType::I64, vec![Dim::Known(400), Dim::Known(1)]);
        let u = g.input("u", DType::F32, vec![Dim::Known(400), Dim::Known(64)]);
        let data = if computed { g.relu(x) } else { x };
        let y = g.op1(Op::ScatterNd(ScatterNd { reduction: ScatterReduction::Add }), &[data, i, u]);
        let y = g.sigmoid(y);
        g.output(y);
        let plan = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let copies = plan.steps.iter().filter(|s| matches!(s, Step::Copy { .. })).count();
        assert_eq!(copies, usize::from(!computed), "{plan}");
        if computed {
            assert!(plan.memory.in_place.iter().any(|&(s, _)| s == data), "{plan}");
        }
    }
}
