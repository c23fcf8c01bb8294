#!/usr/bin/env python3
"""Steps per run of the GPU plans of the benchmark's exports, without a GPU.

For each family and point of the suite's default sweep whose export is in DIR (`<family>.onnx`,
as `benches/models/export_users.py` writes them), runs `ferrofuse inspect --plan` with the
default session options, with `--set fusion=false`, and with `--set hoist_constants=false`, and
records the steps each run launches, the steps run once per binding (hoisted), and the bytes of
hoisted results the arena keeps. Plans are made for a 132-SM Hopper device, as on the H200.

    python3 benches/plan_steps.py --ferrofuse target/release/ferrofuse DIR --json OUT.json

Prints a markdown table; `--json` keeps the figures with the machine and the commit.
"""

import argparse
import json
import platform
import re
import subprocess
import sys

SEQ, MAMBA2_SEQ, GNN_DEGREE = 128, 256, 8
# family -> (sweep variable, points, bindings of a point)
POINTS = {
    "mlp": ("batch", [1, 1024, 16384], lambda v: {"batch": v}),
    "cnn": ("batch", [1, 64], lambda v: {"batch": v}),
    "gnn": ("nodes", [1000, 100000], lambda v: {"nodes": v, "edges": v * GNN_DEGREE}),
    "ticl32": ("seq", [10, 2048], lambda v: {"batch": 1, "seq": v}),
    "ticl64": ("seq", [128, 2048], lambda v: {"batch": 1, "seq": v}),
    "gpt2": ("batch", [1, 16], lambda v: {"batch": v, "seq": SEQ}),
    "bert": ("batch", [1, 16], lambda v: {"batch": v, "seq": SEQ}),
    "mamba2": ("batch", [1, 2], lambda v: {"batch": v, "seq": MAMBA2_SEQ}),
}
HEAD = re.compile(r"GPU plan \((\d+) steps per run, (\d+) once per binding")
KEPT = re.compile(r"their results kept: (\d+) bytes")


def plan(binary, model, binds, sets):
    cmd = [binary, "inspect", model, "--plan"]
    for k, v in binds.items():
        cmd += ["--bind", f"{k}={v}"]
    for s in sets:
        cmd += ["--set", s]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    head, kept = HEAD.search(out), KEPT.search(out)
    if not head:
        return {"error": out.strip().splitlines()[-1] if out.strip() else "no output"}
    return {"steps": int(head[1]), "hoisted": int(head[2]), "kept_bytes": int(kept[1]) if kept else 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--ferrofuse", default="target/release/ferrofuse")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for fam, (sweep, points, binds) in POINTS.items():
        model = f"{a.dir}/{fam}.onnx"
        try:
            open(model, "rb").close()
        except OSError:
            print(f"skipping {fam}: no {model}", file=sys.stderr)
            continue
        for v in points:
            b = binds(v)
            rows.append({"model": fam, "sweep": sweep, "value": v, "fused": plan(a.ferrofuse, model, b, []),
                         "unfused": plan(a.ferrofuse, model, b, ["fusion=false"]),
                         "no_hoist": plan(a.ferrofuse, model, b, ["hoist_constants=false"])})
    print("| model | point | steps per run | once per binding | kept KiB | unfused steps per run | without hoisting |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        f, u, n = r["fused"], r["unfused"], r["no_hoist"]
        print(f"| {r['model']} | {r['sweep']} {r['value']} | {f.get('steps', f.get('error'))} | {f.get('hoisted', '–')} | "
              f"{f.get('kept_bytes', 0) / 1024:.0f} | {u.get('steps', u.get('error'))} | {n.get('steps', n.get('error'))} |")
    if a.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        with open(a.json, "w") as fh:
            json.dump({"machine": platform.node(), "platform": platform.platform(), "commit": commit,
                       "device": "plans for a 132-SM Hopper device (inspect's defaults); no GPU used",
                       "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
