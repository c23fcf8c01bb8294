//! Constructors of the control-flow operators `If`, `Loop` and `Scan`.
//!
//! Bodies are converted recursively as nested scopes (see `Converter::graph`): a body's read of an
//! enclosing graph's value becomes a `Capture`, so the planner sees each body as a closed graph.
//! Slot counts against the bodies are checked afterwards by `planner::validate::graph`.

use planner::op::{self, Op};
use planner::{Capture, Graph, Node};

use crate::error::OnnxError;

use super::lower::Lower;

/// `If(cond)` with `then_branch` and `else_branch`.
pub(crate) fn if_(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let then_branch = l.subgraph("then_branch")?;
    let else_branch = l.subgraph("else_branch")?;
    l.emit(Op::If(op::If { then_branch, else_branch }))
}

/// `Loop(M?, cond?, v...)` with `body`.
pub(crate) fn loop_(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    let body = l.subgraph("body")?;
    l.emit(Op::Loop(op::Loop { body }))
}

/// `Scan(states..., scan inputs...)` with `body` and the per-input/output axis and direction
/// lists (absent lists are empty, meaning axis 0 and forward). Opset 8 is rewritten by [`scan8`].
pub(crate) fn scan(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    if l.opset < 9 {
        return scan8(l);
    }
    let a = l.attrs();
    let num_scan_inputs = a.required("num_scan_inputs", a.usize("num_scan_inputs")?)?;
    let list = |name: &str| a.ints(name).map(Option::unwrap_or_default);
    let (scan_input_axes, scan_input_directions) = (list("scan_input_axes")?, list("scan_input_directions")?);
    let (scan_output_axes, scan_output_directions) =
        (list("scan_output_axes")?, list("scan_output_directions")?);
    for (name, dirs) in [
        ("scan_input_directions", &scan_input_directions),
        ("scan_output_directions", &scan_output_directions),
    ] {
        if dirs.iter().any(|&d| d != 0 && d != 1) {
            return Err(a.invalid(name, format!("{dirs:?} holds values other than 0 and 1")));
        }
    }
    let body = l.subgraph("body")?;
    l.emit(Op::Scan(op::Scan {
        body,
        num_scan_inputs,
        scan_input_axes,
        scan_input_directions,
        scan_output_axes,
        scan_output_directions,
    }))
}

/// `Scan-8(sequence_lens?, states..., scan inputs...)`: every state and scan input carries a
/// leading batch axis (scan inputs scan along axis 1), `directions` gives each scan input's
/// direction, and scan outputs are stacked forward. Each batch entry is an independent scan, so
/// the node becomes an outer `Scan` over the batch axis (no states; every input a scan input)
/// whose body runs the opset-9 `Scan` on one entry. `sequence_lens` (per-entry lengths) has no
/// such form and is rejected.
fn scan8(l: &mut Lower<'_, '_>) -> Result<(), OnnxError> {
    if l.input(0).is_some() {
        return Err(l.invalid("Scan-8 sequence_lens (per-batch lengths) is not supported"));
    }
    let a = l.attrs();
    let m = a.required("num_scan_inputs", a.usize("num_scan_inputs")?)?;
    let directions = a.ints("directions")?.unwrap_or_default();
    if directions.iter().any(|&d| d != 0 && d != 1) {
        return Err(a.invalid("directions", format!("{directions:?} holds values other than 0 and 1")));
    }
    let inputs: Vec<Option<planner::ValueId>> = l.inputs_from(1);
    if inputs.len() < m || m == 0 {
        return Err(
            l.invalid(format!("{} inputs after sequence_lens but num_scan_inputs = {m}", inputs.len()))
        );
    }
    let mut inner = l.subgraph("body")?;
    let n_outputs = inner.outputs.len();
    // The per-entry body: one input per outer input, one `Scan` node, its outputs.
    let mut middle = Graph::new();
    let slots: Vec<Option<planner::ValueId>> =
        (0..inputs.len()).map(|i| Some(middle.add_value(format!("scan8/in{i}"), None))).collect();
    middle.inputs = slots.iter().flatten().copied().collect();
    // Values the body reads from the enclosing graph pass through the new level.
    for c in &mut inner.captures {
        let through = middle.add_value(format!("scan8/capture{}", middle.captures.len()), None);
        middle.captures.push(Capture { inner: through, outer: c.outer });
        c.outer = through;
    }
    let outs: Vec<planner::ValueId> =
        (0..n_outputs).map(|k| middle.add_value(format!("scan8/out{k}"), None)).collect();
    middle.outputs = outs.clone();
    let per_entry = op::Scan {
        body: inner,
        num_scan_inputs: m,
        scan_input_axes: Vec::new(),
        scan_input_directions: directions,
        scan_output_axes: Vec::new(),
        scan_output_directions: Vec::new(),
    };
    middle.add_node(Node {
        name: format!("{}/per_entry", l.label()),
        op: Op::Scan(per_entry),
        inputs: slots,
        outputs: outs.into_iter().map(Some).collect(),
    });
    let outer = op::Scan {
        body: Box::new(middle),
        num_scan_inputs: inputs.len(),
        scan_input_axes: Vec::new(),
        scan_input_directions: Vec::new(),
        scan_output_axes: Vec::new(),
        scan_output_directions: Vec::new(),
    };
    l.emit_with_inputs(Op::Scan(outer), inputs)
}
