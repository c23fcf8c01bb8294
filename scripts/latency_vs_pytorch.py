#!/usr/bin/env python3
"""Steady-state latency of ferrofuse vs PyTorch on the same GPU, same model, same input.

Model (random weights, fp32, batch 1): the GPT-2-style model of issue 5 (transformers GPT2LMHeadModel,
4 layers, d 256, 4 heads, seq 128, vocab 1000, eager attention). It exports ONNX (torch.onnx.export,
dynamo=True, static shapes), runs `ferrofuse run MODEL --repeat N` (median / p95 of CUDA-graph
replay and of eager launches, device time from CUDA events) and times PyTorch on the GPU:
eager, and the whole forward (its torch.export'ed module, since transformers' mask code cannot be
captured) captured as one CUDA graph (torch.cuda.CUDAGraph, replay only) — the
same two modes, timed the same way (CUDA events around each call, after warm-up).

    python3 scripts/latency_vs_pytorch.py path/to/ferrofuse OUT.json

(The physics MLP's latency comes from `gpu-pack/run.sh --latency`.) With FERROFUSE_KEEP=DIR the
exported model and its input stay in DIR (gpt2.onnx, ids.npy), e.g. for `ncu`.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_vs_pytorch import Gpt2, SEQ, VOCAB  # noqa: E402  (the same GPT-2-style model)

torch.manual_seed(0)
RUNS = 2000


def time_calls(fn, runs=RUNS):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return {"median_us": statistics.median(times), "p95_us": times[int(0.95 * len(times))]}


def torch_latency(model, args):
    model = model.cuda()
    args = tuple(a.cuda() for a in args)
    out = {}
    with torch.no_grad():
        out["torch_eager"] = time_calls(lambda: model(*args))
        # transformers builds its attention mask from host scalars, which CUDA-graph capture
        # forbids; the torch.export'ed module computes the same forward from graph constants.
        model = torch.export.export(model, args).module()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(*args)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            model(*args)
        out["torch_cuda_graph"] = time_calls(g.replay)
    model.cpu()
    return out


def ferrofuse_latency(binary, path, inputs):
    cmd = [binary, "run", path, "--repeat", str(RUNS)] + [a for n, f in inputs for a in ("--input", f"{n}={f}")]
    text = subprocess.run(cmd, capture_output=True, text=True)
    if text.returncode != 0:
        return {"ferrofuse_error": (text.stdout + text.stderr)[-3000:]}
    grab = lambda key: re.search(rf"{key}\s+median\s+([\d.]+) us\s+p95\s+([\d.]+) us", text.stdout)
    res = {}
    for key, name in [("CUDA graph replay", "ferrofuse_cuda_graph"), ("eager launches", "ferrofuse_eager"),
                      ("CUDA graph replay, no PDL", "ferrofuse_cuda_graph_no_pdl"),
                      ("eager launches, no PDL", "ferrofuse_eager_no_pdl")]:
        m = grab(key)
        if m:
            res[name] = {"median_us": float(m.group(1)), "p95_us": float(m.group(2))}
    steps = re.search(r"plan \((\d+) steps\)", text.stdout)
    res["ferrofuse_steps"] = int(steps.group(1)) if steps else None
    res["ferrofuse_profile"] = [l for l in text.stdout.splitlines() if l.startswith("step ")][:200]
    return res


def main(binary, dest):
    # FERROFUSE_KEEP=DIR keeps the exported model and its input there (for profiling afterwards).
    tmp = os.environ.get("FERROFUSE_KEEP") or tempfile.mkdtemp()
    os.makedirs(tmp, exist_ok=True)
    rows = []
    ids = torch.randint(0, VOCAB, (1, SEQ))
    gpt2 = Gpt2()
    row = {"model": "gpt2 (4L, d256, seq128, batch 1)"}
    row.update(torch_latency(gpt2, (ids,)))
    path = os.path.join(tmp, "gpt2.onnx")
    with torch.no_grad():
        torch.onnx.export(gpt2.cpu(), (ids,), dynamo=True).save(path)
    np.save(os.path.join(tmp, "ids.npy"), ids.numpy())
    import onnx
    name = onnx.load(path, load_external_data=False).graph.input[0].name
    row.update(ferrofuse_latency(binary, path, [(name, os.path.join(tmp, "ids.npy"))]))
    rows.append(row)
    print(json.dumps({k: v for k, v in row.items() if k != "ferrofuse_profile"}), flush=True)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "device": torch.cuda.get_device_name(0), "rows": rows}
    with open(dest, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
