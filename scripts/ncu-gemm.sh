#!/usr/bin/env bash
# On the GPU machine: ncu's speed-of-light, warp-state and memory sections of ferrofuse's kernel for
# one GEMM `Y = X W` (benches/gemm.py's model), e.g.
#   scripts/ncu-gemm.sh BIN 4096x4096x4096 tf32 > OUT.txt
# PRECISION (exact | tf32) is `ferrofuse run --precision`; the kernel profiled is the plan's first;
# FERROFUSE_RUN_FLAGS go to `ferrofuse run` (e.g. `--set wgmma_gemm=false`).
set -uo pipefail
bin=$1; shape=$2; precision=${3:-exact}
here=$(cd "$(dirname "$0")/.." && pwd)
d=$(mktemp -d /tmp/ff-ncu.XXXXXX)
HERE=$here python3 - "$d" "$shape" <<'PY'
import os, sys
import numpy as np, onnx
sys.path.insert(0, os.path.join(os.environ["HERE"], "benches"))
import gemm
d, shape = sys.argv[1], sys.argv[2]
m, n, k = map(int, shape.split("x"))
rng = np.random.default_rng(m + n + k)
w = (rng.random((k, n), dtype=np.float32) * 2 - 1)
onnx.save(gemm.model(w), os.path.join(d, "gemm.onnx"), save_as_external_data=k * n > 1 << 24)
np.save(os.path.join(d, "x.npy"), (rng.random((m, k), dtype=np.float32) * 2 - 1))
PY
ncu --launch-skip 3 --launch-count 1 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section ComputeWorkloadAnalysis --section Occupancy \
  "$bin" run "$d/gemm.onnx" --input "x=$d/x.npy" --precision "$precision" --set cuda_graph=false --repeat 5 \
  ${FERROFUSE_RUN_FLAGS:-}
