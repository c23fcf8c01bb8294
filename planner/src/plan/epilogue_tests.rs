//! Tests of the GEMM-epilogue fusion (`epilogue.rs`): which launches disappear, the kernels the
//! fused GEMMs take (tiled, split-K, GEMV), the fallbacks, and what the memory plan does with the
//! fused node (the GEMM result gets no slot; the output overwrites a dying same-size program input
//! but never a broadcast one or a GEMM operand).

use kernels_gpu::abi::KernelId;

use super::{Arg, Plan, PlanOptions, Step, compile};
use crate::ConstTensor;
use crate::graph::{Graph, ValueId};
use crate::op::{Gemm, Op};
use crate::tensor_info::{Binding, DType, Dim};

fn known(dims: &[usize]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Known(d)).collect()
}

fn weight(g: &mut Graph, name: &str, dims: &[usize]) -> ValueId {
    let n: usize = dims.iter().product();
    let data: Vec<f32> = (0..n).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect();
    g.initializer(name, ConstTensor::from_f32(dims, &data).unwrap())
}

/// The plan of `g` with the CUDA-core GEMM kernels (the tensor-core one has its own test).
fn plan(g: &Graph, fuse: bool) -> Plan {
    let o = PlanOptions { fuse_gemm_programs: fuse, tensor_core_gemm: false, ..PlanOptions::default() };
    let p = compile(g, &Binding::new(), &o).unwrap();
    p.validate().unwrap();
    p
}

fn kernels(p: &Plan) -> Vec<KernelId> {
    p.steps
        .iter()
        .filter_map(|s| if let Step::Kernel { kernel, .. } = s { Some(*kernel) } else { None })
        .collect()
}

fn value(p: &Plan, g: &Graph, v: ValueId) -> Option<ValueId> {
    let name = &g.values[v.index()].name;
    p.values.iter().position(|pv| &pv.name == name).map(|i| ValueId(i as u32))
}

/// `y = x @ w + r` with x `[m, k]`, w `[k, n]`, r `[m, n]` graph inputs; returns (graph, h).
fn residual(m: usize, k: usize, n: usize) -> (Graph, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[m, k]));
    let r = g.input("r", DType::F32, known(&[m, n]));
    let w = weight(&mut g, "w", &[k, n]);
    let h = g.matmul(x, w);
    let y = g.add(h, r);
    g.output(y);
    (g, h)
}

#[test]
fn a_residual_add_runs_in_each_gemm_kernels_epilogue() {
    for (m, k, n, want) in [
        (64, 64, 96, vec![KernelId::GemmProgramF32]),
        (4, 64, 96, vec![KernelId::GemvProgramF32]),
        (128, 1024, 256, vec![KernelId::GemmF32, KernelId::GemmReduceProgramF32]),
    ] {
        let (g, h) = residual(m, k, n);
        let unfused = plan(&g, false);
        assert_eq!(unfused.steps.len(), want.len() + 1, "{unfused}");
        let fused = plan(&g, true);
        assert_eq!(kernels(&fused), want, "{fused}");
        assert!(fused.to_string().contains("MatMul+Add"), "{fused}");
        // The GEMM result is gone: no value, no slot.
        assert!(value(&unfused, &g, h).is_some() && value(&fused, &g, h).is_none());
    }
}

#[test]
fn the_tensor_core_gemm_runs_the_program_in_its_epilogue_without_split_k() {
    for (m, k, n) in [(64, 64, 96), (128, 1024, 256)] {
        let (g, h) = residual(m, k, n);
        // Block pairs off (they are tested in `gemm`): the entries below are the single-block ones.
        let o = PlanOptions { pair_gemm: false, ..PlanOptions::default() };
        let fused = compile(&g, &Binding::new(), &o).unwrap();
        fused.validate().unwrap();
        // The weight is packed for the tensor-core kernel (`tc_pack`), unless that is off.
        assert_eq!(kernels(&fused), [KernelId::GemmTcPackedProgramF32], "{fused}");
        assert!(value(&fused, &g, h).is_none(), "{fused}");
        // GPT-2's MLP down-projection (64 tiles, k 1024) pairs its blocks where it may.
        let paired = compile(&g, &Binding::new(), &PlanOptions::default()).unwrap();
        let want =
            if k == 1024 { KernelId::GemmTcPackedProgramPairF32 } else { KernelId::GemmTcPackedProgramF32 };
        assert_eq!(kernels(&paired), [want], "{paired}");
        let unpacked = PlanOptions { pack_gemm_weights: false, ..o };
        let plain = compile(&g, &Binding::new(), &unpacked).unwrap();
        assert_eq!(kernels(&plain), [KernelId::GemmTcProgramF32], "{plain}");
        for (o, kernel) in [(o, KernelId::GemmTcPackedF32), (unpacked, KernelId::GemmTcF32)] {
            let o = PlanOptions { fuse_gemm_programs: false, ..o };
            assert_eq!(kernels(&compile(&g, &Binding::new(), &o).unwrap()), [kernel, KernelId::AddF32]);
        }
    }
}

#[test]
fn gelu_tanh_spelled_out_after_a_gemm_is_one_launch() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[16, 64]));
    let w = weight(&mut g, "w", &[64, 256]);
    let b = weight(&mut g, "b", &[256]);
    let h = g.push(Op::Gemm(Gemm::default()), &[x, w, b], 1)[0];
    let s = |g: &mut Graph, name: &str, v: f32| g.initializer(name, ConstTensor::scalar_f32(v));
    let (half, three, c, k, one) = (
        s(&mut g, "half", 0.5),
        s(&mut g, "three", 3.0),
        s(&mut g, "c", 0.044715),
        s(&mut g, "k", 0.7978846),
        s(&mut g, "one", 1.0),
    );
    let t1 = g.mul(h, half);
    let t2 = g.op1(Op::Pow, &[h, three]);
    let t3 = g.mul(t2, c);
    let t4 = g.add(h, t3);
    let t5 = g.mul(t4, k);
    let t6 = g.op1(Op::Tanh, &[t5]);
    let t7 = g.add(t6, one);
    let y = g.mul(t1, t7);
    g.output(y);
    assert_eq!(kernels(&plan(&g, false)), [KernelId::GemmF32, KernelId::EwProgramF32]);
    let fused = plan(&g, true);
    // Recognized as GELU-tanh: the built-in activation, no interpreted program.
    assert_eq!(kernels(&fused), [KernelId::GemmF32], "{fused}");
    assert!(fused.to_string().contains("Gemm+GeluTanh gemm_f32"), "{fused}");
    // With the tanh's constant slightly off (another function), it stays a program.
    let mut g2 = g.clone();
    let k = g2.values.iter().position(|v| v.name == "k").map(|i| ValueId(i as u32)).unwrap();
    g2.initializers.insert(k, ConstTensor::scalar_f32(0.79));
    assert_eq!(kernels(&plan(&g2, true)), [KernelId::GemmProgramF32]);
}

#[test]
fn spelled_out_activations_are_recognized_and_others_are_not() {
    use super::epilogue::{F32_ACTIVATION_TOLERANCE as F32, as_activation};
    use kernels_gpu::abi::{
        Activation, EwInstr,
        ew_src::{IMM, INPUT0},
    };
    let ins = |op: u32, dst: u32, a: u32, b: u32, imm: f32| EwInstr { op, dst, a, b, imm, aux: 0 };
    let program = |instrs: Vec<EwInstr>, out_reg| super::fuse::EwProgram { instrs, out_reg };
    // x * sigmoid(x): SiLU; sigmoid alone; 0.5 x (1 + erf(x / sqrt 2)): GELU-erf.
    let silu = program(vec![ins(18, 0, INPUT0, 0, 0.0), ins(2, 0, INPUT0, 0, 0.0)], 0);
    assert_eq!(as_activation(&silu, F32), Some(Activation::Silu));
    assert_eq!(as_activation(&program(vec![ins(18, 1, INPUT0, 0, 0.0)], 1), F32), Some(Activation::Sigmoid));
    let gelu_erf = program(
        vec![
            ins(3, 0, INPUT0, IMM, std::f32::consts::SQRT_2),
            ins(25, 0, 0, 0, 0.0),
            ins(0, 0, 0, IMM, 1.0),
            ins(2, 0, 0, INPUT0, 0.0),
            ins(2, 0, 0, IMM, 0.5),
        ],
        0,
    );
    assert_eq!(as_activation(&gelu_erf, F32), Some(Activation::GeluErf));
    // A scale, a second input, or another function (sin): not an activation.
    assert_eq!(as_activation(&program(vec![ins(2, 0, INPUT0, IMM, 2.0)], 0), F32), None);
    assert_eq!(as_activation(&program(vec![ins(0, 0, INPUT0, INPUT0 + 1, 0.0)], 0), F32), None);
    assert_eq!(as_activation(&program(vec![ins(34, 0, INPUT0, 0, 0.0)], 0), F32), None);
}

#[test]
fn a_bias_row_broadcasts_and_a_reshape_is_looked_through() {
    // GPT-2's attention output: Gemm [16, 64] -> Reshape [1, 16, 64] -> + residual, then + bias.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[16, 64]));
    let r = g.input("r", DType::F32, known(&[1, 16, 64]));
    let w = weight(&mut g, "w", &[64, 64]);
    let bias = weight(&mut g, "bias", &[64]);
    let h = g.matmul(x, w);
    let shape = g.const_i64("shape", &[3], &[1, 16, 64]);
    let v = g.reshape(h, shape);
    let a = g.add(v, r);
    let y = g.add(a, bias);
    g.output(y);
    let fused = plan(&g, true);
    assert_eq!(kernels(&fused), [KernelId::GemmProgramF32], "{fused}");
    assert!(fused.to_string().contains("MatMul+Sum[2 ops]"), "{fused}");
    assert_eq!(fused.values[fused.outputs[0].index()].dims, Some(vec![1, 16, 64]));
}

#[test]
fn an_activation_epilogue_comes_before_the_program() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[2, 32]));
    let r = g.input("r", DType::F32, known(&[2, 48]));
    let w = weight(&mut g, "w", &[32, 48]);
    let h = g.push(Op::Gemm(Gemm::default()), &[x, w], 1)[0];
    let a = g.relu(h);
    let y = g.mul(a, r);
    g.output(y);
    let fused = plan(&g, true);
    assert_eq!(kernels(&fused), [KernelId::GemvProgramF32], "{fused}");
    assert!(fused.to_string().contains("Gemm+Relu+Mul"), "{fused}");
}

#[test]
fn unusual_cases_keep_the_unfused_pair() {
    // The GEMM result is also a graph output.
    let (mut g, h) = residual(32, 32, 32);
    g.output(h);
    assert_eq!(kernels(&plan(&g, true)), [KernelId::GemmF32, KernelId::AddF32]);
    // The GEMM result has a second reader.
    let (mut g, h) = residual(32, 32, 32);
    let z = g.relu(h);
    g.output(z);
    assert!(!kernels(&plan(&g, true)).contains(&KernelId::GemmProgramF32));
    // The program's output is larger than the GEMM result (the GEMM result broadcasts).
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[1, 32]));
    let r = g.input("r", DType::F32, known(&[8, 32]));
    let w = weight(&mut g, "w", &[32, 32]);
    let h = g.matmul(x, w);
    let y = g.add(h, r);
    g.output(y);
    assert_eq!(kernels(&plan(&g, true)), [KernelId::GemvF32, KernelId::AddF32]);
    // A consumer that is not elementwise.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[16, 32]));
    let w = weight(&mut g, "w", &[32, 32]);
    let h = g.matmul(x, w);
    let y = g.softmax(h, -1);
    g.output(y);
    assert_eq!(kernels(&plan(&g, true)), [KernelId::GemmF32, KernelId::SoftmaxF32]);
    // The option off.
    let (g, _) = residual(32, 32, 32);
    assert_eq!(kernels(&plan(&g, false)), [KernelId::GemmF32, KernelId::AddF32]);
}

/// `y = softmax((a @ w) + extra)` where `extra = softmax(e)` is an arena value of dims
/// `extra_dims` that dies at the fused node (a softmax, so that no elementwise program absorbs
/// it), or `a = softmax(x)`, the A operand. Returns (graph, extra, sum).
fn memory_case(extra_dims: &[usize], extra_is_a: bool) -> (Graph, ValueId, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[32, 64]));
    let e = g.input("e", DType::F32, known(extra_dims));
    let w = weight(&mut g, "w", &[64, 64]);
    let a = g.softmax(x, -1);
    let extra = if extra_is_a { a } else { g.softmax(e, -1) };
    let h = g.matmul(a, w);
    let s = g.add(h, extra);
    let y = g.softmax(s, -1);
    g.output(y);
    (g, extra, s)
}

#[test]
fn the_fused_output_overwrites_only_a_same_size_program_input() {
    // A dying residual of the output's size: the GEMM writes over it (each element's residual is
    // read by the thread that writes that element, right before).
    let (g, extra, s) = memory_case(&[32, 64], false);
    let p = plan(&g, true);
    assert!(kernels(&p).contains(&KernelId::GemmProgramF32), "{p}");
    let (extra, s) = (value(&p, &g, extra).unwrap(), value(&p, &g, s).unwrap());
    assert!(p.memory.in_place.contains(&(extra, s)), "{:?}\n{p}", p.memory.in_place);
    assert_eq!(p.memory.slots[extra.index()].map(|b| b.offset), p.memory.slots[s.index()].map(|b| b.offset));
    // A broadcast bias row is read by every row's threads: never overwritten (it is the
    // MatMul's C now, its program empty).
    let (g, extra, s) = memory_case(&[64], false);
    let p = plan(&g, true);
    let (extra, s) = (value(&p, &g, extra).unwrap(), value(&p, &g, s).unwrap());
    assert!(kernels(&p).contains(&KernelId::GemmF32) && p.to_string().contains("MatMul+Bias"), "{p}");
    assert!(!p.memory.in_place.contains(&(extra, s)), "{p}");
    // The residual is also the A operand, which other threads read while outputs are written.
    let (g, extra, s) = memory_case(&[32, 64], true);
    let p = plan(&g, true);
    let (extra, s) = (value(&p, &g, extra).unwrap(), value(&p, &g, s).unwrap());
    assert!(kernels(&p).contains(&KernelId::GemmProgramF32), "{p}");
    assert!(!p.memory.in_place.iter().any(|&(_, dst)| dst == s), "{:?}\n{p}", p.memory.in_place);
    let (sa, ss) = (p.memory.slots[extra.index()].unwrap(), p.memory.slots[s.index()].unwrap());
    assert!(sa.offset + sa.bytes <= ss.offset || ss.offset + ss.bytes <= sa.offset, "{p}");
}

#[test]
fn shape_inference_gives_the_fused_node_its_declared_dims() {
    let (g, _) = residual(8, 16, 24);
    let p = plan(&g, true);
    let out = p.outputs[0];
    assert_eq!(p.values[out.index()].dims, Some(vec![8, 24]));
}

#[test]
fn a_gather_fuses_with_the_program_reading_it() {
    // GPT-2's embeddings: the token rows gathered, the position rows added, in one launch; the
    // gathered rows get no slot.
    let embed_with = |read_twice: bool, data: DType, index: DType| {
        let mut g = Graph::new();
        let ids = g.input("ids", index, known(&[16]));
        let table = match data {
            DType::F32 => weight(&mut g, "wte", &[100, 32]),
            _ => g.initializer("wte", ConstTensor::from_i64(&[100, 32], &vec![1; 3200]).unwrap()),
        };
        let e = g.gather(table, ids, 0);
        let e = if data == DType::F32 { e } else { g.op1(Op::Cast(crate::op::Cast::to(DType::F32)), &[e]) };
        let pos = weight(&mut g, "wpe", &[16, 32]);
        let y = g.add(e, pos);
        g.output(y);
        if read_twice {
            g.output(e);
        }
        (g, e)
    };
    let embed = |read_twice: bool, data: DType| embed_with(read_twice, data, DType::I64);
    let (g, e) = embed(false, DType::F32);
    let fused = plan(&g, true);
    assert_eq!(kernels(&fused), [KernelId::GatherProgramF32], "{fused}");
    assert!(fused.to_string().contains("Gather+Add"), "{fused}");
    assert!(value(&fused, &g, e).is_none(), "{fused}");
    assert_eq!(kernels(&plan(&g, false)), [KernelId::GatherF32, KernelId::AddF32]);
    // The gathered rows read elsewhere too, or not f32: two launches.
    let (g, _) = embed(true, DType::F32);
    assert!(kernels(&plan(&g, true)).contains(&KernelId::GatherF32));
    let (g, _) = embed(false, DType::I64);
    assert!(!kernels(&plan(&g, true)).contains(&KernelId::GatherProgramF32));
    // int32 indices fuse too (the launch reads 4-byte indices).
    let (g, _) = embed_with(false, DType::F32, DType::I32);
    let fused = plan(&g, true);
    assert_eq!(kernels(&fused), [KernelId::GatherProgramF32], "{fused}");
}

#[test]
fn a_matmul_bias_row_becomes_its_c_and_a_gelu_after_it_its_activation() {
    // dynamo's nn.Linear over a 3-D input, then GELU: MatMul, Add(bias [n]), Gelu.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[2, 8, 16]));
    let w = weight(&mut g, "w", &[16, 24]);
    let bias = weight(&mut g, "bias", &[24]);
    let h = g.matmul(x, w);
    let s = g.add(bias, h);
    let y = g.op1(Op::Gelu(crate::op::Gelu::default()), &[s]);
    g.output(y);
    let p = plan(&g, true);
    let text = p.to_string();
    assert_eq!(kernels(&p), vec![KernelId::GemmF32], "{text}");
    assert!(text.contains("MatMul+Bias+GeluErf"), "{text}");
    // A residual after the bias stays a program (of one op), the bias still C.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[2, 8, 16]));
    let r = g.input("r", DType::F32, known(&[2, 8, 24]));
    let w = weight(&mut g, "w", &[16, 24]);
    let bias = weight(&mut g, "bias", &[1, 24]);
    let h = g.matmul(x, w);
    let s = g.add(h, bias);
    let y = g.add(s, r);
    g.output(y);
    let p = plan(&g, true);
    let text = p.to_string();
    assert_eq!(kernels(&p), vec![KernelId::GemmProgramF32], "{text}");
    let Some(Step::Kernel { args, .. }) = p.steps.first() else { panic!("{text}") };
    // [p, e, a, b, c (the bias), x1 (the residual), ..]
    assert!(matches!(args[4], Arg::Value(_)) && matches!(args[5], Arg::Value(_)), "{text}");
    // A bias of a whole matrix is no row: it stays in the program.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, known(&[8, 16]));
    let w = weight(&mut g, "w", &[16, 24]);
    let full = weight(&mut g, "full", &[8, 24]);
    let h = g.matmul(x, w);
    let y = g.add(h, full);
    g.output(y);
    let p = plan(&g, true);
    assert!(!p.to_string().contains("Bias"), "{p}");
}

/// With bf16-rounded constants, GELU-tanh matches at bf16's tolerance and QuickGELU
/// (`x·σ(1.702x)`, 6.4e-3 away) does not; f32 constants keep f32's tolerance however loose the
/// one asked for.
#[test]
fn loosened_tolerances_apply_to_narrow_constants_only_and_stop_short_of_other_functions() {
    use super::epilogue::as_activation;
    use kernels_gpu::abi::{
        Activation, EwInstr,
        ew_src::{IMM, INPUT0},
    };
    let ins = |op: u32, dst: u32, a: u32, b: u32, imm: f32| EwInstr { op, dst, a, b, imm, aux: 0 };
    let bf = |v: f32| half::bf16::from_f32(v).to_f32();
    // x · sigmoid(k x), k = 1.702 rounded to bf16 (Mul by an immediate = op 2, Sigmoid = 18).
    let quick = super::fuse::EwProgram {
        instrs: vec![ins(2, 0, INPUT0, IMM, bf(1.702)), ins(18, 0, 0, 0, 0.0), ins(2, 0, 0, INPUT0, 0.0)],
        out_reg: 0,
    };
    assert_eq!(as_activation(&quick, super::widen::rounding(crate::DType::BF16)), None);
    // x · sigmoid(x) with a needless f32 scale of 1.0000001 stays SiLU only within f32 rounding.
    let silu_scaled = super::fuse::EwProgram {
        instrs: vec![ins(2, 0, INPUT0, IMM, 1.000_000_1), ins(18, 0, 0, 0, 0.0), ins(2, 0, 0, INPUT0, 0.0)],
        out_reg: 0,
    };
    assert_eq!(as_activation(&silu_scaled, 1e-2), Some(Activation::Silu));
    let silu_off = super::fuse::EwProgram {
        instrs: vec![ins(2, 0, INPUT0, IMM, 1.001), ins(18, 0, 0, 0, 0.0), ins(2, 0, 0, INPUT0, 0.0)],
        out_reg: 0,
    };
    assert_eq!(as_activation(&silu_off, 1e-2), None, "1.001 is no f16 / bf16 value: f32 tolerance");
}
