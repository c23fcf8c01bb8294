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
    assert!(big.to_string().contains("gemm_tc_f32"), "larger batches take the tensor-core kernel");
    let json = serde_json::to_string(&plan).unwrap();
    assert_eq!(serde_json::from_str::<Plan>(&json).unwrap(), plan);
}

#[test]
fn every_node_without_a_kernel_is_listed() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, vec![Dim::Known(4), Dim::Known(8), Dim::Known(8)]);
    let s = g.op1(Op::Mod(crate::op::Mod { fmod: true }), &[x, x]);
    let t = g.op1(Op::Det, &[s]);
    let r = g.relu(t);
    g.output(r);
    match compile(&g, &Binding::new(), &PlanOptions::default()) {
        Err(PlanError::NoKernel { nodes }) => {
            let ops: Vec<&str> = nodes.iter().map(|(_, op, _)| *op).collect();
            assert_eq!(ops, ["Mod", "Det"]);
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
