#!/usr/bin/env python3
"""Steady-state latency of the users' exports (benches/models/export_users.py) at several batch
sizes: ferrofuse (`run --repeat`, CUDA-graph replay and eager launches, device time from CUDA
events) against PyTorch eager and PyTorch CUDA graph (the same module and weights, strict FP32:
TF32 off), in one process per model on the same GPU, with ferrofuse's outputs checked against
PyTorch's at each batch.

    python3 benches/throughput.py BIN MODEL_DIR OUT.json [NAME:BATCH[,BATCH...] ...]

Default cases: mlp:1,1024,16384 gpt2:1,16 bert:1,16 mamba2:1 (sequence 128, Mamba2 256). Prints one line per case and writes every
figure (with the machine) to OUT.json. Extra `ferrofuse run` flags go in $FERROFUSE_RUN_FLAGS
(e.g. "--profile"); FERROFUSE_TIMEOUT (seconds, default 300) bounds each run. PRECISION=tf32 runs both sides in TF32 (PyTorch's `allow_tf32` for matmuls
and convolutions, ferrofuse's `--precision tf32`); the default is strict FP32 on both.
"""
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
import export_users  # noqa: E402

PRECISION = os.environ.get("PRECISION", "exact")
assert PRECISION in ("exact", "tf32"), PRECISION
torch.backends.cuda.matmul.allow_tf32 = PRECISION == "tf32"
torch.backends.cudnn.allow_tf32 = PRECISION == "tf32"
RUNS = 300
# Seconds one `ferrofuse run` may take before the case is recorded as timed out (rc 124).
TIMEOUT = float(os.environ.get("FERROFUSE_TIMEOUT", "300"))
DEFAULT = ["mlp:1,1024,16384", "gpt2:1,16", "bert:1,16", "mamba2:1"]


def time_calls(fn, runs=RUNS):
    """Median and p95 of CUDA-event-timed calls, in microseconds, after a warm-up."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(runs):
        start.record()
        fn()
        end.record()
        end.synchronize()
        t.append(start.elapsed_time(end) * 1e3)
    t.sort()
    return statistics.median(t), t[int(0.95 * (len(t) - 1))]


def inputs_at(name, batch):
    """The model's inputs at `batch` (the reference shapes otherwise), seeded per case."""
    g = torch.Generator().manual_seed(batch)
    if name == "mlp":
        return {"x": torch.randn(batch, 64, generator=g)}
    seq = {"mamba2": export_users.MAMBA2_SEQ, "recurrentgemma": export_users.RG_SEQ}.get(name, export_users.SEQ)
    ids = torch.randint(0, export_users.VOCAB, (batch, seq), generator=g)
    if name == "bert":
        return {"input_ids": ids, "attention_mask": torch.ones(batch, export_users.SEQ, dtype=torch.int64)}
    return {"input_ids": ids}


def torch_peer(model, feeds):
    """PyTorch eager and CUDA-graph timings of `model` on `feeds` (on the GPU), and its output."""
    model = model.cuda()
    args = [v.cuda() for v in feeds.values()]
    with torch.no_grad():
        want = model(*args).float().cpu().numpy()
        eager = time_calls(lambda: model(*args))
        graph, how = None, "module"
        for attempt in ("module", "torch.export"):
            try:
                fn = model if attempt == "module" else torch.export.export(model, tuple(args)).module()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        fn(*args)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    fn(*args)
                graph, how = time_calls(g.replay), attempt
                break
            except Exception as e:  # noqa: BLE001 (the reason is reported)
                how = f"capture failed: {type(e).__name__}: {str(e)[:120]}"
    return want, eager, graph, how


def ferrofuse(bin_path, model_path, feeds, work):
    """`ferrofuse run --repeat` on `feeds`: graph-replay and eager medians, output, log."""
    args = []
    for k, v in feeds.items():
        path = os.path.join(work, f"in.{k}.npy")
        np.save(path, v.numpy())
        args += ["--input", f"{k}={path}"]
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    extra = os.environ.get("FERROFUSE_RUN_FLAGS", "").split()
    cmd = [bin_path, "run", model_path, *args, "--repeat", str(RUNS), "--out", out_dir, "--precision", PRECISION,
           *extra]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        rc, log = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, log = 124, out + f"\nferrofuse run timed out after {TIMEOUT} s"
    def median(label):
        m = re.search(rf"^{re.escape(label)}\s+median\s+([\d.]+) us\s+p95\s+([\d.]+) us", log, re.M)
        return (float(m.group(1)), float(m.group(2))) if m else None
    steps = re.search(r"plan \((\d+) steps\)|(\d+) steps", log)
    outs = [f for f in os.listdir(out_dir) if f.endswith(".npy")]
    got = np.load(os.path.join(out_dir, outs[0])) if rc == 0 and outs else None
    return {
        "rc": rc,
        "graph": median("compute, CUDA graph replay"),
        "eager": median("compute, eager launches"),
        "steps": int(next(g for g in steps.groups() if g)) if steps else None,
        "log_tail": log[-4000:],
    }, got


def main():
    bin_path, model_dir, out_json = sys.argv[1:4]
    cases = sys.argv[4:] or DEFAULT
    results = []
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}, torch {torch.__version__}, {platform.node()}, precision {PRECISION}")
    for case in cases:
        name, batches = case.split(":")
        export_users.export(name, model_dir)
        torch.manual_seed(0)
        model = export_users.build(name)
        model_path = os.path.join(model_dir, f"{name}.onnx")
        for batch in map(int, batches.split(",")):
            feeds = inputs_at(name, batch)
            want, eager, graph, how = torch_peer(model, feeds)
            with tempfile.TemporaryDirectory() as work:
                ff, got = ferrofuse(bin_path, model_path, feeds, work)
            err = None
            if got is not None and got.shape == want.shape:
                err = float(np.max(np.abs(got - want)) / max(1e-30, float(np.max(np.abs(want)))))
            row = {"model": name, "batch": batch, "torch_eager_us": eager, "torch_graph_us": graph,
                   "torch_graph_how": how, "ferrofuse": ff, "max_rel_err": err}
            results.append(row)
            fmt = lambda t: f"{t[0]:9.1f}" if t else "        -"  # noqa: E731
            ratio = f"{ff['graph'][0] / graph[0]:.2f}x" if ff["graph"] and graph else "-"
            print(f"{name:5} batch {batch:6}: torch eager {fmt(eager)} us, torch graph {fmt(graph)} us, "
                  f"ferrofuse graph {fmt(ff['graph'])} us eager {fmt(ff['eager'])} us "
                  f"({ff['steps']} steps, {ratio} of torch graph), max rel err {err}", flush=True)
            if ff["rc"] != 0 or ff["graph"] is None:
                print(ff["log_tail"][-1500:])
            elif os.environ.get("FERROFUSE_RUN_FLAGS"):
                print(ff["log_tail"])
    with open(out_json, "w") as f:
        json.dump({"gpu": gpu, "torch": torch.__version__, "host": platform.node(), "precision": PRECISION,
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
