#!/usr/bin/env python3
"""The benchmark's models in f16, bf16 and int8 (QDQ) on ferrofuse against ONNX Runtime CPU (issue
23, item 5): each export of `benches/models/export_dtypes.py` runs in ONNX Runtime's CPU provider
and in `ferrofuse run --device DEVICE` on the same input; the outputs are compared elementwise.

The error is stated relative to the output's scale (max |x| of the reference output), and checked
against a tolerance per dtype: the rounding of one op's result in that dtype, times a margin for
the ops between input and output that round it again (TOLERANCE). Where ONNX Runtime CPU has no
kernels for the dtype (bf16), the reference is PyTorch's CPU output in that dtype (NAME.out.npy of
`export_dtypes.py`). Neither reference is exact: their f16 and bf16 kernels compute some ops in
f32 and others in the dtype, so the fp32 PyTorch output of the family (FAMILY.out.npy of
`export_users.py`) is printed beside as a second opinion. int8 models compute the same quantized
arithmetic in both engines; where a value lands on a rounding boundary one rounds it a quantum
apart, so the criterion is in output quanta (the scale of the last DequantizeLinear):
INT8_MAX_QUANTA at most anywhere, and INT8_BEYOND_FRACTION of the elements at most beyond one.

    python3 benches/dtype_models.py EXPORTS_DIR [--ferrofuse BIN] [--device cpu|cuda] [--out FILE.json] [NAME ...]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

NAMES = ["gpt2_f16", "gpt2_bf16", "gpt2_int8", "cnn_f16", "cnn_bf16", "cnn_int8"]
# Relative to the output's scale: f16 carries 11 significant bits (2^-11 = 4.9e-4), bf16 8
# (2^-8 = 3.9e-3); a few dozen ops round in between, each adding up to half an ulp.
TOLERANCE = {"f16": 1e-2, "bf16": 5e-2}
# int8: at most this many output quanta apart anywhere, and at most this fraction of the elements
# more than one quantum apart.
INT8_MAX_QUANTA, INT8_BEYOND_FRACTION = 4, 1e-3


def rel(x, ref):
    """max |x - ref| relative to max |ref|."""
    return float(np.abs(x - ref).max() / max(np.abs(ref).max(), 1e-30))


def read_npy(path, bits=False):
    """An .npy; a bf16 one (ferrofuse's `bfloat16` descr) widened to float32, or with `bits` its
    raw u16 bit patterns."""
    with open(path, "rb") as f:
        head = f.read(10)
        hlen = int.from_bytes(head[8:10], "little")
        header = f.read(hlen).decode()
        if "'bfloat16'" not in header:
            return np.load(path)
        shape = eval(header[header.index("'shape':") + 8:].split(")")[0] + ")")
        raw = np.frombuffer(f.read(), dtype="<u2").reshape(shape)
        return raw if bits else (raw.astype(np.uint32) << 16).view(np.float32)


def ort_run(model, inputs):
    import onnxruntime as ort
    try:
        s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in s.get_inputs():
            if i.type == "tensor(bfloat16)":
                import onnx
                bits = read_npy(inputs[i.name], bits=True)
                feeds[i.name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx.TensorProto.BFLOAT16)
            else:
                feeds[i.name] = np.load(inputs[i.name])
        out = s.run(None, feeds)[0]
        if out.dtype == np.uint16 or str(out.dtype) == "bfloat16":
            out = (out.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return out, None
    except Exception as e:  # noqa: BLE001 - the peer's refusal is reported, not fatal
        return None, str(e).splitlines()[0][:200]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exports")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--ferrofuse", default="target/release/ferrofuse")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    for name in a.names or NAMES:
        family, kind = name.rsplit("_", 1)
        model = os.path.join(a.exports, f"{name}.onnx")
        in_files = sorted(glob.glob(os.path.join(a.exports, f"{name}.in.*.npy")))
        inputs = {os.path.basename(p)[len(name) + 4:-4]: p for p in in_files}
        out_dir = tempfile.mkdtemp(prefix=f"dtype-{name}-")
        cmd = [a.ferrofuse, "run", model, "--device", a.device, "--out", out_dir]
        for k, p in inputs.items():
            cmd += ["--input", f"{k}={p}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        row = {"model": name, "dtype": kind, "device": a.device}
        if r.returncode != 0:
            row["ferrofuse_error"] = (r.stderr.strip().splitlines() or ["?"])[-1][:300]
            rows.append(row)
            print(f"{name}: ferrofuse failed: {row['ferrofuse_error']}")
            continue
        outs = sorted(glob.glob(os.path.join(out_dir, "*.npy")))
        ours = read_npy(outs[0]).astype(np.float64)
        ref, why = ort_run(model, inputs)
        if ref is None:
            print(f"{name}: ONNX Runtime CPU: {why}")
        torch_ref = os.path.join(a.exports, f"{family}.out.npy")
        if os.path.exists(torch_ref):
            t = np.load(torch_ref).astype(np.float64)
            row["vs_torch_fp32_rel"] = rel(ours, t)
        same_dtype = os.path.join(a.exports, f"{name}.out.npy")
        if ref is not None:
            row["reference"] = "onnxruntime-cpu"
        elif os.path.exists(same_dtype):
            # ONNX Runtime CPU cannot run it (bf16): PyTorch's CPU output in the same dtype.
            row["ort_error"] = why
            row["reference"] = f"torch-cpu-{kind}"
            ref = np.load(same_dtype)
        else:
            row["ort_error"] = why
        if ref is not None:
            ref = ref.astype(np.float64)
            scale = max(np.abs(ref).max(), 1e-30)
            err = np.abs(ours - ref)
            row["vs_reference_rel"] = float(err.max() / scale)
            row["elements"] = int(err.size)
            if os.path.exists(torch_ref):
                row["reference_vs_torch_fp32_rel"] = rel(ref, t)
            if kind == "int8":
                # Both engines compute the same quantized arithmetic; where a value lands on a
                # rounding boundary one of them rounds it a quantum apart, and the quantum can
                # grow through the layers after it. Counted in output quanta.
                q = quantum(model) or scale * 1e-6
                quanta = err / q
                row["max_quanta"] = float(quanta.max())
                row["elements_beyond_one_quantum"] = int((quanta > 1.01).sum())
                row["within"] = bool(quanta.max() <= INT8_MAX_QUANTA
                                     and row["elements_beyond_one_quantum"] <= INT8_BEYOND_FRACTION * err.size)
            else:
                row["tolerance_rel"] = TOLERANCE[kind]
                row["within"] = bool(row["vs_reference_rel"] <= TOLERANCE[kind])
        rows.append(row)
        print(json.dumps(row))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r["model"] for r in rows if r.get("within") is False or "ferrofuse_error" in r]
    if bad:
        sys.exit(f"outside tolerance or failed: {', '.join(bad)}")


def quantum(model):
    """The scale of the QuantizeLinear nearest the graph's output (the quantum its value carries
    through the final DequantizeLinear), or None."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(model)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    deq = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
    produced = {o: n for n in m.graph.node for o in n.output}
    out = m.graph.output[0].name
    node = produced.get(out)
    while node is not None and node.op_type != "DequantizeLinear":
        node = produced.get(node.input[0]) if node.input else None
    if node is None or node not in deq or node.input[1] not in inits:
        return None
    return float(np.max(inits[node.input[1]]))


if __name__ == "__main__":
    main()
