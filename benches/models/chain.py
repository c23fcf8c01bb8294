#!/usr/bin/env python3
"""A chain of N nodes for planning-time scaling: `ew` (Relu, Neg, Abs, Sigmoid in turn), `sm`
(Softmax and Add of the input in turn) or `mix` (Relu, Softmax, ReduceSum, Add of the input,
ReduceMax, Mul by the input in turn: elementwise, row and reduction ops, the reductions' [4, 1]
broadcast back), on x: float[4, 64].

    python3 benches/models/chain.py N ew|sm|mix OUT.onnx
"""
import sys, onnx
from onnx import helper, TensorProto
n = int(sys.argv[1]); kind = sys.argv[2]; out = sys.argv[3]
nodes = []; prev = "x"
for i in range(n):
    y = f"v{i}"
    if kind == "ew":
        op = ["Relu", "Neg", "Abs", "Sigmoid"][i % 4]
        nodes.append(helper.make_node(op, [prev], [y], name=f"n{i}"))
    elif kind == "mix":
        k = i % 6
        if k == 0:
            nodes.append(helper.make_node("Relu", [prev], [y], name=f"n{i}"))
        elif k == 1:
            nodes.append(helper.make_node("Softmax", [prev], [y], name=f"n{i}", axis=-1))
        elif k == 2:
            nodes.append(helper.make_node("ReduceSum", [prev, "axes"], [y], name=f"n{i}", keepdims=1))
        elif k == 4:
            nodes.append(helper.make_node("ReduceMax", [prev], [y], name=f"n{i}", axes=[-1], keepdims=1))
        else:
            nodes.append(helper.make_node("Add" if k == 3 else "Mul", [prev, "x"], [y], name=f"n{i}"))
    else:  # softmax / add alternating
        if i % 2 == 0:
            nodes.append(helper.make_node("Softmax", [prev], [y], name=f"n{i}", axis=-1))
        else:
            nodes.append(helper.make_node("Add", [prev, "x"], [y], name=f"n{i}"))
    prev = y
axes = [helper.make_tensor("axes", TensorProto.INT64, [1], [-1])] if kind == "mix" else []
g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                      [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], initializer=axes)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), out)
