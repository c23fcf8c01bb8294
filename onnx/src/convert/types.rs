//! Declared value types: `ValueInfoProto` -> planner `TensorInfo`, with symbolic dims.
//!
//! `dim_value` becomes `Dim::Known`, a non-empty `dim_param` becomes `Dim::Symbol` with the same
//! name (equal names are equal sizes model-wide, as in ONNX), and a dim with neither becomes a
//! fresh symbol `<value>_dim<axis>` that no other dim of the model uses; so do a negative
//! `dim_value`, which some converters write for "unknown", and a `dim_param` of `?` (which
//! PaddleOCR's exports write for height and width, sizes that differ). A type without a shape (unknown rank)
//! or without an element type declares nothing (`None`).

use std::collections::BTreeSet;

use planner::{Dim, Shape, TensorInfo};

use crate::proto::tensor_shape_proto::dimension::Value as DimValue;
use crate::proto::type_proto::Value as TypeValue;
use crate::proto::{GraphProto, TypeProto, ValueInfoProto};

use super::tensor;

/// Names fresh symbols for dims a model leaves anonymous, avoiding every `dim_param` it uses.
#[derive(Debug, Clone, Default)]
pub(crate) struct DimNamer {
    taken: BTreeSet<String>,
}

impl DimNamer {
    /// A namer that avoids every symbol declared anywhere in `graph` (subgraphs included).
    pub(crate) fn for_graph(graph: &GraphProto) -> Self {
        let mut namer = DimNamer::default();
        namer.collect(graph);
        namer
    }

    fn collect(&mut self, graph: &GraphProto) {
        for vi in graph.input.iter().chain(&graph.output).chain(&graph.value_info) {
            if let Some(TypeValue::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
                for d in t.shape.iter().flat_map(|s| &s.dim) {
                    if let Some(DimValue::DimParam(p)) = &d.value {
                        self.taken.insert(p.clone());
                    }
                }
            }
        }
        for node in &graph.node {
            for a in &node.attribute {
                for g in a.g.iter().chain(&a.graphs) {
                    self.collect(g);
                }
            }
        }
    }

    /// A symbol for dim `axis` of `value` that no other dim uses.
    pub(crate) fn fresh(&mut self, value: &str, axis: usize) -> Dim {
        let base = format!("{value}_dim{axis}");
        let mut name = base.clone();
        let mut n = 1u32;
        while self.taken.contains(&name) {
            n += 1;
            name = format!("{base}_{n}");
        }
        self.taken.insert(name.clone());
        Dim::Symbol(name)
    }
}

/// The declared info of `vi`: `Ok(None)` when its type or shape is not declared, `Err` with the
/// reason when it is declared but not a tensor of a planner dtype.
pub(crate) fn declared(vi: &ValueInfoProto, dims: &mut DimNamer) -> Result<Option<TensorInfo>, String> {
    match &vi.r#type {
        Some(ty) => of_type(&vi.name, ty, dims),
        None => Ok(None),
    }
}

fn of_type(name: &str, ty: &TypeProto, namer: &mut DimNamer) -> Result<Option<TensorInfo>, String> {
    let t = match &ty.value {
        None => return Ok(None),
        Some(TypeValue::TensorType(t)) => t,
        Some(TypeValue::SequenceType(_)) => return Err("sequence values are not supported".into()),
        Some(TypeValue::MapType(_)) => return Err("map values are not supported".into()),
        Some(TypeValue::OptionalType(_)) => return Err("optional values are not supported".into()),
        Some(TypeValue::SparseTensorType(_)) => return Err("sparse tensor values are not supported".into()),
        Some(TypeValue::OpaqueType(_)) => return Err("opaque values are not supported".into()),
    };
    if t.elem_type == 0 {
        return Ok(None);
    }
    let dtype = tensor::dtype(t.elem_type).map_err(|issue| issue.to_string())?;
    let Some(shape) = &t.shape else { return Ok(None) };
    let mut dims = Vec::with_capacity(shape.dim.len());
    for (axis, d) in shape.dim.iter().enumerate() {
        dims.push(match &d.value {
            Some(DimValue::DimValue(v)) if *v >= 0 => match usize::try_from(*v) {
                Ok(v) => Dim::Known(v),
                Err(_) => return Err(format!("dim {axis} ({v}) does not fit in memory")),
            },
            // `?` (PaddleOCR's exports, among others) names no symbol: each is a dim of its own.
            Some(DimValue::DimParam(p)) if !p.is_empty() && p != "?" => Dim::Symbol(p.clone()),
            _ => namer.fresh(name, axis),
        });
    }
    Ok(Some(TensorInfo { dtype, shape: Shape(dims) }))
}
