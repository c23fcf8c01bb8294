#!/usr/bin/env python3
"""The cross-backend benchmark: the users' exports (benches/models/export_users.py) at each point of
their sweep, ferrofuse (`ferrofuse bench`) and every peer available on this machine in the same
process and run, on identical inputs kept on the device:

  torch_eager                   PyTorch eager
  torch_cuda_graph              the whole forward (torch.export'ed module, else the module) captured
                                as one CUDA graph and replayed
  torch_compile                 torch.compile, default mode
  torch_compile_reduce_overhead torch.compile(mode="reduce-overhead") (CUDA graphs)
  ort_cuda                      ONNX Runtime GPU, CUDA provider, IO binding (inputs and outputs on
                                the device)
  ort_cuda_graph                the same with the provider's CUDA graph
  tensorrt                      TensorRT, when installed (it is not on the H200 image: recorded as
                                unavailable with the reason)
  aot_inductor                  recorded as unavailable with the reason (see README)

Strict FP32 throughout (TF32 off: torch.backends.*.allow_tf32 = False, ORT use_tf32 = 0,
ferrofuse --precision exact); each peer whose default precision differs is also run in it and
labelled `*_default` (ORT's CUDA provider defaults to TF32 on sm_80+, PyTorch's convolutions to
TF32 through cuDNN). Latencies are device-side where the backend allows (CUDA events for PyTorch,
`ferrofuse bench`'s events) and host wall time around `run_with_iobinding` for ONNX Runtime
(which synchronizes); p50 / p95 / p99 over RUNS calls after a warm-up. Every backend's output is
compared with PyTorch eager's (max |a - b| / max |b|).

    python3 benches/suite.py BIN MODEL_DIR OUT_DIR [--budget SECONDS] [NAME:V1,V2,... ...]

Dtype variants (not in the default sweep; `benches/models/export_dtypes.py`): gpt2_f16, gpt2_bf16,
gpt2_int8, cnn_f16, cnn_bf16, cnn_int8 sweep as their family. PyTorch runs the module converted to
f16 / bf16 (and, for the int8 QDQ export, the fp32 module it was quantized from, labelled so);
every output is compared with PyTorch eager's in the variant's dtype (fp32 for int8). ONNX Runtime
takes no bf16 feeds from numpy here: recorded as unavailable.

V is the family's sweep variable (SWEEP below: the batch for most, nodes for the GNN, the sequence
for the TICL encoders and the OPS.md blocks of benches/models/export_ops.py, at batch 1). Each
point is one step written to OUT_DIR/points/NAME.V.json; points
already written are skipped, so the sweep resumes where it stopped; --budget stops starting new
points after that many seconds (the device machine's calls are bounded).
"""
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
import export_dtypes  # noqa: E402
import export_ops  # noqa: E402
import export_users  # noqa: E402

# The dtype variants' torch dtypes (int8: the fp32 module is the PyTorch peer).
VARIANT_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "int8": None}


def variant(name):
    """(family, variant) of a dtype variant (`gpt2_f16` -> (`gpt2`, `f16`)); (name, None) else."""
    if name in export_dtypes.names():
        fam, kind = name.rsplit("_", 1)
        return fam, kind
    return name, None


def family(name):
    """The family a model sweeps as (`gpt2_static` and `gpt2_f16` -> `gpt2`)."""
    return export_users.base(variant(name)[0])

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
RUNS = int(os.environ.get("RUNS", "200"))
TIMEOUT = float(os.environ.get("FERROFUSE_TIMEOUT", "300"))
SLOW_MS, SLOW_RUNS = 20.0, 30
SWEEP = {"mlp": "batch", "cnn": "batch", "gnn": "nodes", "ticl32": "seq", "ticl64": "seq", "gpt2": "batch",
         "bert": "batch", "mamba2": "batch", "recurrentgemma": "batch", "mamba": "batch", "rwkv": "batch",
         "llama": "batch",
         **{name: "seq" for name in export_ops.FAMILIES}}
DEFAULT = ["mlp:1,1024,16384", "cnn:1,64", "gnn:1000,10000,100000", "ticl32:10,128,2048", "ticl64:10,128,2048",
           "gpt2:1,16", "bert:1,16", "llama:1,16", "mamba2:1,2", "recurrentgemma:1,8", "mamba:1,8", "rwkv:1,8",
           "ops_mamba:256,2048", "sofie_mamba:256,2048", "ops_griffin:256,2048", "ops_rwkv:256,2048"]


def inputs_at(name, v):
    """The inputs of model `name` at sweep value `v`, seeded per point (torch CPU tensors)."""
    g = torch.Generator().manual_seed(1000 + v)
    fam = family(name)
    if fam in export_ops.FAMILIES:
        return {"x": torch.randn(1, v, export_ops.D, generator=g)}
    if fam == "mlp":
        return {"x": torch.randn(v, 64, generator=g)}
    if fam == "cnn":
        return {"x": torch.randn(v, 3, export_users.CNN_SIZE, export_users.CNN_SIZE, generator=g)}
    if fam == "gnn":
        return export_users.gnn_inputs(v, generator=g)
    if fam.startswith("ticl"):
        return {"x": torch.randn(1, v, 8, generator=g)}
    seq = {"mamba2": export_users.MAMBA2_SEQ, "recurrentgemma": export_users.RG_SEQ,
           "mamba": export_users.UNROLLED_SEQ, "rwkv": export_users.UNROLLED_SEQ}.get(fam, export_users.SEQ)
    ids = torch.randint(0, export_users.VOCAB, (v, seq), generator=g)
    if fam == "bert":
        return {"input_ids": ids, "attention_mask": torch.ones(v, seq, dtype=torch.int64)}
    return {"input_ids": ids}


def summary(t):
    t = sorted(t)
    at = lambda p: t[round((len(t) - 1) * p)]  # noqa: E731
    return {"p50": at(0.5), "p95": at(0.95), "p99": at(0.99), "mean": sum(t) / len(t), "min": t[0], "n": len(t)}


def time_events(fn, runs=RUNS, before=None):
    """CUDA-event-timed calls of `fn` on the current stream (us), after a warm-up; calls slower
    than SLOW_MS (eager runs of unrolled time loops) are timed SLOW_RUNS times instead."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for k in range(10):
        if before:
            before()
        s = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        if k == 0 and (time.perf_counter() - s) * 1e3 > SLOW_MS:
            runs = min(runs, SLOW_RUNS)
            break
    t = []
    for _ in range(runs):
        if before:
            before()
        start.record()
        fn()
        end.record()
        end.synchronize()
        t.append(start.elapsed_time(end) * 1e3)
    return summary(t)


def time_wall(fn, runs=RUNS):
    """Host-clock-timed calls of a synchronizing `fn` (us), after a warm-up."""
    for _ in range(10):
        fn()
    t = []
    for _ in range(runs):
        s = time.perf_counter()
        fn()
        t.append((time.perf_counter() - s) * 1e6)
    return summary(t)


def rel_err(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return f"shape {list(got.shape)} vs {list(want.shape)}"
    return float(np.max(np.abs(got - want)) / max(1e-30, float(np.max(np.abs(want)))))


def first_tensor(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


def guarded(results, key, fn):
    """Runs one peer; an exception is recorded as its error, never ends the sweep."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    try:
        results[key] = fn()
    except Exception as e:  # noqa: BLE001 (recorded)
        results[key] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        traceback.print_exc(limit=2)
    torch.cuda.synchronize()


def torch_peers(model, args, want, results, capture_order=("torch.export", "module")):
    """PyTorch eager, CUDA graph, torch.compile (default, reduce-overhead). The CUDA graph captures
    the torch.export'ed module where it exports, else the module itself (`capture_order`)."""
    peak = lambda: torch.cuda.max_memory_allocated()  # noqa: E731

    def eager():
        r = time_events(lambda: model(*args))
        return {**r, "peak_bytes": peak()}

    def graph(conv_tf32=False):
        torch.backends.cudnn.allow_tf32 = conv_tf32
        try:
            how, errors = None, []
            for attempt in capture_order:
                try:
                    fn = torch.export.export(model, tuple(args)).module() if attempt == "torch.export" else model
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        for _ in range(3):
                            fn(*args)
                    torch.cuda.current_stream().wait_stream(s)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        out = fn(*args)
                    how = attempt
                    break
                except Exception as e:  # noqa: BLE001 (the next attempt, then reported)
                    errors.append(f"{attempt}: {type(e).__name__}: {str(e)[:150]}")
            if how is None:
                raise RuntimeError("; ".join(errors))
            r = time_events(g.replay)
            g.replay()
            torch.cuda.synchronize()
            return {**r, "how": how, "peak_bytes": peak(), "max_rel_err": rel_err(first_tensor(out).float().cpu(), want)}
        finally:
            torch.backends.cudnn.allow_tf32 = False

    def compiled(mode):
        torch._dynamo.reset()
        fn = torch.compile(model, mode=mode, dynamic=False)
        step = torch.compiler.cudagraph_mark_step_begin if mode == "reduce-overhead" else None
        s = time.perf_counter()
        if step:
            step()
        out = fn(*args)
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - s
        got = first_tensor(out).float().cpu()
        r = time_events(lambda: fn(*args), before=step)
        return {**r, "compile_s": compile_s, "peak_bytes": peak(), "max_rel_err": rel_err(got, want)}

    guarded(results, "torch_eager", eager)
    guarded(results, "torch_cuda_graph", graph)
    if any(isinstance(m, torch.nn.Conv2d) for m in model.modules()):
        guarded(results, "torch_cuda_graph_default", lambda: {**graph(conv_tf32=True), "precision": "tf32 convolutions"})
    skip = os.environ.get("SKIP_COMPILE_FOR", "").split(",")
    if family(NAME) in skip or "all" in skip:
        why = {"unavailable": "not run in this sweep (SKIP_COMPILE_FOR): compiling the unrolled time loop "
                              "takes minutes per shape, over the device time of the session"}
        results["torch_compile"] = results["torch_compile_reduce_overhead"] = why
    else:
        guarded(results, "torch_compile", lambda: compiled("default"))
        guarded(results, "torch_compile_reduce_overhead", lambda: compiled("reduce-overhead"))
        torch._dynamo.reset()


def ort_peers(model_path, feeds, want, results):
    """ONNX Runtime GPU (CUDA provider, IO binding), without and with its CUDA graph, strict FP32
    and in its default precision."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        results["ort_cuda"] = {"unavailable": f"onnxruntime not importable: {e}"}
        return
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        results["ort_cuda"] = {"unavailable": f"onnxruntime {ort.__version__} has no CUDA provider "
                                              f"({ort.get_available_providers()})"}
        return

    def run(cuda_graph, tf32):
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        prov = {"device_id": 0, "use_tf32": int(tf32), "enable_cuda_graph": int(cuda_graph)}
        sess = ort.InferenceSession(model_path, opts, providers=[("CUDAExecutionProvider", prov)])
        on_cpu = [n for n in sess.get_providers() if n != "CUDAExecutionProvider"]
        binding = sess.io_binding()
        kept = []
        for name, v in feeds.items():
            t = ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0)
            kept.append(t)
            binding.bind_ortvalue_input(name, t)
        outs = [o.name for o in sess.get_outputs()]
        if cuda_graph:
            # Fixed output buffers: the graph replays into the same addresses.
            first = sess.run(None, feeds)
            for name, v in zip(outs, first):
                t = ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0)
                kept.append(t)
                binding.bind_ortvalue_output(name, t)
        else:
            for name in outs:
                binding.bind_output(name, "cuda")
        sess.run_with_iobinding(binding)
        got = binding.copy_outputs_to_cpu()[0]
        r = time_wall(lambda: sess.run_with_iobinding(binding))
        return {**r, "max_rel_err": rel_err(got, want), "version": ort.__version__, "other_providers": on_cpu,
                "precision": "tf32 (default)" if tf32 else "fp32 (use_tf32=0)"}

    guarded(results, "ort_cuda", lambda: run(False, False))
    guarded(results, "ort_cuda_graph", lambda: run(True, False))
    guarded(results, "ort_cuda_default", lambda: run(False, True))


def ferrofuse(bin_path, model_path, feeds, want, cold, results):
    """`ferrofuse bench` on the same inputs: its JSON point, cold start and output check."""
    with tempfile.TemporaryDirectory() as work:
        args = []
        for k, v in feeds.items():
            path = os.path.join(work, f"in.{k}.npy")
            if isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16:
                export_dtypes.write_bf16_npy(path, v.view(torch.int16).numpy().view(np.uint16))
            else:
                np.save(path, v)
            args += ["--input", f"{k}={path}"]
        out_dir, js = os.path.join(work, "out"), os.path.join(work, "bench.json")
        cmd = [bin_path, "bench", model_path, *args, "--runs", str(RUNS), "--json", js, "--out", out_dir,
               "--cold-runs", "2" if cold else "0"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
            rc, log = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc, log = 124, out + f"\nferrofuse bench timed out after {TIMEOUT} s"
        print(log.strip()[-3000:], flush=True)
        r = {"rc": rc, "log_tail": log[-2000:]}
        if os.path.exists(js):
            with open(js) as f:
                report = json.load(f)
            r["bench"] = report["points"][0]
            r["cold_start"] = report["cold_start"]
            r["machine"] = report["gpu"]
        outs = sorted(f for f in os.listdir(out_dir) if f.endswith(".npy")) if os.path.isdir(out_dir) else []
        if outs:
            r["max_rel_err"] = rel_err(load_npy(os.path.join(out_dir, outs[0])), want)
        results["ferrofuse"] = r


def load_npy(path):
    """An .npy, ferrofuse's `bfloat16` ones (raw u16 bits, no NumPy dtype) widened to float32."""
    with open(path, "rb") as f:
        head = f.read(10)
        header = f.read(int.from_bytes(head[8:10], "little")).decode()
        if "'bfloat16'" not in header:
            return np.load(path)
        shape = tuple(int(d) for d in header.split("'shape': (")[1].split(")")[0].split(",") if d.strip())
        bits = np.frombuffer(f.read(), dtype="<u2").reshape(shape)
        return (bits.astype(np.uint32) << 16).view(np.float32)


NAME = None


def point(bin_path, model_dir, name, v, out_path, first):
    global NAME
    NAME = name
    model_path = os.path.join(model_dir, f"{name}.onnx")
    fam, kind = variant(name)
    ops = export_users.base(fam) in export_ops.FAMILIES
    model = (export_ops.build(fam) if ops else export_users.build(fam)).cuda().eval()
    feeds = inputs_at(name, v)
    dtype = VARIANT_DTYPES.get(kind)
    if dtype is not None:
        model = model.to(dtype)
        feeds = {k: t.to(dtype) if t.is_floating_point() else t for k, t in feeds.items()}
    args = [t.cuda() for t in feeds.values()]
    # numpy holds no bf16: ferrofuse gets those feeds as tensors (written as its `bfloat16` npy).
    np_feeds = {k: t if t.dtype == torch.bfloat16 else t.numpy() for k, t in feeds.items()}
    results = {}
    with torch.no_grad():
        want = first_tensor(model(*args)).float().cpu().numpy()
        # The OPS.md blocks' time loops are captured as they run (tracing them through torch.export
        # takes minutes at long sequences).
        torch_peers(model, args, want, results, ("module",) if ops else ("torch.export", "module"))
    del args
    torch.cuda.empty_cache()
    if kind == "int8":
        for k in [k for k in results if k.startswith("torch")]:
            results[k]["peer"] = "the fp32 module the QDQ export was quantized from"
    if any(isinstance(t, torch.Tensor) for t in np_feeds.values()):
        results["ort_cuda"] = {"unavailable": "bf16 feeds: numpy holds no bf16 for ONNX Runtime's binding here"}
    else:
        ort_peers(model_path, np_feeds, want, results)
    results["tensorrt"] = {"unavailable": tensorrt_absent()}
    results["aot_inductor"] = {"unavailable": "not run: the Python loader segfaulted on this image (2026-12-01) "
                                              "and the C++ AOTIModelPackageLoader runner is not built yet"}
    ferrofuse(bin_path, model_path, np_feeds, want, first, results)
    row = {"model": name, "family": family(name), "sweep": SWEEP[family(name)], "value": v,
           "inputs": {k: list(t.shape) for k, t in feeds.items()}, "runs": RUNS,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(), "results": results}
    with open(out_path + ".tmp", "w") as f:
        json.dump(row, f, indent=1)
    os.replace(out_path + ".tmp", out_path)
    line = [f"{name} {SWEEP[family(name)]}={v}:"]
    for k, r in results.items():
        if "p50" in r:
            line.append(f"{k} {r['p50']:.1f}")
        elif k == "ferrofuse" and "bench" in r and r["bench"].get("fused"):
            line.append(f"ferrofuse {r['bench']['fused']['graph_us']['p50']:.1f} (err {r.get('max_rel_err')})")
        else:
            line.append(f"{k} -")
    print(" | ".join(line), flush=True)


_MACHINE = None


def machine():
    global _MACHINE
    if _MACHINE is None:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
        _MACHINE = {"gpu": torch.cuda.get_device_name(), "nvidia_smi": smi, "torch": torch.__version__,
                    "cuda": torch.version.cuda, "host": platform.node(), "cpus": os.cpu_count(),
                    "python": platform.python_version()}
        try:
            import transformers
            _MACHINE["transformers"] = transformers.__version__
        except ImportError:
            pass
        try:
            import onnxruntime
            _MACHINE["onnxruntime"] = onnxruntime.__version__
        except ImportError:
            pass
    return _MACHINE


def tensorrt_absent():
    try:
        import tensorrt  # noqa: F401
        return "tensorrt is installed but its runner is not written yet"
    except ImportError as e:
        return f"not installed on this machine ({e})"


def main():
    argv = sys.argv[1:]
    budget = None
    if "--budget" in argv:
        i = argv.index("--budget")
        budget = float(argv[i + 1])
        del argv[i:i + 2]
    bin_path, model_dir, out_dir = argv[:3]
    cases = argv[3:] or DEFAULT
    os.makedirs(os.path.join(out_dir, "points"), exist_ok=True)
    started = time.time()
    print(machine(), flush=True)
    for case in cases:
        name, values = case.split(":")
        if variant(name)[1] is not None:
            export_dtypes.export(name, model_dir)
        else:
            (export_ops if name in export_ops.FAMILIES else export_users).export(name, model_dir)
        for k, v in enumerate(map(int, values.split(","))):
            out_path = os.path.join(out_dir, "points", f"{name}.{v}.json")
            if os.path.exists(out_path):
                continue
            if budget is not None and time.time() - started > budget:
                print(f"budget of {budget:.0f} s spent: stopping before {name} {v}", flush=True)
                return
            point(bin_path, model_dir, name, v, out_path, first=k == 0)
            torch.cuda.empty_cache()
    print("sweep complete", flush=True)


if __name__ == "__main__":
    main()
