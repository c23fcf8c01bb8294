#!/usr/bin/env bash
# On the GPU machine, from the checkout with gpu-pack/ built: exports the users' models
# (benches/models/export_users.py, cached in $MODELS) and measures their steady-state latency at
# several batch sizes against PyTorch eager and CUDA graph (benches/throughput.py). Arguments are
# throughput.py's cases (NAME:BATCH,...); logs and JSON go to $OUT. With PROFILE=1 each case also
# prints ferrofuse's per-step profile.
set -uo pipefail
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")/.." && pwd)
MODELS=${MODELS:-/tmp/ff-models-b2}
out=${OUT:-/tmp/ff-out}; mkdir -p "$out" "$MODELS"
bin=${FERROFUSE_BIN:-}
if [ -z "$bin" ]; then
  suite=$(mktemp -d /tmp/ff-suite.XXXXXX)
  tar -xJf "$here/gpu-pack/suite.tar.xz" -C "$suite" || exit 2
  bin=$suite/suite/bin/ferrofuse
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [ "${PROFILE:-0}" = 1 ]; then export FERROFUSE_RUN_FLAGS="--profile"; fi
python3 "$here/benches/throughput.py" "$bin" "$MODELS" "$out/throughput.json" "$@" 2>&1 | tee "$out/throughput.log"
