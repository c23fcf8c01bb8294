//! Staged execution of graphs whose shapes depend on data (NonZero and everything it feeds).
//!
//! A plan needs every shape before it runs; a NonZero output's length is only known once the
//! device has counted. [`split`] cuts a bound graph into what can run now and what must wait:
//!
//! - `head`: every node that does not depend on a data-dependent node, as a graph of its own
//!   (compiled into an ordinary plan). Its outputs are the graph outputs it produces and every
//!   value the later parts read (graph inputs and constants those read pass through it);
//! - `frontier`: the data-dependent nodes that read only what `head` provides. The session runs
//!   each: it counts on the device, reads the count back, places the result in the run-time region
//!   of its arena and writes it (`plan::select`);
//! - `rest`: everything downstream of the frontier, as a graph whose inputs are the values it reads
//!   from the parts before it. A frontier output's data-dependent dim is the symbol
//!   [`Frontier::symbol`]; once the count is read back, binding it makes `rest` an ordinary graph to
//!   split again (it may hold further data-dependent nodes).
//!
//! Values cross stages by name (the session keeps them in its run-time region, keyed by name), so
//! each part may be folded and renumbered on its own; every crossing value must have a name no other
//! value of the graph has.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::constant::ConstTensor;
use crate::error::PlanError;
use crate::graph::{Definition, Graph, Node, NodeId, ValueId};
use crate::op::Op;
use crate::shape_infer;
use crate::tensor_info::{Binding, DType, Dim, Shape, TensorInfo};
use crate::{fold, memory, validate};

/// Which data-dependent operator a [`Frontier`] node is.
#[derive(Debug, Clone, PartialEq)]
pub enum FrontierKind {
    /// NonZero of [`Frontier::input`].
    NonZero,
    /// NonMaxSuppression of the boxes [`Frontier::input`] (`(batch, n, 4)`) and `scores`
    /// (`(batch, classes, n)`), with its optional scalar inputs by name (max_output_boxes_per_class,
    /// iou_threshold, score_threshold).
    NonMaxSuppression {
        /// Boxes given as centre and size.
        center_point_box: bool,
        /// The scores' name.
        scores: String,
        /// The scores' dims (the launch checks them against the boxes').
        scores_dims: Vec<usize>,
        /// The optional scalars' names.
        scalars: [Option<String>; 3],
    },
    /// Unique of [`Frontier::input`] viewed as `[outer, len, inner]` around its axis (flattened:
    /// `[1, elems, 1]`); [`Frontier::output`] is `Y`, `outputs` all four (by name, `None` when
    /// omitted).
    Unique {
        /// The axis (`None`: the input flattened).
        axis: Option<usize>,
        /// Rows before the axis.
        outer: usize,
        /// Slices along the axis.
        len: usize,
        /// Elements after the axis.
        inner: usize,
        /// The distinct slices in ascending order (else by first occurrence).
        sorted: bool,
        /// Y, indices, inverse_indices, counts.
        outputs: [Option<String>; 4],
    },
}

/// A data-dependent node the session runs between stages.
#[derive(Debug, Clone, PartialEq)]
pub struct Frontier {
    /// The operator.
    pub kind: FrontierKind,
    /// The node's label (its name, or its id), for errors.
    pub label: String,
    /// Name of the value it reads.
    pub input: String,
    /// Bound dims of that value.
    pub dims: Vec<usize>,
    /// Its element type.
    pub dtype: DType,
    /// Name of the value it writes (`[rank, count]` i64 for NonZero).
    pub output: String,
    /// The symbol standing for the output's data-dependent dim in `rest`, bound to the count.
    pub symbol: String,
}

/// A control-flow node (If, Loop, Scan) the session runs between stages: it reads the values
/// before it by name and runs its bodies ([`body_graph`]) as graphs of their own, on the device.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    /// The node's label (its name, or its id), for errors.
    pub label: String,
    /// The operator, with its bodies.
    pub op: Op,
    /// Names of the values in its input slots (`None`: an omitted optional input).
    pub inputs: Vec<Option<String>>,
    /// Names of the values in its output slots (`None`: an omitted output).
    pub outputs: Vec<Option<String>>,
    /// Per body (in [`Op::subgraphs`] order), the outer values it captures, in the order of its
    /// captures: by name, or the constant itself (it stays a constant of the body's graph, where
    /// shape inference and folding see it).
    pub captures: Vec<Vec<Captured>>,
    /// Per output slot, the symbols standing for its dims in `rest` (bound to the sizes the run
    /// produces) and its element type.
    pub symbols: Vec<(Vec<String>, DType)>,
}

/// An outer value a control-flow body captures.
#[derive(Debug, Clone, PartialEq)]
pub enum Captured {
    /// A value the run computes or is given, by name.
    Value(String),
    /// A constant of the enclosing graph.
    Constant(ConstTensor),
}

/// A graph cut at its data-dependent nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// What runs now; inputs are the bound graph's inputs.
    pub head: Graph,
    /// Data-dependent nodes whose inputs `head` outputs.
    pub frontier: Vec<Frontier>,
    /// Control-flow nodes whose inputs (and captures) `head` outputs.
    pub controls: Vec<Control>,
    /// What runs after the frontier (`None` when nothing does).
    pub rest: Option<Graph>,
}

/// The symbol of a data-dependent output dim in the later stages.
fn symbol_of(output: &str) -> String {
    format!("nonzero:{output}")
}

/// The symbol of dim `d` of a control-flow node's output in the later stages.
fn control_symbol(output: &str, d: usize) -> String {
    format!("control:{output}:{d}")
}

/// Cuts `graph`, with its symbolic input dims bound by `binding`, at its data-dependent nodes
/// (NonZero) and its control-flow nodes (If, Loop, Scan); `None` when it has neither (compile it
/// whole). A node whose output shape depends on the data but that the GPU cannot run between stages
/// is an error naming it.
pub fn split(graph: &Graph, binding: &Binding) -> Result<Option<Stage>, PlanError> {
    let g = fold::run(&memory::bind_inputs(graph, binding)?)?;
    let g = compress_through_non_zero(&g)?;
    let infos = shape_infer::infer(&g)?;
    let known = |v: ValueId| infos[v.index()].shape.as_known().is_some();
    let defs = g.definitions();
    // Nodes downstream of a frontier node (or frontier nodes themselves), in topological order.
    let mut waits = vec![false; g.nodes.len()];
    let mut frontier_nodes = Vec::new();
    let mut control_nodes = Vec::new();
    let mut refused = Vec::new();
    for id in validate::topo_order(&g)? {
        let node = &g.nodes[id.index()];
        let after_frontier = node.uses().iter().any(|v| match defs[v.index()] {
            Some(Definition::Node { node, .. }) => waits[node.index()],
            _ => false,
        });
        if after_frontier {
            waits[id.index()] = true;
        } else if match &node.op {
            Op::If(_) | Op::Loop(_) => true,
            // A Scan of elementwise f32 steps runs in the plan, as one kernel launch.
            Op::Scan(s) => !crate::plan::scan_program::fits(s, node, &infos),
            _ => false,
        } {
            waits[id.index()] = true;
            control_nodes.push(id);
        } else if node.outputs.iter().flatten().any(|&v| !known(v)) {
            if matches!(node.op, Op::NonZero | Op::NonMaxSuppression(_) | Op::Unique(_)) {
                waits[id.index()] = true;
                frontier_nodes.push(id);
            } else {
                refused.push((
                    g.node_label(id),
                    node.op.name(),
                    "its output shape depends on the data (only NonZero, NonMaxSuppression, Unique and control flow run between stages on the GPU)"
                        .to_string(),
                ));
            }
        }
    }
    if !refused.is_empty() {
        return Err(PlanError::NoKernel { nodes: refused });
    }
    if frontier_nodes.is_empty() && control_nodes.is_empty() {
        return Ok(None);
    }
    let between: Vec<NodeId> = frontier_nodes.iter().chain(&control_nodes).copied().collect();
    let rest_nodes: Vec<NodeId> = (0..g.nodes.len())
        .map(|i| NodeId(i as u32))
        .filter(|id| waits[id.index()] && !between.contains(id))
        .collect();
    let head_nodes: Vec<NodeId> =
        (0..g.nodes.len()).map(|i| NodeId(i as u32)).filter(|id| !waits[id.index()]).collect();
    let produced_by = |nodes: &[NodeId]| -> HashSet<ValueId> {
        nodes.iter().flat_map(|n| g.nodes[n.index()].outputs.iter().flatten().copied()).collect()
    };
    let (by_frontier, by_rest) = (produced_by(&between), produced_by(&rest_nodes));
    let reads = |nodes: &[NodeId]| -> Vec<ValueId> {
        let mut out: Vec<ValueId> = Vec::new();
        for n in nodes {
            for v in g.nodes[n.index()].uses() {
                if !out.contains(&v) {
                    out.push(v);
                }
            }
        }
        out
    };
    // What the rest reads from before it (its inputs; constants it keeps as its own).
    let rest_inputs: Vec<ValueId> = reads(&rest_nodes)
        .into_iter()
        .filter(|v| !by_rest.contains(v) && !g.initializers.contains_key(v))
        .collect();
    // The head outputs the graph outputs it can give, and everything the frontier and the rest read
    // that does not come from the frontier.
    let mut head_outputs: Vec<ValueId> = Vec::new();
    let frontier_reads = reads(&between);
    for &v in g.outputs.iter().chain(&frontier_reads).chain(&rest_inputs) {
        if !by_frontier.contains(&v) && !by_rest.contains(&v) && !head_outputs.contains(&v) {
            head_outputs.push(v);
        }
    }
    let crossing: Vec<ValueId> =
        head_outputs.iter().chain(&rest_inputs).chain(&by_frontier).copied().collect();
    check_names(&g, &crossing)?;
    let head = extract(&g, &head_nodes, &g.inputs, &head_outputs, |v| g.values[v.index()].info.clone())?;
    let mut frontier = Vec::new();
    let mut symbols: HashMap<ValueId, String> = HashMap::new();
    let mut symbols_by_value: HashMap<ValueId, TensorInfo> = HashMap::new();
    for &id in &frontier_nodes {
        let node = &g.nodes[id.index()];
        let (Some(x), Some(y)) = (node.input(0), node.output(0)) else {
            return Err(PlanError::NoKernel {
                nodes: vec![(g.node_label(id), node.op.name(), "needs its input and output".into())],
            });
        };
        // A scalar counts as shape [1] (see `shape_infer`'s NonZero).
        let dims = infos[x.index()].shape.as_known().filter(|d| !d.is_empty()).unwrap_or(vec![1]);
        let output = g.value_name(y);
        let symbol = symbol_of(&output);
        // Every output with a data-dependent dim (Unique's Y, indices and counts) has this one.
        for v in node.outputs.iter().flatten() {
            if *v == y || infos[v.index()].shape.as_known().is_none() {
                symbols.insert(*v, symbol.clone());
            }
        }
        let kind = match &node.op {
            Op::Unique(a) => {
                let d = infos[x.index()].shape.as_known().unwrap_or_default();
                let (axis, outer, len, inner) = match a.axis {
                    None => (None, 1, d.iter().product(), 1),
                    Some(ax) => {
                        let r = d.len() as i64;
                        let ax = if ax < 0 { ax + r } else { ax };
                        let ax = usize::try_from(ax).ok().filter(|&a| a < d.len()).ok_or_else(|| {
                            PlanError::NoKernel {
                                nodes: vec![(
                                    g.node_label(id),
                                    node.op.name(),
                                    format!("axis {ax} of {d:?}"),
                                )],
                            }
                        })?;
                        (Some(ax), d[..ax].iter().product(), d[ax], d[ax + 1..].iter().product())
                    }
                };
                let outputs = std::array::from_fn(|k| node.output(k).map(|v| g.value_name(v)));
                FrontierKind::Unique { axis, outer, len, inner, sorted: a.sorted, outputs }
            }
            Op::NonMaxSuppression(a) => {
                let scores = node.input(1).ok_or_else(|| PlanError::NoKernel {
                    nodes: vec![(g.node_label(id), node.op.name(), "needs its scores".into())],
                })?;
                let scores_dims = infos[scores.index()].shape.as_known().unwrap_or_default();
                FrontierKind::NonMaxSuppression {
                    center_point_box: a.center_point_box,
                    scores: g.value_name(scores),
                    scores_dims,
                    scalars: [2, 3, 4].map(|s| node.input(s).map(|v| g.value_name(v))),
                }
            }
            _ => FrontierKind::NonZero,
        };
        frontier.push(Frontier {
            kind,
            label: g.node_label(id),
            input: g.value_name(x),
            dims,
            dtype: infos[x.index()].dtype,
            output,
            symbol,
        });
    }
    let mut controls = Vec::new();
    for &id in &control_nodes {
        let node = &g.nodes[id.index()];
        let name = |v: &Option<ValueId>| v.map(|v| g.value_name(v));
        let mut symbols = Vec::new();
        for slot in &node.outputs {
            let info = slot.map(|v| &infos[v.index()]);
            let rank = info.map_or(0, |i| i.rank());
            let out = slot.map(|v| g.value_name(v)).unwrap_or_default();
            let syms: Vec<String> = (0..rank).map(|d| control_symbol(&out, d)).collect();
            if let Some(v) = slot {
                let dims = syms.iter().map(|s| Dim::Symbol(s.clone()));
                symbols_by_value
                    .insert(*v, TensorInfo { dtype: infos[v.index()].dtype, shape: Shape(dims.collect()) });
            }
            symbols.push((syms, info.map_or(DType::F32, |i| i.dtype)));
        }
        controls.push(Control {
            label: g.node_label(id),
            op: node.op.clone(),
            inputs: node.inputs.iter().map(name).collect(),
            outputs: node.outputs.iter().map(name).collect(),
            captures: node
                .op
                .subgraphs()
                .iter()
                .map(|b| {
                    let captured = |c: &crate::graph::Capture| match g.initializers.get(&c.outer) {
                        Some(k) => Captured::Constant(k.clone()),
                        None => Captured::Value(g.value_name(c.outer)),
                    };
                    b.captures.iter().map(captured).collect()
                })
                .collect(),
            symbols,
        });
    }
    let rest = if rest_nodes.is_empty() {
        None
    } else {
        let rest_outputs: Vec<ValueId> = g.outputs.iter().copied().filter(|v| by_rest.contains(v)).collect();
        let info = |v: ValueId| {
            let mut info = infos[v.index()].clone();
            if let Some(info) = symbols_by_value.get(&v) {
                return Some(info.clone());
            }
            if let Some(sym) = symbols.get(&v) {
                let dims = info.shape.dims().iter().map(|d| match d {
                    Dim::Known(k) => Dim::Known(*k),
                    Dim::Symbol(_) => Dim::Symbol(sym.clone()),
                });
                info = TensorInfo { dtype: info.dtype, shape: Shape(dims.collect()) };
            }
            Some(info)
        };
        Some(extract(&g, &rest_nodes, &rest_inputs, &rest_outputs, info)?)
    };
    Ok(Some(Stage { head, frontier, controls, rest }))
}

/// `body` (a control-flow node's subgraph) as a graph of its own: its inputs, then the values it
/// captures that `constants` does not give (one entry per capture), become graph inputs named
/// `body-input:{i}` (the session binds them by position), of the element types and ranks of
/// `inputs` (one per such input), every dim a symbol `body-input:{i}:{d}` ([`body_symbol`])
/// bound when it runs; the captured constants become the body's own. Its nested bodies stay as
/// they are.
pub fn body_graph(
    body: &Graph,
    constants: &[Option<ConstTensor>],
    inputs: &[(DType, usize)],
) -> Result<Graph, PlanError> {
    let mut g = body.clone();
    if constants.len() != g.captures.len() {
        return Err(PlanError::Memory {
            detail: format!("a body with {} captures is given {} of them", g.captures.len(), constants.len()),
        });
    }
    for (c, k) in std::mem::take(&mut g.captures).into_iter().zip(constants) {
        match k {
            Some(k) => {
                g.initializers.insert(c.inner, k.clone());
            }
            None => g.inputs.push(c.inner),
        }
    }
    if g.inputs.len() != inputs.len() {
        return Err(PlanError::Memory {
            detail: format!(
                "a body with {} inputs and captures is run with {} values",
                g.inputs.len(),
                inputs.len()
            ),
        });
    }
    for (i, (&v, &(dtype, rank))) in g.inputs.iter().zip(inputs).enumerate() {
        let value = &mut g.values[v.index()];
        // Graph outputs passed through keep their binding by position, not by name.
        value.name = body_input_name(i);
        value.info = Some(TensorInfo {
            dtype,
            shape: Shape((0..rank).map(|d| Dim::Symbol(body_symbol(i, d))).collect()),
        });
    }
    validate::graph(&g)?;
    Ok(g)
}

/// An output's element type, and its dims when known.
pub type OutputShape = (DType, Option<Vec<usize>>);

/// The element types of `body`'s outputs, and their dims where shape inference knows them, when
/// it runs on `inputs` (element type and dims of each input of its [`body_graph`] with
/// `constants`), the first of which hold `values` where given.
pub fn body_output_dims(
    body: &Graph,
    constants: &[Option<ConstTensor>],
    inputs: &[(DType, Vec<usize>)],
    values: &[Option<ConstTensor>],
) -> Result<Vec<OutputShape>, PlanError> {
    let sig: Vec<(DType, usize)> = inputs.iter().map(|(t, d)| (*t, d.len())).collect();
    let mut g = body_graph(body, constants, &sig)?;
    // Inputs of known value (a loop counter) are constants to inference.
    for (v, k) in g.inputs.clone().into_iter().zip(values) {
        if let Some(k) = k {
            g.inputs.retain(|&i| i != v);
            g.initializers.insert(v, k.clone());
        }
    }
    let mut b = Binding::new();
    for (i, (_, dims)) in inputs.iter().enumerate() {
        for (d, &n) in dims.iter().enumerate() {
            b.set(&body_symbol(i, d), n);
        }
    }
    let g = memory::bind_inputs(&g, &b)?;
    let infos = shape_infer::infer(&g)?;
    Ok(g.outputs.iter().map(|v| (infos[v.index()].dtype, infos[v.index()].shape.as_known())).collect())
}

/// The name of input `i` of a [`body_graph`].
pub fn body_input_name(i: usize) -> String {
    format!("body-input:{i}")
}

/// The symbol of dim `d` of input `i` of a [`body_graph`].
pub fn body_symbol(i: usize, d: usize) -> String {
    format!("body-input:{i}:{d}")
}

/// Rewrites each `Compress(x, condition, axis)` whose condition is no longer than the selected
/// extent as `Gather(x, Reshape(NonZero(condition), [-1]), axis)` (x flattened first when there is
/// no axis), so that it runs in stages like NonZero. A longer condition (an error in ONNX's
/// reference) is left to be refused.
fn compress_through_non_zero(g: &Graph) -> Result<Graph, PlanError> {
    if !g.nodes.iter().any(|n| matches!(n.op, Op::Compress(_))) {
        return Ok(g.clone());
    }
    let infos = shape_infer::infer(g)?;
    let mut out = g.clone();
    for id in 0..g.nodes.len() {
        let node = &g.nodes[id];
        let Op::Compress(c) = &node.op else { continue };
        let (Some(x), Some(cond), Some(y)) = (node.input(0), node.input(1), node.output(0)) else { continue };
        let (Some(dims), Some(len)) =
            (infos[x.index()].shape.as_known(), infos[cond.index()].shape.as_known())
        else {
            continue;
        };
        let axis = match c.axis {
            Some(a) if a < 0 => a + dims.len() as i64,
            Some(a) => a,
            None => -1,
        };
        let extent =
            if axis < 0 { dims.iter().product() } else { dims.get(axis as usize).copied().unwrap_or(0) };
        if len.len() != 1 || len[0] > extent {
            continue;
        }
        let name = g.value_name(y);
        let flat = out.const_i64(&format!("{name}:flat"), &[1], &[-1]);
        let nz = out.add_value(format!("{name}:nonzero"), None);
        let indices = out.add_value(format!("{name}:indices"), None);
        let reshape = |input, output| Node {
            name: format!("{}:reshape", node.name),
            op: Op::Reshape(Default::default()),
            inputs: vec![Some(input), Some(flat)],
            outputs: vec![Some(output)],
        };
        out.add_node(Node {
            name: format!("{}:nonzero", node.name),
            op: Op::NonZero,
            inputs: vec![Some(cond)],
            outputs: vec![Some(nz)],
        });
        out.add_node(reshape(nz, indices));
        let data = if axis < 0 {
            let flat_x = out.add_value(format!("{name}:flat_input"), None);
            out.add_node(reshape(x, flat_x));
            flat_x
        } else {
            x
        };
        out.nodes[id] = Node {
            name: node.name.clone(),
            op: Op::Gather(crate::op::Gather { axis: axis.max(0) }),
            inputs: vec![Some(data), Some(indices)],
            outputs: vec![Some(y)],
        };
    }
    Ok(out)
}

/// Every value crossing a stage boundary must have a name no other value has (the session keys
/// them by name).
fn check_names(g: &Graph, crossing: &[ValueId]) -> Result<(), PlanError> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for v in &g.values {
        *count.entry(v.name.as_str()).or_default() += 1;
    }
    for &v in crossing {
        let name = g.values[v.index()].name.as_str();
        if name.is_empty() || count.get(name).copied().unwrap_or(0) > 1 {
            return Err(PlanError::Memory {
                detail: format!(
                    "value {} crosses a data-dependent stage boundary but its name is {}",
                    g.value_name(v),
                    if name.is_empty() { "empty" } else { "not unique" }
                ),
            });
        }
    }
    Ok(())
}

/// The graph of `nodes` (of `g`) with `inputs` (their infos from `info`) and `outputs`; the
/// constants the nodes read come along.
fn extract(
    g: &Graph,
    nodes: &[NodeId],
    inputs: &[ValueId],
    outputs: &[ValueId],
    info: impl Fn(ValueId) -> Option<TensorInfo>,
) -> Result<Graph, PlanError> {
    let mut out = Graph::new();
    let mut map: BTreeMap<ValueId, ValueId> = BTreeMap::new();
    let mut add = |out: &mut Graph, v: ValueId, info: Option<TensorInfo>| -> ValueId {
        *map.entry(v).or_insert_with(|| out.add_value(g.values[v.index()].name.clone(), info))
    };
    let declared = |v: ValueId| g.values[v.index()].info.clone();
    for &v in inputs {
        let id = add(&mut out, v, info(v));
        out.inputs.push(id);
    }
    let constants = nodes.iter().flat_map(|n| g.nodes[n.index()].uses()).chain(outputs.iter().copied());
    for v in constants {
        if let Some(c) = g.initializers.get(&v) {
            let id = add(&mut out, v, declared(v));
            out.initializers.insert(id, c.clone());
        }
    }
    for &n in nodes {
        let node = &g.nodes[n.index()];
        let ins: Vec<Option<ValueId>> =
            node.inputs.iter().map(|s| s.map(|v| add(&mut out, v, declared(v)))).collect();
        // Control-flow bodies read outer values through captures: those follow the renumbering.
        let mut op = node.op.clone();
        for body in op.subgraphs_mut() {
            for c in &mut body.captures {
                c.outer = add(&mut out, c.outer, declared(c.outer));
            }
        }
        let outs: Vec<Option<ValueId>> =
            node.outputs.iter().map(|s| s.map(|v| add(&mut out, v, declared(v)))).collect();
        out.add_node(Node { name: node.name.clone(), op, inputs: ins, outputs: outs });
    }
    for &v in outputs {
        let id = add(&mut out, v, declared(v));
        out.outputs.push(id);
    }
    validate::graph(&out)?;
    Ok(out)
}

#[cfg(test)]
mod tests;
