#!/usr/bin/env python3
"""Cold start of the ferrofuse CLI: process start to exit (the outputs printed) for `doctor` and for
`run MODEL` on the exported models: with the cubins shipped in the binary (what an installed build
loads), and without them with an empty kernel cache and with a filled one. The driver's own JIT
cache is off throughout (CUDA_CACHE_DISABLE=1), so "empty" is what a fresh machine sees.

    python3 benches/coldstart.py BIN MODEL_DIR OUT.json [NAME ...]

MODEL_DIR holds NAME.onnx and NAME.in.<input>.npy (benches/models/export_users.py writes them).
Prints one line per measurement and each run's "first run:" breakdown; writes every figure to
OUT.json.
"""
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time


def timed(cmd, env):
    """Wall time to exit, return code, output; the output ends with a line saying how long the
    process ran after printing its `process:` line (its teardown)."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, printed = [], None
    for line in p.stdout:
        lines.append(line)
        if line.startswith("process:"):
            printed = time.perf_counter()
    rc = p.wait()
    wall = time.perf_counter() - start
    out = "".join(lines)
    if printed is not None:
        out += f"process: exited {1e3 * (time.perf_counter() - printed):.1f} ms after printing its outputs\n"
    if rc != 0:
        print(out[-3000:])
    return wall, rc, out


def main():
    binary, model_dir, out_json = sys.argv[1:4]
    names = sys.argv[4:] or sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(model_dir, "*.onnx")))
    rows = []
    base = dict(os.environ, CUDA_CACHE_DISABLE="1")
    base.pop("FERROFUSE_CACHE", None)

    def measure(label, cmd, cache, extra=None):
        env = dict(base, FERROFUSE_CACHE_DIR=cache, **(extra or {}))
        wall, rc, out = timed(cmd, env)
        lines = [l for l in out.splitlines() if l.startswith(("first run:", "first execution:", "kernel load", "kernel cache", "startup:", "process:"))]
        rows.append({"what": label, "wall_s": wall, "exit": rc, "lines": lines})
        print(f"{label:<44} {wall:7.3f} s  exit {rc}")
        for l in lines:
            print(f"    {l}")

    # Shipped cubins (the binary built with FERROFUSE_PTXAS) are what an installed binary loads; with
    # them off, the kernels compile into the empty cache (a build without them, or a device they do
    # not fit).
    off = {"FERROFUSE_SHIPPED_CUBINS": "off"}
    cache = tempfile.mkdtemp(prefix="ff-kcache-")
    measure("doctor, shipped cubins, empty cache", [binary, "doctor"], cache)
    measure("doctor, no shipped cubins, empty cache", [binary, "doctor"], cache, off)
    measure("doctor, no shipped cubins, filled cache", [binary, "doctor"], cache, off)
    shutil.rmtree(cache)
    for name in names:
        inputs = []
        for f in sorted(glob.glob(os.path.join(model_dir, f"{name}.in.*.npy"))):
            inputs += ["--input", f"{os.path.basename(f)[len(name) + 4:-4]}={f}"]
        cmd = [binary, "run", os.path.join(model_dir, f"{name}.onnx")] + inputs
        cache = tempfile.mkdtemp(prefix="ff-kcache-")
        measure(f"run {name}, shipped cubins, empty cache", cmd, cache)
        measure(f"run {name}, shipped cubins, empty cache (again)", cmd, cache)
        # Where the first execution's time goes: without graph capture.
        measure(f"run {name}, shipped cubins, no CUDA graph", cmd + ["--set", "cuda_graph=false"], cache)
        measure(f"run {name}, no shipped cubins, empty cache", cmd, cache, off)
        measure(f"run {name}, no shipped cubins, filled cache", cmd, cache, off)
        shutil.rmtree(cache)
        measure(f"run {name}, no shipped cubins, cache off (driver JIT)", cmd, "", dict(off, FERROFUSE_CACHE="off"))
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    with open(out_json, "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%d"), "gpu": smi, "cpus": os.cpu_count(),
                   "host": platform.platform(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
