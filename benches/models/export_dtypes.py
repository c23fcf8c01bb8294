#!/usr/bin/env python3
"""Exports the benchmark's GPT-2-style and CNN models in the dtypes deployed models use (issue 23):

- NAME_f16 / NAME_bf16: the module converted with `model.half()` / `model.to(torch.bfloat16)`
  and exported as `export_users.py` exports (dynamo, symbolic batch and sequence), so every
  weight, activation and float output is f16 / bf16 (token ids stay int64).
- NAME_int8: the fp32 export quantized with ONNX Runtime's `quantize_static` (QDQ format, its
  defaults: uint8 activations, int8 weights, per-tensor, MinMax calibration on CALIBRATION
  seeded inputs), after `quant_pre_process` as ONNX Runtime's documentation prescribes.

Writes NAME.onnx and NAME.in.<input>.npy (the reference input of the fp32 export, cast to the
model's float dtype; bf16 as ferrofuse's `bfloat16` .npy) into OUT_DIR, and for f16 / bf16
NAME.out.npy (PyTorch's CPU output in that dtype, widened to f32); the fp32 export itself is made
there first when missing.

    python3 benches/models/export_dtypes.py OUT_DIR [NAME ...]   (default: all six)
"""
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_users as eu  # noqa: E402

FAMILIES = ("gpt2", "cnn")
CALIBRATION = 8
TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def names():
    return [f"{f}_{d}" for f in FAMILIES for d in ("f16", "bf16", "int8")]


def float_export(family, kind, out_dir, path):
    torch.manual_seed(0)
    model, inputs, dyn = eu.MODELS[family]()
    dtype = TORCH_DTYPES[kind]
    model = model.to(dtype).eval()
    inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}
    dynamic_shapes = tuple({k: torch.export.Dim.AUTO for k in d} for d in dyn.values())
    with torch.no_grad():
        # PyTorch's own output in this dtype (on the CPU): the reference where ONNX Runtime CPU
        # has no kernels for the dtype (bf16).
        want = model(*inputs.values()).float().numpy()
        prog = torch.onnx.export(model, tuple(inputs.values()), input_names=list(inputs), dynamo=True,
                                 dynamic_shapes=dynamic_shapes)
    prog.save(path)
    import onnx
    m = onnx.load(path)
    eu.name_dims(m, list(inputs), dyn)
    conv_weights_to(m, kind)
    onnx.save(m, path)
    stem = os.path.basename(path)[:-5]
    np.save(os.path.join(out_dir, f"{stem}.out.npy"), want)
    for k, v in inputs.items():
        out = os.path.join(out_dir, f"{stem}.in.{k}.npy")
        if v.dtype == torch.bfloat16:
            # NumPy has no bf16: written as ferrofuse's `bfloat16` .npy (the raw u16 bits).
            write_bf16_npy(out, v.view(torch.int16).numpy().view(np.uint16))
        else:
            np.save(out, v.numpy())


def conv_weights_to(m, kind):
    """The exporter's BatchNorm folding (torch 2.11) leaves a bf16 model's folded Conv weights and
    biases in float32, which makes the model invalid (Conv's inputs share one type: ONNX Runtime
    and ferrofuse both refuse it); converts them to the model's dtype, as a user meeting that
    error would."""
    import ml_dtypes
    from onnx import TensorProto, numpy_helper
    to = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[kind]
    slots = {name for n in m.graph.node if n.op_type == "Conv" for name in n.input[1:3]}
    for i, t in enumerate(m.graph.initializer):
        if t.name in slots and t.data_type == TensorProto.FLOAT:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(to), t.name))
    for v in m.graph.value_info:
        if v.name in slots and v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = TensorProto.BFLOAT16 if kind == "bf16" else TensorProto.FLOAT16


def write_bf16_npy(path, bits):
    """An .npy of bf16 bit patterns under the descr `bfloat16` (how ferrofuse reads and writes
    bf16; NumPy itself has no such dtype)."""
    header = f"{{'descr': 'bfloat16', 'fortran_order': False, 'shape': {tuple(bits.shape)!r}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        f.write(np.ascontiguousarray(bits, dtype="<u2").tobytes())


class Calibration:
    """`CalibrationDataReader` over CALIBRATION seeded inputs shaped like the reference ones."""

    def __init__(self, family, out_dir):
        rng = np.random.default_rng(1)
        ref = {k: np.load(os.path.join(out_dir, f"{family}.in.{k}.npy")) for k in input_names(family)}
        self.batches = []
        for _ in range(CALIBRATION):
            batch = {}
            for k, v in ref.items():
                if v.dtype == np.int64 and k == "input_ids":
                    batch[k] = rng.integers(0, eu.VOCAB, v.shape).astype(np.int64)
                elif v.dtype == np.int64:
                    batch[k] = v
                else:
                    batch[k] = rng.standard_normal(v.shape).astype(v.dtype)
            self.batches.append(batch)

    def get_next(self):
        return self.batches.pop() if self.batches else None


def input_names(family):
    return list(eu.MODELS[family]()[1])


def int8_export(family, out_dir, path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(Calibration, CalibrationDataReader):
        def get_next(self):
            return Calibration.get_next(self)

    fp32 = os.path.join(out_dir, f"{family}.onnx")
    pre = path[:-5] + ".pre.onnx"
    # ONNX Runtime's symbolic shape inference fails on dynamo exports (a Range limit it cannot read):
    # users skip it, as here; ONNX's own shape inference still runs.
    quant_pre_process(fp32, pre, skip_symbolic_shape=True)
    quantize_static(pre, path, Reader(family, out_dir), quant_format=QuantFormat.QDQ)
    os.remove(pre)
    for k in input_names(family):
        src = os.path.join(out_dir, f"{family}.in.{k}.npy")
        np.save(os.path.join(out_dir, f"{family}_int8.in.{k}.npy"), np.load(src))


def export(name, out_dir):
    family, kind = name.rsplit("_", 1)
    path = os.path.join(out_dir, f"{name}.onnx")
    if os.path.exists(path):
        print(f"{name}: cached ({path})")
        return
    eu.export(family, out_dir)
    start = time.time()
    if kind == "int8":
        int8_export(family, out_dir, path)
    else:
        float_export(family, kind, out_dir, path)
    import onnx
    m = onnx.load(path)
    print(f"{name}: exported in {time.time() - start:.1f} s, {len(m.graph.node)} nodes")


if __name__ == "__main__":
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or names():
        if name not in names():
            sys.exit(f"unknown model {name} (known: {', '.join(names())})")
        export(name, out_dir)
