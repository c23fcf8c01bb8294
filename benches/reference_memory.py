#!/usr/bin/env python3
"""Peak memory of the CPU reference (`ferrofuse run --device cpu`) against ONNX Runtime's CPU
provider on the benchmark's exports (issue 24: the reference within 1.5x ONNX Runtime CPU).

Each run is its own process, its peak resident size read with `/usr/bin/time -f %M`; ONNX
Runtime runs once in a Python process (one intra-op thread), so its figure includes the Python
interpreter, numpy and onnxruntime themselves (printed as `python+ort`, measured alone).

    python3 benches/reference_memory.py EXPORTS_DIR [--ferrofuse BIN] [--out FILE.json] [CASE ...]

EXPORTS_DIR holds the exports of `benches/models/export_users.py` (mlp, gpt2, bert, cnn, gnn,
ticl32, mamba, rwkv, mamba2 .onnx); the inputs are generated here (seeded), at the sizes below.
"""
import argparse, json, os, re, subprocess, sys, tempfile

import numpy as np

# case -> (model file stem, {input: (dtype, shape, kind)}); kind "ids" draws token ids < 1000,
# "ones" fills ones, "index" draws node indices < shape of the gnn's nodes.
CASES = {
    "mlp_16384": ("mlp", {"x": ("float32", (16384, 64), "normal")}),
    "gpt2_b16": ("gpt2", {"input_ids": ("int64", (16, 128), "ids")}),
    "bert_b16": ("bert", {"input_ids": ("int64", (16, 128), "ids"), "attention_mask": ("int64", (16, 128), "ones")}),
    "cnn_b64": ("cnn", {"x": ("float32", (64, 3, 64, 64), "normal")}),
    "gnn_100k": ("gnn", {"x": ("float32", (100000, 16), "normal"), "edge_index": ("int64", (2, 800000), "index")}),
    "ticl32_2048": ("ticl32", {"x": ("float32", (1, 2048, 8), "normal")}),
    "mamba_b8": ("mamba", {"input_ids": ("int64", (8, 64), "ids")}),
    "rwkv_b8": ("rwkv", {"input_ids": ("int64", (8, 64), "ids")}),
    "mamba2_b2": ("mamba2", {"input_ids": ("int64", (2, 256), "ids")}),
}

ORT = """
import sys, glob, numpy as np, onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
s.run(None, {a.split("=")[0]: np.load(a.split("=")[1]) for a in sys.argv[2:]})
"""


def peak(cmd):
    r = subprocess.run(["/usr/bin/time", "-f", "MAXRSS %M WALL %e"] + cmd, capture_output=True, text=True)
    m = re.search(r"MAXRSS (\d+) WALL ([\d.]+)", r.stderr)
    if r.returncode != 0 or not m:
        sys.exit(f"{cmd[:3]} failed:\n{r.stderr[-2000:]}")
    return int(m.group(1)) / 1024, float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("exports")
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--ferrofuse", default="target/release/ferrofuse")
    ap.add_argument("--out")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    tmp = tempfile.mkdtemp(prefix="refmem-")
    base, _ = peak([sys.executable, "-c", "import numpy, onnxruntime"])
    rows = []
    for case in a.cases or CASES:
        stem, inputs = CASES[case]
        model = os.path.join(a.exports, stem + ".onnx")
        specs = []
        for name, (dtype, shape, kind) in inputs.items():
            if kind == "ids":
                v = rng.integers(0, 1000, shape, dtype=np.int64)
            elif kind == "ones":
                v = np.ones(shape, dtype)
            elif kind == "index":
                v = rng.integers(0, 100000, shape, dtype=np.int64)
            else:
                v = rng.standard_normal(shape, dtype=np.float32)
            path = os.path.join(tmp, f"{case}.{name}.npy")
            np.save(path, v.astype(dtype))
            specs.append(f"{name}={path}")
        ort_mb, ort_s = peak([sys.executable, "-c", ORT, model] + specs)
        ff_mb, ff_s = peak([a.ferrofuse, "run", model, "--device", "cpu"] + [x for s in specs for x in ("--input", s)])
        row = {"case": case, "ort_mib": round(ort_mb, 1), "ort_s": ort_s, "ferrofuse_mib": round(ff_mb, 1),
               "ferrofuse_s": ff_s, "ratio": round(ff_mb / ort_mb, 2),
               "ratio_without_python": round(ff_mb / max(ort_mb - base, 1.0), 2)}
        rows.append(row)
        print(f"{case:<14} ORT CPU {ort_mb:7.0f} MiB ({ort_s:5.1f} s) | ferrofuse CPU reference {ff_mb:7.0f} MiB "
              f"({ff_s:5.1f} s) | ratio {row['ratio']:.2f} ({row['ratio_without_python']:.2f} against ORT less "
              f"python+ort's {base:.0f} MiB)", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"python_ort_baseline_mib": round(base, 1), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
