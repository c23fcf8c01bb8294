#!/usr/bin/env python3
"""f32 GEMM throughput: ferrofuse against cuBLAS (through torch.matmul) on the same GPU, strict
FP32 (TF32 off; PRECISION=tf32: cuBLAS with TF32 and ferrofuse `--precision tf32`). Each shape is a one-node ONNX model `Y = X @ W` (X [M, K] an input, W [K, N] a
weight: how an exported Linear reads), timed by `ferrofuse run --repeat` (CUDA-graph replay,
device time from CUDA events); cuBLAS is timed on the same operands with CUDA events around each
call. ferrofuse's output is checked against cuBLAS's.

    python3 benches/gemm.py BIN OUT.json [MxNxK ...]

Default shapes: M in {16, 128, 1024, 4096, 8192} x (N, K) in {(256, 256), (1024, 1024), (4096, 4096)},
and 8192^3.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

PRECISION = os.environ.get("PRECISION", "exact")
assert PRECISION in ("exact", "tf32"), PRECISION
torch.backends.cuda.matmul.allow_tf32 = PRECISION == "tf32"
RUNS = 100


def cublas_us(x, w):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
        torch.matmul(x, w)
    torch.cuda.synchronize()
    t = []
    for _ in range(RUNS):
        start.record()
        torch.matmul(x, w)
        end.record()
        end.synchronize()
        t.append(start.elapsed_time(end) * 1e3)
    return statistics.median(t)


def model(w):
    k, n = w.shape
    node = helper.make_node("MatMul", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
                              [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    bin_path, out_json = sys.argv[1:3]
    shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[3:]]
    if not shapes:
        shapes = [(m, n, k) for m in (16, 128, 1024, 4096, 8192) for n, k in ((256, 256), (1024, 1024), (4096, 4096))]
        shapes.append((8192, 8192, 8192))
    rows = []
    print(torch.cuda.get_device_name(), torch.__version__, "precision", PRECISION)
    for m, n, k in shapes:
        g = torch.Generator().manual_seed(m + n + k)
        x = torch.rand(m, k, generator=g) * 2 - 1
        w = torch.rand(k, n, generator=g) * 2 - 1
        xd, wd = x.cuda(), w.cuda()
        cublas = cublas_us(xd, wd)
        want = torch.matmul(xd, wd).cpu().numpy()
        del xd, wd
        with tempfile.TemporaryDirectory() as d:
            onnx.save(model(w.numpy()), os.path.join(d, "gemm.onnx"), save_as_external_data=k * n > 1 << 24)
            np.save(os.path.join(d, "x.npy"), x.numpy())
            os.makedirs(os.path.join(d, "out"))
            cmd = [bin_path, "run", os.path.join(d, "gemm.onnx"), "--input", f"x={d}/x.npy", "--repeat",
                   str(RUNS), "--out", os.path.join(d, "out"), "--precision", PRECISION, *os.environ.get("FERROFUSE_RUN_FLAGS", "").split()]
            p = subprocess.run(cmd, capture_output=True, text=True)
            log = p.stdout + p.stderr
            mt = re.search(r"^compute, CUDA graph replay\s+median\s+([\d.]+) us", log, re.M)
            plan = subprocess.run([bin_path, "inspect", os.path.join(d, "gemm.onnx"), "--plan", "--bind", f"m={m}",
                                   "--precision", PRECISION], capture_output=True, text=True).stdout
            kern = re.findall(r"\b(gem[mv]\w*_t?f32)", plan)
            got = np.load(os.path.join(d, "out", "y.npy")) if p.returncode == 0 else None
        ff = float(mt.group(1)) if mt else None
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want))) if got is not None else None
        flop = 2.0 * m * n * k
        row = {"m": m, "n": n, "k": k, "cublas_us": cublas, "ferrofuse_us": ff,
               "cublas_tflops": flop / cublas / 1e6, "ferrofuse_tflops": flop / ff / 1e6 if ff else None,
               "max_rel_err_vs_cublas": err, "kernel": kern[0] if kern else None}
        rows.append(row)
        ratio = f"{row['ferrofuse_tflops'] / row['cublas_tflops']:.2f}x" if ff else "-"
        print(f"{m:5}x{n:5}x{k:5}: cuBLAS {cublas:9.1f} us {row['cublas_tflops']:6.1f} TFLOP/s, ferrofuse "
              f"{ff or 0:9.1f} us {row['ferrofuse_tflops'] or 0:6.1f} TFLOP/s ({ratio}), {row['kernel']}, "
              f"max rel err {err}", flush=True)
        if ff is None:
            print(log[-1500:])
    with open(out_json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "precision": PRECISION,
                   "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
