#!/usr/bin/env python3
"""A chain of N nodes for planning-time scaling: `ew` (Relu, Neg, Abs, Sigmoid in turn) or `sm`
(Softmax and Add of the input in turn), on x: float[4, 64].

    python3 benches/models/chain.py N ew|sm OUT.onnx
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
    else:  # softmax / add alternating
        if i % 2 == 0:
            nodes.append(helper.make_node("Softmax", [prev], [y], name=f"n{i}", axis=-1))
        else:
            nodes.append(helper.make_node("Add", [prev, "x"], [y], name=f"n{i}"))
    prev = y
g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                      [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), out)
