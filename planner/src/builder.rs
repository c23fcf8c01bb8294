//! A small builder API on `Graph` for tests and fixtures: `g.input(..)`, `g.add(a, b)`, `g.relu(x)`.
//!
//! Nodes get generated names (`relu_3`) and their outputs `relu_3:0`, `relu_3:1`, ... Output values
//! carry no declared info; shape inference computes it.

use crate::constant::ConstTensor;
use crate::graph::{Graph, Node, ValueId};
use crate::op::{self, Op};
use crate::tensor_info::{DType, Dim, TensorInfo};

impl Graph {
    /// Adds a graph input with a declared dtype and dims (`3usize`, `"batch"`).
    pub fn input(
        &mut self,
        name: &str,
        dtype: DType,
        dims: impl IntoIterator<Item = impl Into<Dim>>,
    ) -> ValueId {
        let v = self.add_value(name, Some(TensorInfo::new(dtype, dims)));
        self.inputs.push(v);
        v
    }

    /// Adds an initializer (constant) value.
    pub fn initializer(&mut self, name: &str, tensor: ConstTensor) -> ValueId {
        let v = self.add_value(name, None);
        self.initializers.insert(v, tensor);
        v
    }

    /// Adds an `I64` initializer; panics if `values` does not fill `dims` (test fixtures only).
    pub fn const_i64(&mut self, name: &str, dims: &[usize], values: &[i64]) -> ValueId {
        let t = ConstTensor::from_i64(dims, values).expect("builder: values fill dims");
        self.initializer(name, t)
    }

    /// Marks `v` as a graph output.
    pub fn output(&mut self, v: ValueId) {
        self.outputs.push(v);
    }

    /// Appends a node with optional inputs and `outputs` fresh output values; returns the outputs.
    pub fn push_opt(&mut self, op: Op, inputs: Vec<Option<ValueId>>, outputs: usize) -> Vec<ValueId> {
        let name = format!("{}_{}", op.name().to_lowercase(), self.nodes.len());
        let outs: Vec<ValueId> = (0..outputs).map(|i| self.add_value(format!("{name}:{i}"), None)).collect();
        self.add_node(Node { name, op, inputs, outputs: outs.iter().copied().map(Some).collect() });
        outs
    }

    /// Appends a node with `outputs` outputs; returns them.
    pub fn push(&mut self, op: Op, inputs: &[ValueId], outputs: usize) -> Vec<ValueId> {
        self.push_opt(op, inputs.iter().copied().map(Some).collect(), outputs)
    }

    /// Appends a single-output node; returns its output.
    pub fn op1(&mut self, op: Op, inputs: &[ValueId]) -> ValueId {
        let outs = self.push(op, inputs, 1);
        outs[0]
    }

    /// `a + b`.
    pub fn add(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op1(Op::Add, &[a, b])
    }

    /// `a - b`.
    pub fn sub(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op1(Op::Sub, &[a, b])
    }

    /// `a * b`.
    pub fn mul(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op1(Op::Mul, &[a, b])
    }

    /// `a / b`.
    pub fn div(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op1(Op::Div, &[a, b])
    }

    /// `relu(x)`.
    pub fn relu(&mut self, x: ValueId) -> ValueId {
        self.op1(Op::Relu, &[x])
    }

    /// `sigmoid(x)`.
    pub fn sigmoid(&mut self, x: ValueId) -> ValueId {
        self.op1(Op::Sigmoid, &[x])
    }

    /// `a @ b`.
    pub fn matmul(&mut self, a: ValueId, b: ValueId) -> ValueId {
        self.op1(Op::MatMul, &[a, b])
    }

    /// Softmax along `axis`.
    pub fn softmax(&mut self, x: ValueId, axis: i64) -> ValueId {
        self.op1(Op::Softmax(op::Softmax { axis }), &[x])
    }

    /// Cast to `to`.
    pub fn cast(&mut self, x: ValueId, to: DType) -> ValueId {
        self.op1(Op::Cast(op::Cast::to(to)), &[x])
    }

    /// `Shape(x)`.
    pub fn shape_of(&mut self, x: ValueId) -> ValueId {
        self.op1(Op::Shape(op::ShapeOf::default()), &[x])
    }

    /// `Gather(data, indices, axis)`.
    pub fn gather(&mut self, data: ValueId, indices: ValueId, axis: i64) -> ValueId {
        self.op1(Op::Gather(op::Gather { axis }), &[data, indices])
    }

    /// `Unsqueeze(x, axes)` with `axes` an I64 value (opset 13 form).
    pub fn unsqueeze(&mut self, x: ValueId, axes: ValueId) -> ValueId {
        self.op1(Op::Unsqueeze(op::Unsqueeze::default()), &[x, axes])
    }

    /// `Concat(values, axis)`.
    pub fn concat(&mut self, values: &[ValueId], axis: i64) -> ValueId {
        self.op1(Op::Concat(op::Concat { axis }), values)
    }

    /// `Reshape(x, shape)`.
    pub fn reshape(&mut self, x: ValueId, shape: ValueId) -> ValueId {
        self.op1(Op::Reshape(op::Reshape::default()), &[x, shape])
    }

    /// `Transpose(x, perm)`.
    pub fn transpose(&mut self, x: ValueId, perm: &[usize]) -> ValueId {
        self.op1(Op::Transpose(op::Transpose { perm: Some(perm.to_vec()) }), &[x])
    }

    /// `Where(cond, x, y)`.
    pub fn where_(&mut self, cond: ValueId, x: ValueId, y: ValueId) -> ValueId {
        self.op1(Op::Where, &[cond, x, y])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_named_nodes_and_outputs() {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [2usize, 3]);
        let y = g.relu(x);
        g.output(y);
        assert_eq!(g.nodes.len(), 1);
        assert_eq!(g.nodes[0].name, "relu_0");
        assert_eq!(g.value_name(y), "relu_0:0");
        assert_eq!(g.inputs, vec![x]);
        assert_eq!(g.outputs, vec![y]);
    }
}
