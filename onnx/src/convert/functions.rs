//! Model-local functions (`ModelProto.functions`, which exporters emit for modules they keep as
//! units): every call is replaced by the function's body before conversion, as the ONNX spec
//! defines a call. The body's values are renamed apart (prefixed per call), its formal inputs and
//! outputs become the call's actual ones (an omitted optional input stays omitted), attribute
//! references (`ref_attr_name`) take the call's attribute or the function's default (an attribute
//! neither gives is left out), and calls inside the body, subgraphs included, are inlined in turn.
//! A function that calls itself, directly or not, is refused rather than expanded forever, and so
//! are calls whose inlining would add more than a million nodes.

use std::collections::HashMap;

use crate::error::OnnxError;
use crate::proto::{AttributeProto, FunctionProto, GraphProto, NodeProto};

/// Deepest nesting of calls inlined (a recursive function reaches it).
const MAX_DEPTH: usize = 64;
/// Most nodes the inlined bodies may add in all: functions that each call the next twice would
/// otherwise grow the graph exponentially within the depth limit.
const MAX_INLINED_NODES: usize = 1 << 20;

/// `graph` with every call of a function of `functions` inlined (subgraphs included).
pub(super) fn inline(graph: &GraphProto, functions: &[FunctionProto]) -> Result<GraphProto, OnnxError> {
    let mut g = graph.clone();
    let (mut calls, mut inlined) = (0usize, 0usize);
    inline_graph(&mut g, functions, (&mut calls, &mut inlined), 0)?;
    Ok(g)
}

fn find<'f>(functions: &'f [FunctionProto], n: &NodeProto) -> Option<&'f FunctionProto> {
    functions.iter().find(|f| f.name == n.op_type && f.domain == n.domain && f.overload == n.overload)
}

/// (`calls` counts the calls inlined, `inlined` the nodes they added.)
fn inline_graph(
    g: &mut GraphProto,
    functions: &[FunctionProto],
    (calls, inlined): (&mut usize, &mut usize),
    depth: usize,
) -> Result<(), OnnxError> {
    let nodes = std::mem::take(&mut g.node);
    g.node = inline_nodes(nodes, functions, (calls, inlined), depth)?;
    Ok(())
}

/// `nodes` with the calls among them (and in their subgraphs) replaced by the bodies.
fn inline_nodes(
    nodes: Vec<NodeProto>,
    functions: &[FunctionProto],
    (calls, inlined): (&mut usize, &mut usize),
    depth: usize,
) -> Result<Vec<NodeProto>, OnnxError> {
    let mut out = Vec::with_capacity(nodes.len());
    for mut n in nodes {
        for a in &mut n.attribute {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                inline_graph(sub, functions, (&mut *calls, &mut *inlined), depth)?;
            }
        }
        let Some(f) = find(functions, &n) else {
            out.push(n);
            continue;
        };
        if depth >= MAX_DEPTH {
            let why =
                format!("model-local function calls nest deeper than {MAX_DEPTH} (a recursive function?)");
            return Err(invalid_call(&n, why));
        }
        *calls += 1;
        let body = expand(f, &n, *calls)?;
        *inlined += body.len();
        if *inlined > MAX_INLINED_NODES {
            let why =
                format!("inlining the model-local functions would add more than {MAX_INLINED_NODES} nodes");
            return Err(invalid_call(&n, why));
        }
        out.extend(inline_nodes(body, functions, (calls, inlined), depth + 1)?);
    }
    Ok(out)
}

/// The error of call `n` (named with its domain), for `detail`.
fn invalid_call(n: &NodeProto, detail: String) -> OnnxError {
    OnnxError::InvalidNode { node: n.name.clone(), op_type: format!("{}::{}", n.domain, n.op_type), detail }
}

/// The body of `f` for the call `n` (the `k`-th inlined), renamed and with its attributes bound.
fn expand(f: &FunctionProto, n: &NodeProto, k: usize) -> Result<Vec<NodeProto>, OnnxError> {
    if n.input.len() > f.input.len() || n.output.len() > f.output.len() {
        let why = format!(
            "calls function '{}' with {} inputs and {} outputs; it declares {} and {}",
            f.name,
            n.input.len(),
            n.output.len(),
            f.input.len(),
            f.output.len()
        );
        return Err(invalid_call(n, why));
    }
    let label = if n.name.is_empty() { &f.name } else { &n.name };
    let prefix = format!("{label}/{k}/");
    let mut names: HashMap<String, String> = HashMap::new();
    for (i, formal) in f.input.iter().enumerate() {
        names.insert(formal.clone(), n.input.get(i).cloned().unwrap_or_default());
    }
    for (i, formal) in f.output.iter().enumerate() {
        let actual = n.output.get(i).filter(|o| !o.is_empty()).cloned();
        names.insert(formal.clone(), actual.unwrap_or_else(|| format!("{prefix}{formal}")));
    }
    let rename = |name: &str| -> String {
        if name.is_empty() {
            return String::new();
        }
        names.get(name).cloned().unwrap_or_else(|| format!("{prefix}{name}"))
    };
    // The call's attributes, then the function's defaults, by name.
    let actual = |name: &str| -> Option<AttributeProto> {
        n.attribute
            .iter()
            .find(|a| a.name == name)
            .or_else(|| f.attribute_proto.iter().find(|a| a.name == name))
            .cloned()
    };
    let mut body = Vec::with_capacity(f.node.len());
    for b in &f.node {
        let mut b = b.clone();
        b.name = format!("{prefix}{}", b.name);
        b.input = b.input.iter().map(|s| rename(s)).collect();
        b.output = b.output.iter().map(|s| rename(s)).collect();
        let mut attrs = Vec::with_capacity(b.attribute.len());
        for mut a in std::mem::take(&mut b.attribute) {
            if !a.ref_attr_name.is_empty() {
                let Some(mut v) = actual(&a.ref_attr_name) else { continue };
                v.name = a.name.clone();
                a = v;
            }
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                rename_graph(sub, &rename);
            }
            attrs.push(a);
        }
        b.attribute = attrs;
        body.push(b);
    }
    Ok(body)
}

/// Every name in subgraph `g` (inputs, outputs, initializers, nodes, nested subgraphs) through
/// `rename`, so that it reads the call's renamed values.
fn rename_graph(g: &mut GraphProto, rename: &dyn Fn(&str) -> String) {
    for vi in g.input.iter_mut().chain(g.output.iter_mut()).chain(g.value_info.iter_mut()) {
        vi.name = rename(&vi.name);
    }
    for t in &mut g.initializer {
        t.name = rename(&t.name);
    }
    for n in &mut g.node {
        n.input = n.input.iter().map(|s| rename(s)).collect();
        n.output = n.output.iter().map(|s| rename(s)).collect();
        for a in &mut n.attribute {
            for sub in a.g.iter_mut().chain(a.graphs.iter_mut()) {
                rename_graph(sub, rename);
            }
        }
    }
}
