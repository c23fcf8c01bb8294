//! The CPU reference executor: naive, obviously correct loops, accumulating in f64 where it matters.
//! It shares no code with the GPU launchers beyond the broadcast-shape rule, so comparing the two
//! tests the kernels and their launch parameters together.
//!
//! [`eval`] runs an unfused [`Graph`] node by node in [`validate::topo_order`]: it checks the given
//! inputs against the declared ones, materialises initializers, passes each node's filled input
//! slots to [`dispatch::node`] (the one exhaustive `match` on `Op`), and frees every value after its
//! last use. Control-flow bodies run through the same driver with their captures bound to values
//! of the enclosing graph. Op families live one per file; the neural-network ops live in [`nn`].
//! Sizes that model data decides are bounded by [`Limits`], checked before each allocation.
//!
//! Invariant: every op function receives exactly the node's input slots (`None` for an omitted
//! optional input) and returns one tensor per output slot it can produce, in slot order.

pub mod compare_logic;
pub mod control;
pub mod dispatch;
pub mod elementwise;
pub mod generate;
pub mod index;
pub mod lanes;
pub mod math;
pub mod nn;
pub mod reduce;
pub mod scatter;
pub mod shape;
pub mod slice;
pub mod strides;
pub mod strings;
pub mod unary;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;

use planner::{Dim, Graph, ValueId, validate};

use crate::error::HostError;
use crate::tensor::HostTensor;

/// Size limits of one [`eval_with`] run. Model data decides many output sizes (ConstantOfShape,
/// Range, Expand, Tile, Pad, Resize, OneHot, ...), so every op sizes its output through
/// [`NodeCtx::count`] (or [`NodeCtx::check_elems`]) *before* allocating it: a model asking for
/// 10^12 elements gets [`HostError::Limit`] naming the node, never an allocation attempt. The driver
/// also checks each produced tensor and the bytes of all live values after every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most elements one tensor may hold.
    pub max_tensor_elems: usize,
    /// Most bytes a run may hold: all live values (inputs, initializers, intermediates) together
    /// after each node, and, before a node computes an output, the live values plus
    /// [`WORK_BYTES_PER_ELEM`] per output element. Default: [`crate::budget::default_budget`].
    pub max_total_bytes: u64,
    /// Most iterations one Loop node may run (a hostile trip count, or a condition that never
    /// turns false, would otherwise run for ever).
    pub max_loop_iterations: u64,
}

/// Most iterations one Loop node runs, on the reference and on the GPU: 2^20. Inference graphs
/// loop over beams, boxes or sequence positions, far fewer.
pub const MAX_LOOP_ITERATIONS: u64 = 1 << 20;

/// Bytes per output element a node is charged before it computes: the reference computes in
/// 8-byte lanes (f64 / i64) and moves data through 8-byte source offsets, whatever the dtype it
/// stores.
pub const WORK_BYTES_PER_ELEM: u64 = 8;

impl Default for Limits {
    /// 2^31 elements per tensor, the machine's [default budget](crate::budget::default_budget) in
    /// all, [`MAX_LOOP_ITERATIONS`] per Loop.
    fn default() -> Self {
        Limits {
            max_tensor_elems: 1 << 31,
            max_total_bytes: crate::budget::default_budget(),
            max_loop_iterations: MAX_LOOP_ITERATIONS,
        }
    }
}

/// The node being evaluated, as op functions see it: enough to name it in errors, and the size
/// limits its outputs must respect.
#[derive(Debug, Clone, Copy)]
pub struct NodeCtx<'a> {
    /// Node name (or `#index` when unnamed).
    pub name: &'a str,
    /// ONNX op type.
    pub op: &'static str,
    /// The run's size limits.
    pub limits: Limits,
    /// Bytes held by live values (of this graph and the graphs enclosing it) when the node
    /// started.
    pub live: u64,
    /// Text bytes an output string may take beyond its header: the longest string of each
    /// string input, summed (a concatenation is no longer; a split or a copy, shorter). 0 for
    /// nodes without string inputs. [`NodeCtx::count`] charges it per element.
    pub string_bytes: u64,
}

impl<'a> NodeCtx<'a> {
    /// A context with the default [`Limits`].
    pub fn new(name: &'a str, op: &'static str) -> Self {
        NodeCtx { name, op, limits: Limits::default(), live: 0, string_bytes: 0 }
    }

    /// Element count of an output of `shape`: an error naming the node when the product overflows,
    /// exceeds [`Limits::max_tensor_elems`] (as does any one dim, even of an empty shape), or
    /// would take the run past its memory budget
    /// ([`WORK_BYTES_PER_ELEM`] per element beside the live values). Call it before allocating.
    pub fn count(&self, shape: &[usize]) -> Result<usize, HostError> {
        let n = crate::tensor::elem_count(shape).ok_or_else(|| {
            let max = self.limits.max_tensor_elems;
            self.limit(format!(
                "shape {shape:?} overflows usize, over the limit of {max} elements per tensor"
            ))
        })?;
        self.check_elems(n, &format!("shape {shape:?}"))?;
        // An empty shape may still hold an absurd dim, which per-axis tables would be sized by.
        if let Some(&d) = shape.iter().find(|&&d| d > self.limits.max_tensor_elems) {
            return Err(self.limit(format!(
                "shape {shape:?} has a dim of {d}, over the limit of {} elements per tensor",
                self.limits.max_tensor_elems
            )));
        }
        let work = (n as u64).saturating_mul(WORK_BYTES_PER_ELEM.saturating_add(self.string_bytes));
        let max = self.limits.max_total_bytes;
        if self.live.saturating_add(work) > max {
            return Err(self.limit(format!(
                "computing shape {shape:?} takes about {work} bytes ({WORK_BYTES_PER_ELEM} per element) \
                 beside the {} bytes of live values, over the memory budget of {max} bytes \
                 (--max-memory)",
                self.live
            )));
        }
        Ok(n)
    }

    /// The limits of a body graph run by this node: the budget less what is live out here.
    pub fn body_limits(&self) -> Limits {
        Limits { max_total_bytes: self.limits.max_total_bytes.saturating_sub(self.live), ..self.limits }
    }

    /// Fails when `elems` (the size of `what`, about to be allocated) exceeds
    /// [`Limits::max_tensor_elems`].
    pub fn check_elems(&self, elems: usize, what: &str) -> Result<(), HostError> {
        if elems > self.limits.max_tensor_elems {
            return Err(self.limit(format!(
                "{what} has {elems} elements, over the limit of {} per tensor",
                self.limits.max_tensor_elems
            )));
        }
        Ok(())
    }

    /// A [`HostError::Limit`] naming this node.
    pub fn limit(&self, detail: impl Into<String>) -> HostError {
        HostError::Limit { node: self.name.to_string(), op: self.op, detail: detail.into() }
    }

    /// A [`HostError::Op`] naming this node.
    pub fn err(&self, detail: impl Into<String>) -> HostError {
        HostError::Op { node: self.name.to_string(), op: self.op, detail: detail.into() }
    }

    /// A [`HostError::Unsupported`] naming this node.
    pub fn unsupported(&self, detail: impl Into<String>) -> HostError {
        HostError::Unsupported { node: self.name.to_string(), op: self.op, detail: detail.into() }
    }
}

/// The values of the graph being run, readable by control-flow ops for their captures.
#[derive(Clone, Copy)]
pub struct Scope<'s> {
    values: &'s [Option<Cow<'s, HostTensor>>],
}

impl<'s> Scope<'s> {
    /// The live value `v`, if it has been computed and not yet freed.
    pub fn get(&self, v: ValueId) -> Option<&'s HostTensor> {
        self.values.get(v.index()).and_then(|x| x.as_deref())
    }
}

/// Runs `graph` on named `inputs` and returns its outputs, named, in graph-output order.
///
/// The graph (with its bodies) is first checked by [`validate::graph`] ([`HostError::Plan`]).
/// Every graph input must be given exactly once, with the declared dtype and rank; known dims must
/// match and each symbolic dim must take one size across all inputs (errors are
/// [`HostError::Input`]). Op failures are [`HostError::Op`] / [`HostError::Unsupported`] naming the
/// node.
pub fn eval(graph: &Graph, inputs: &[(String, HostTensor)]) -> Result<Vec<(String, HostTensor)>, HostError> {
    eval_with(graph, inputs, Limits::default())
}

/// [`eval`] under explicit size [`Limits`]: a declared input shape over the limit is a
/// [`HostError::Input`], an op output over it a [`HostError::Limit`] naming the node.
pub fn eval_with(
    graph: &Graph,
    inputs: &[(String, HostTensor)],
    limits: Limits,
) -> Result<Vec<(String, HostTensor)>, HostError> {
    let graph = &*with_fed_defaults(graph, inputs.iter().map(|(n, _)| n.as_str()))?;
    validate::graph(graph)?;
    let bound = bind_inputs(graph, inputs, limits)?;
    let outputs = run_with(graph, bound.into_iter().map(Cow::Borrowed).collect(), Vec::new(), limits)?;
    Ok(graph.outputs.iter().map(|&v| graph.value_name(v)).zip(outputs).collect())
}

/// `graph` with the initializers that `names` feed made inputs ([`Graph::overriding`]): the
/// model's inputs with a default value that a run gives. Borrowed when it feeds none.
pub fn with_fed_defaults<'g, 'n>(
    graph: &'g Graph,
    names: impl Iterator<Item = &'n str>,
) -> Result<Cow<'g, Graph>, HostError> {
    let defaults = graph.default_names();
    let fed: Vec<&str> = names.filter(|n| defaults.iter().any(|d| d == n)).collect();
    if fed.is_empty() {
        return Ok(Cow::Borrowed(graph));
    }
    let name = fed.join(", ");
    graph.overriding(&fed).map(Cow::Owned).map_err(|detail| HostError::Input { name, detail })
}

/// Orders `inputs` as `graph.inputs` and checks dtypes and shapes against the declared infos.
fn bind_inputs<'t>(
    graph: &Graph,
    inputs: &'t [(String, HostTensor)],
    limits: Limits,
) -> Result<Vec<&'t HostTensor>, HostError> {
    let names: Vec<String> = graph.inputs.iter().map(|&v| graph.value_name(v)).collect();
    let mut slots: Vec<Option<&HostTensor>> = vec![None; names.len()];
    for (name, t) in inputs {
        let Some(i) = names.iter().position(|n| n == name) else {
            let detail = format!("not an input of the graph (inputs: {})", names.join(", "));
            return Err(HostError::Input { name: name.clone(), detail });
        };
        if slots[i].replace(t).is_some() {
            return Err(HostError::Input { name: name.clone(), detail: "given more than once".into() });
        }
    }
    let mut symbols: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
    let mut out = Vec::with_capacity(names.len());
    for ((&v, name), slot) in graph.inputs.iter().zip(&names).zip(slots) {
        let err = |detail: String| HostError::Input { name: name.clone(), detail };
        let info = graph.value(v).and_then(|vi| vi.info.as_ref());
        if let Some(info) = info {
            // A declared shape no run could hold is the model's fault: say so before asking for data.
            let known = info.shape.dims().iter().try_fold(1usize, |acc, d| match d {
                Dim::Known(n) => acc.checked_mul(*n),
                Dim::Symbol(_) => Some(acc),
            });
            let empty = info.shape.dims().iter().any(|d| matches!(d, Dim::Known(0)));
            if !empty && known.is_none_or(|n| n > limits.max_tensor_elems) {
                return Err(err(format!(
                    "declared shape {} exceeds the limit of {} elements per tensor",
                    info.shape, limits.max_tensor_elems
                )));
            }
        }
        let t = slot.ok_or_else(|| err("missing".into()))?;
        if let Some(info) = info {
            if info.dtype != t.dtype() {
                return Err(err(format!("expected dtype {}, got {}", info.dtype, t.dtype())));
            }
            if info.shape.rank() != t.shape().len() {
                return Err(err(format!("expected shape {}, got {:?}", info.shape, t.shape())));
            }
            for (d, (dim, &size)) in info.shape.dims().iter().zip(t.shape()).enumerate() {
                match dim {
                    Dim::Known(n) if *n != size => {
                        return Err(err(format!("dim {d} must be {n}, got {size} (shape {:?})", t.shape())));
                    }
                    Dim::Known(_) => {}
                    Dim::Symbol(s) => match symbols.get(s.as_str()) {
                        Some(&(bound, by)) if bound != size => {
                            return Err(err(format!(
                                "dim {d} (`{s}`) is {size}, but input `{by}` binds `{s}` = {bound}"
                            )));
                        }
                        Some(_) => {}
                        None => {
                            symbols.insert(s, (size, name));
                        }
                    },
                }
            }
        }
        out.push(t);
    }
    Ok(out)
}

/// Executes `graph` with `inputs` bound to `graph.inputs` and `captures` to `graph.captures`, in
/// order, without checking them against declared infos (control-flow bodies carry values whose
/// shapes change between iterations). Returns the outputs in graph-output order. Runs under the
/// default [`Limits`]; see [`run_with`].
pub fn run<'a>(
    graph: &Graph,
    inputs: Vec<Cow<'a, HostTensor>>,
    captures: Vec<Cow<'a, HostTensor>>,
) -> Result<Vec<HostTensor>, HostError> {
    run_with(graph, inputs, captures, Limits::default())
}

/// True for the ops that only move elements, copying them in their own dtype.
fn moves_elements(op: &planner::Op) -> bool {
    use planner::Op;
    matches!(
        op,
        Op::Identity
            | Op::Gather(_)
            | Op::GatherElements(_)
            | Op::Slice(_)
            | Op::Split(_)
            | Op::Concat(_)
            | Op::Tile
            | Op::Expand
            | Op::Reshape(_)
            | Op::Flatten(_)
            | Op::Squeeze(_)
            | Op::Unsqueeze(_)
            | Op::Transpose(_)
            | Op::Shape(_)
            | Op::Size
    )
}

/// Refuses a node that computes on a uint64 input holding a value past `i64::MAX`: the reference
/// reads integers as i64, which is exact for data movement ([`moves_elements`]) but not for
/// division, comparison or conversion of such values.
fn wide_u64(ctx: &NodeCtx, op: &planner::Op, ins: &[Option<&HostTensor>]) -> Result<(), HostError> {
    match ins.iter().flatten().find_map(|t| t.data().u64_in_i64()) {
        Some(big) if !moves_elements(op) => Err(ctx.unsupported(format!(
            "uint64 value {big} (past 2^63 - 1: the reference computes integers in i64)"
        ))),
        _ => Ok(()),
    }
}

/// Refuses a node that reads strings unless it moves elements, compares them for equality,
/// casts them or is a string op: everything else computes on numbers, which strings are not
/// (numbers spelled as text are read only by `Cast`).
fn strings_allowed(ctx: &NodeCtx, op: &planner::Op, ins: &[Option<&HostTensor>]) -> Result<(), HostError> {
    use planner::Op;
    let takes_strings = moves_elements(op)
        || matches!(
            op,
            Op::Cast(_)
                | Op::CastLike(_)
                | Op::Equal
                | Op::StringNormalizer(_)
                | Op::StringSplit(_)
                | Op::StringConcat
                | Op::RegexFullMatch(_)
                | Op::LabelEncoder(_)
                | Op::If(_)
                | Op::Loop(_)
                | Op::Scan(_)
        );
    if !takes_strings && ins.iter().flatten().any(|t| t.dtype() == planner::DType::String) {
        return Err(ctx.unsupported("string operands (the reference computes this op on numbers only)"));
    }
    Ok(())
}

/// Bytes held by `t` (a string's text too).
fn tensor_bytes(t: &HostTensor) -> u64 {
    let headers = (t.len() as u64).saturating_mul(t.dtype().size_bytes() as u64);
    match t.data() {
        crate::tensor::TensorData::String(v) => {
            headers.saturating_add(v.iter().map(|s| s.len() as u64).sum::<u64>())
        }
        _ => headers,
    }
}

/// [`NodeCtx::string_bytes`] of a node reading `ins`.
fn string_bytes(ins: &[Option<&HostTensor>]) -> u64 {
    ins.iter()
        .flatten()
        .filter_map(|t| match t.data() {
            crate::tensor::TensorData::String(v) => v.iter().map(|s| s.len() as u64).max(),
            _ => None,
        })
        .fold(0u64, u64::saturating_add)
}

/// [`run`] under explicit size [`Limits`] (control-flow bodies pass their node's limits on).
pub fn run_with<'a>(
    graph: &Graph,
    inputs: Vec<Cow<'a, HostTensor>>,
    captures: Vec<Cow<'a, HostTensor>>,
    limits: Limits,
) -> Result<Vec<HostTensor>, HostError> {
    let graph_err = |detail: String| HostError::Op { node: "graph".into(), op: "", detail };
    if inputs.len() != graph.inputs.len() || captures.len() != graph.captures.len() {
        return Err(graph_err(format!(
            "graph takes {} inputs and {} captures, given {} and {}",
            graph.inputs.len(),
            graph.captures.len(),
            inputs.len(),
            captures.len()
        )));
    }
    let order = validate::topo_order(graph)?;
    let mut values: Vec<Option<Cow<'a, HostTensor>>> = vec![None; graph.values.len()];
    let mut put = |v: ValueId, t: Cow<'a, HostTensor>| match values.get_mut(v.index()) {
        Some(slot) => {
            *slot = Some(t);
            Ok(())
        }
        None => Err(graph_err(format!("value {v} is out of range"))),
    };
    for (&v, t) in graph.inputs.iter().zip(inputs) {
        put(v, t)?;
    }
    for (c, t) in graph.captures.iter().zip(captures) {
        put(c.inner, t)?;
    }
    for (&v, c) in &graph.initializers {
        if let Some(n) = crate::tensor::elem_count(&c.dims).filter(|&n| n > limits.max_tensor_elems) {
            let detail =
                format!("initializer has {n} elements, over the limit of {}", limits.max_tensor_elems);
            return Err(HostError::Limit { node: graph.value_name(v), op: "initializer", detail });
        }
    }
    for (&v, c) in &graph.initializers {
        put(v, Cow::Owned(HostTensor::from_const(c)?))?;
    }
    let mut live: u64 = values.iter().flatten().map(|t| tensor_bytes(t)).sum();
    if live > limits.max_total_bytes {
        let detail = format!(
            "the inputs and initializers hold {live} bytes, over the memory budget of {} bytes \
             (--max-memory)",
            limits.max_total_bytes
        );
        return Err(HostError::Limit { node: "graph".into(), op: "inputs", detail });
    }
    let release = release_schedule(graph, &order);
    for (step, &id) in order.iter().enumerate() {
        let node = &graph.nodes[id.index()];
        let label = graph.node_label(id);
        let mut ctx = NodeCtx { name: &label, op: node.op.name(), limits, live, string_bytes: 0 };
        let results = {
            let scope = Scope { values: &values };
            let mut ins = Vec::with_capacity(node.inputs.len());
            for slot in &node.inputs {
                ins.push(match slot {
                    Some(v) => Some(scope.get(*v).ok_or_else(|| {
                        ctx.err(format!("input `{}` is not available", graph.value_name(*v)))
                    })?),
                    None => None,
                });
            }
            wide_u64(&ctx, &node.op, &ins)?;
            strings_allowed(&ctx, &node.op, &ins)?;
            ctx.string_bytes = string_bytes(&ins);
            dispatch::node(&ctx, node, &ins, scope).map_err(|e| match e {
                HostError::HostMemory { bytes, what } => ctx.limit(format!(
                    "out of host memory: allocating {bytes} bytes for {what} failed \
                     (live values hold {live} bytes)"
                )),
                HostError::Unsupported { node, detail, .. } if node.is_empty() => ctx.unsupported(detail),
                e => e,
            })?
        };
        let produced = results.len();
        let mut results = results.into_iter();
        for (slot, out) in node.outputs.iter().enumerate() {
            let t = results.next();
            if let Some(v) = out {
                let t = t.ok_or_else(|| {
                    ctx.err(format!("produced {produced} outputs, but output slot {slot} is used"))
                })?;
                // Backstop for ops whose output size is not checked up front (bounded by their inputs).
                ctx.check_elems(t.len(), &format!("output {slot}"))?;
                live = live.saturating_add(tensor_bytes(&t));
                let dst = values
                    .get_mut(v.index())
                    .ok_or_else(|| ctx.err(format!("output {v} is out of range")))?;
                *dst = Some(Cow::Owned(t));
            }
        }
        if live > limits.max_total_bytes {
            return Err(ctx.limit(format!(
                "live values hold {live} bytes after this node, over the memory budget of {} bytes \
                 (--max-memory)",
                limits.max_total_bytes
            )));
        }
        for v in &release[step] {
            if let Some(t) = values[v.index()].take() {
                live = live.saturating_sub(tensor_bytes(&t));
            }
        }
    }
    let mut outs = Vec::with_capacity(graph.outputs.len());
    for (i, &v) in graph.outputs.iter().enumerate() {
        let again = graph.outputs[i + 1..].contains(&v);
        let slot =
            values.get_mut(v.index()).ok_or_else(|| graph_err(format!("output {v} is out of range")))?;
        let t = if again { slot.clone() } else { slot.take() };
        outs.push(
            t.ok_or_else(|| graph_err(format!("output `{}` was never computed", graph.value_name(v))))?
                .into_owned(),
        );
    }
    Ok(outs)
}

/// For each step of `order`, the values to free after it: every value that is not a graph output,
/// after its last reader (or right after its producer, or the first step, when nothing reads it).
fn release_schedule(graph: &Graph, order: &[planner::NodeId]) -> Vec<Vec<ValueId>> {
    let mut last: Vec<Option<usize>> = vec![None; graph.values.len()];
    for (step, &id) in order.iter().enumerate() {
        let node = &graph.nodes[id.index()];
        for v in node.uses().into_iter().chain(node.outputs.iter().flatten().copied()) {
            if let Some(l) = last.get_mut(v.index()) {
                *l = Some(step);
            }
        }
    }
    let mut release = vec![Vec::new(); order.len()];
    for (v, step) in last.iter().enumerate() {
        let id = ValueId(v as u32);
        if let Some(step) = step
            && !graph.outputs.contains(&id)
        {
            release[*step].push(id);
        }
    }
    release
}
