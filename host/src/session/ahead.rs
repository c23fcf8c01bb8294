//! What a plan is compiled from, without a session: the plan options for a device
//! ([`plan_options`]), the binding the inputs imply ([`binding_of`]), and a plan compiled ahead
//! of the session that will run it ([`PlanAhead`]).

use std::collections::HashMap;

use planner::plan::{Plan, PlanOptions, compile};
use planner::{Binding, Dim, Graph};

use super::SessionOptions;
use crate::error::HostError;
use crate::tensor::HostTensor;

/// The plan options a session with `options` compiles with on a device of `sm_count`
/// multiprocessors (`hopper`: the Hopper flavour, with its cluster and block-pair kernels): what
/// `ferrofuse inspect` plans offline.
pub fn plan_options(options: &SessionOptions, sm_count: u32, hopper: bool) -> PlanOptions {
    PlanOptions {
        sm_count,
        fuse_activations: options.fuse_activations,
        fuse_elementwise: options.fuse_elementwise,
        fuse_gemm_programs: options.fuse_gemm_programs,
        stateful: options.stateful,
        tensor_core_gemm: options.tensor_core_gemm,
        tile_gemm: options.tile_gemm,
        fuse_layer_norm_gemm: options.fuse_layer_norm_gemm,
        pack_gemm_weights: options.pack_gemm_weights,
        pack_computed_weights: options.pack_computed_weights,
        tf32_integer_products: options.tf32_integer_products,
        conv_program_epilogue: options.conv_program_epilogue,
        tensor_core_attention: options.tensor_core_attention,
        flash_attention: options.flash_attention,
        resident_b: options.resident_b,
        lift_ssd: options.lift_ssd,
        row_views: options.row_views,
        lift_rotary: options.lift_rotary,
        ssd_spans: options.ssd_spans,
        chunked_selective_scan: options.chunked_selective_scan,
        wkv_spans: options.wkv_spans,
        fuse_attention: options.fuse_attention,
        cluster_mlp: hopper,
        pair_gemm: options.pair_gemm && hopper,
        wgmma_gemm: options.wgmma_gemm && hopper,
        split_k_wgmma: options.split_k_wgmma,
        skip_hidden_keys: options.skip_hidden_keys,
        precision: options.precision,
        widen_narrow_floats: options.widen_narrow_floats,
        narrow_gemms: options.narrow_gemms,
        hoist_constants: options.hoist_constants,
        ..PlanOptions::default()
    }
}

/// The sizes of `graph`'s symbolic input dims that `inputs` imply, after checking every input's
/// name, dtype and shape against the model (what a [`Session`](super::Session) run checks first).
pub fn binding_of(graph: &Graph, inputs: &[(String, HostTensor)]) -> Result<Binding, HostError> {
    let mut b = Binding::new();
    // The input that bound each symbol first, to name both when another disagrees.
    let mut bound_by: HashMap<String, String> = HashMap::new();
    for &v in &graph.inputs {
        let info = &graph.values[v.index()];
        let name = &info.name;
        let t = inputs.iter().find(|(n, _)| n == name).map(|(_, t)| t).ok_or_else(|| HostError::Input {
            name: name.clone(),
            detail: "missing (every graph input must be given)".into(),
        })?;
        let Some(decl) = &info.info else { continue };
        let bad = |detail: String| HostError::Input { name: name.clone(), detail };
        if t.dtype() != decl.dtype {
            return Err(bad(format!("dtype {}, the model declares {}", t.dtype(), decl.dtype)));
        }
        if t.shape().len() != decl.shape.rank() {
            return Err(bad(format!("shape {:?}, the model declares {}", t.shape(), decl.shape)));
        }
        for (axis, (d, &size)) in decl.shape.dims().iter().zip(t.shape()).enumerate() {
            match d {
                Dim::Known(k) if *k != size => {
                    return Err(bad(format!(
                        "dim {axis} is {size}, the model declares {k} (shape {:?}, declared {})",
                        t.shape(),
                        decl.shape
                    )));
                }
                Dim::Symbol(s) => match b.get(s) {
                    Some(prev) if prev != size => {
                        let other = bound_by.get(s).map_or("another input", String::as_str);
                        return Err(bad(format!(
                            "`{s}` = {size} here but {prev} in input `{other}` (the model declares both with `{s}`)"
                        )));
                    }
                    Some(_) => {}
                    None => {
                        b.set(s, size);
                        bound_by.insert(s.clone(), name.clone());
                    }
                },
                Dim::Known(_) => {}
            }
        }
    }
    if let Some((n, _)) =
        inputs.iter().find(|(n, _)| !graph.inputs.iter().any(|v| &graph.values[v.index()].name == n))
    {
        let detail = if graph.default_names().contains(n) {
            "an initializer with a default value: to feed it, build the session from \
             `graph.overriding(&[name])` (`ferrofuse run` does)"
        } else {
            "the model has no input of this name"
        };
        return Err(HostError::Input { name: n.clone(), detail: detail.into() });
    }
    Ok(b)
}

/// A plan compiled before its session could compile it (while the context is being created):
/// what [`Session::adopt_plan`](super::Session::adopt_plan) takes.
pub struct PlanAhead {
    /// The options it was compiled with.
    pub options: PlanOptions,
    /// The binding of symbolic dims it is for.
    pub dims: Binding,
    /// The graph it was compiled from: the model's, its constants folded as a session folds them.
    pub graph: Graph,
    /// The plan.
    pub plan: Plan,
    /// How long folding and compiling took.
    pub took: std::time::Duration,
}

impl PlanAhead {
    /// The plan a session with `options` on a device of `sm_count` multiprocessors (`hopper`:
    /// the Hopper flavour, [`crate::device::plan_target`]) compiles for `graph` on `inputs`, made
    /// the same way (constants folded, [`plan_options`]). Fails where that session would have to
    /// specialize on input values or cannot plan the model.
    pub fn compile(
        graph: &Graph,
        inputs: &[(String, HostTensor)],
        options: &SessionOptions,
        target: (u32, bool),
    ) -> Result<Self, HostError> {
        Self::compile_pinned(graph, inputs, options, target, false)
    }

    /// As [`compile`](Self::compile), but with the small integer inputs a session specializes on
    /// pinned to their values in `inputs` first, as that session's first run would. A session
    /// cannot adopt it (its key holds values); it tells, without a device, whether the GPU would
    /// plan the graph whole (the conformance harness's survey). A graph a session runs in stages
    /// (data-dependent shapes, control flow) fails here though the session runs it.
    pub fn compile_specialized(
        graph: &Graph,
        inputs: &[(String, HostTensor)],
        options: &SessionOptions,
        target: (u32, bool),
    ) -> Result<Self, HostError> {
        Self::compile_pinned(graph, inputs, options, target, true)
    }

    fn compile_pinned(
        graph: &Graph,
        inputs: &[(String, HostTensor)],
        options: &SessionOptions,
        (sm_count, hopper): (u32, bool),
        pin: bool,
    ) -> Result<Self, HostError> {
        let start = std::time::Instant::now();
        let options = plan_options(options, sm_count, hopper);
        let dims = binding_of(graph, inputs)?;
        let values = if pin { crate::specialize::values(graph, inputs) } else { Vec::new() };
        let key = crate::specialize::Key { dims: dims.clone(), values };
        let graph = crate::specialize::fold_constants(crate::specialize::graph(graph, &key));
        let plan = compile(&graph, &dims, &options)?;
        Ok(PlanAhead { options, dims, graph, plan, took: start.elapsed() })
    }
}
