//! Chains of small-`m` GEMM layers fused into one `mlp_f32` launch (Hopper flavour: one
//! thread-block cluster whose blocks pass each layer's output through distributed shared memory).
//!
//! A chain is a run of Gemm / MatMul nodes, consecutive in the schedule, each reading the previous
//! one's output as its contiguous A operand when that output has no other reader and is not a
//! graph output; every layer has `m <= MLP_MAX_M` rows, no batch, and its activation widths fit
//! the kernel's shared-memory buffers. The layers' activations (fused into their epilogues
//! earlier) and C operands come along; the intermediate values are elided from the memory plan.
//! Because the nodes are consecutive, nothing else runs between them: the fused launch takes the
//! last node's place, when every operand of every layer is still intact. The chain's output may
//! share the slot of its input or of an earlier layer's operand (their lifetimes ended): the
//! kernel reads the input into shared memory and finishes each layer's reads before the cluster
//! barrier that precedes any write of the output.

use kernels_gpu::abi::{
    Activation, KernelId, MLP_CLUSTER, MLP_MAX_ACTIVATIONS, MLP_MAX_LAYERS, MLP_MAX_M, MLP_SHARED_BYTES,
    MLP_THREADS, MlpLayer, MlpParams,
};

use super::fuse::OperandPerms;
use super::gemm::gemm_of;
use super::lower::bytes_of;
use super::{Arg, PlanOptions, PlannedValue, Step};
use crate::graph::{Graph, NodeId, ValueId};

/// The chains of a graph: each a list of nodes in schedule order (2 to [`MLP_MAX_LAYERS`]).
#[derive(Debug, Default)]
pub(super) struct Chains(Vec<Vec<NodeId>>);

/// One layer of a chain: the kernel's parameters and the node's operands.
struct Layer {
    params: MlpLayer,
    m: u32,
    a: ValueId,
    b: ValueId,
    c: Option<ValueId>,
    out: ValueId,
}

fn layer(
    g: &Graph,
    id: NodeId,
    values: &[PlannedValue],
    perms: &OperandPerms,
    act: Option<(Activation, f32)>,
) -> Option<Layer> {
    let (p, a, b, c) = gemm_of(g, id, values, perms).ok()?;
    let a_contiguous = p.a_cs == 1 && (p.a_rs == p.k as u64 || p.m == 1);
    let b_mode = p.b_rs == 1 || p.b_cs == 1;
    let fits = p.m as u64 * p.k.max(p.n) as u64 <= MLP_MAX_ACTIVATIONS as u64;
    // A result written through its transpose's strides is not a chain layer.
    if p.batch != 1
        || p.y_cs != 0
        || p.m == 0
        || p.m > MLP_MAX_M
        || p.k == 0
        || p.n == 0
        || !a_contiguous
        || !b_mode
        || !fits
    {
        return None;
    }
    let (act, act_alpha) = act.map_or((0, 0.0), |(a, alpha)| (a as u32, alpha));
    let params = MlpLayer {
        k: p.k,
        n: p.n,
        act,
        has_c: p.has_c,
        alpha: p.alpha,
        beta: p.beta,
        act_alpha,
        _pad: 0,
        b_rs: p.b_rs,
        b_cs: p.b_cs,
        c_rs: p.c_rs,
        c_cs: p.c_cs,
    };
    Some(Layer { params, m: p.m, a, b, c, out: g.nodes[id.index()].output(0)? })
}

impl Chains {
    /// Finds the chains of `g` (`epilogues`: the activation fused into each GEMM node). None when
    /// the target has no clusters ([`PlanOptions::cluster_mlp`]).
    pub(super) fn find(
        g: &Graph,
        values: &[PlannedValue],
        perms: &OperandPerms,
        epilogues: &[(NodeId, Activation, f32)],
        options: &PlanOptions,
    ) -> Chains {
        if !options.cluster_mlp {
            return Chains::default();
        }
        let Ok(order) = crate::validate::topo_order(g) else { return Chains::default() };
        let readers = super::fuse::reader_counts(g);
        let act = |id: NodeId| epilogues.iter().find(|(n, ..)| *n == id).map(|&(_, a, alpha)| (a, alpha));
        let layers: Vec<Option<Layer>> =
            order.iter().map(|&id| layer(g, id, values, perms, act(id))).collect();
        // Position s continues the chain of s - 1 when it reads that layer's private output as A.
        let links = |s: usize| match (&layers[s - 1], &layers[s]) {
            (Some(prev), Some(cur)) => {
                cur.a == prev.out
                    && cur.m == prev.m
                    && cur.params.k == prev.params.n
                    && readers[prev.out.index()] == 1
                    && !g.outputs.contains(&prev.out)
            }
            _ => false,
        };
        let mut chains = Vec::new();
        let mut run: Vec<NodeId> = Vec::new();
        for s in 0..order.len() {
            if s > 0 && links(s) && run.len() < MLP_MAX_LAYERS {
                run.push(order[s]);
                continue;
            }
            if run.len() >= 2 {
                chains.push(std::mem::take(&mut run));
            }
            run.clear();
            if layers[s].is_some() {
                run.push(order[s]);
            }
        }
        if run.len() >= 2 {
            chains.push(run);
        }
        Chains(chains)
    }

    /// The values the chains keep on chip (every layer's output but the last).
    pub(super) fn elided(&self, g: &Graph) -> Vec<ValueId> {
        self.0
            .iter()
            .flat_map(|c| c[..c.len() - 1].iter().filter_map(|id| g.nodes[id.index()].output(0)))
            .collect()
    }

    /// The chain `id` belongs to, and whether `id` is its last node (where the launch goes).
    pub(super) fn of(&self, id: NodeId) -> Option<(&[NodeId], bool)> {
        let c = self.0.iter().find(|c| c.contains(&id))?;
        Some((c, c.last() == Some(&id)))
    }
}

/// The `mlp_f32` launch computing `chain`.
pub(super) fn step(
    g: &Graph,
    chain: &[NodeId],
    values: &[PlannedValue],
    perms: &OperandPerms,
    epilogues: &[(NodeId, Activation, f32)],
) -> Result<Step, String> {
    let mut p = MlpParams { layers: chain.len() as u32, ..MlpParams::default() };
    // (params, x, then W and C of each of the kernel's layer slots, y)
    let mut args = vec![Arg::Null; 3 + 2 * MLP_MAX_LAYERS];
    let mut labels = Vec::new();
    for (l, &id) in chain.iter().enumerate() {
        let act = epilogues.iter().find(|(n, ..)| *n == id).map(|&(_, a, alpha)| (a, alpha));
        let layer = layer(g, id, values, perms, act).ok_or("a chain layer no longer qualifies")?;
        if l == 0 {
            args[1] = Arg::Value(layer.a);
        }
        p.m = layer.m;
        p.layer[l] = layer.params;
        args[2 + 2 * l] = Arg::Value(layer.b);
        args[3 + 2 * l] = layer.c.map_or(Arg::Null, Arg::Value);
        args[2 + 2 * MLP_MAX_LAYERS] = Arg::Value(layer.out);
        let op = g.nodes[id.index()].op.name();
        labels.push(match act {
            Some((a, _)) => format!("{op}+{a:?}"),
            None => op.to_string(),
        });
    }
    args[0] = Arg::Params(bytes_of(&p));
    Ok(Step::Kernel {
        nodes: chain.to_vec(),
        label: format!("MLP[{}]", labels.join(", ")),
        kernel: KernelId::MlpF32,
        grid: [MLP_CLUSTER, 1, 1],
        block: [MLP_THREADS, 1, 1],
        shared_bytes: MLP_SHARED_BYTES,
        args,
    })
}
