#!/usr/bin/env bash
# On the GPU machine, from the checkout with gpu-pack/ built: exports the users' models
# (benches/models/export_users.py, cached in $MODELS), measures the CLI's cold start
# (benches/coldstart.py) and prints each model's steady-state summary. Logs and JSON go to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")/.." && pwd)
MODELS=${MODELS:-/tmp/ff-models}
out=${OUT:-/tmp/ff-out}; mkdir -p "$out" "$MODELS"
suite=$(mktemp -d /tmp/ff-suite.XXXXXX)
tar -xJf "$here/gpu-pack/suite.tar.xz" -C "$suite" || exit 2
bin=$suite/suite/bin/ferrofuse
nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
python3 "$here/benches/models/export_users.py" "$MODELS" "$@" 2>&1 | tee "$out/export.log" | grep -v Warning
python3 "$here/benches/coldstart.py" "$bin" "$MODELS" "$out/coldstart.json" "$@" 2>&1 | tee "$out/coldstart.log"
for name in ${*:-gpt2 bert mlp}; do
  args=(); for i in "$MODELS/$name".in.*.npy; do n=${i#"$MODELS/$name.in."}; args+=(--input "${n%.npy}=$i"); done
  "$bin" run "$MODELS/$name.onnx" "${args[@]}" --repeat 300 2>&1 | tee "$out/repeat-$name.log" \
    | grep -E "median|first run|steps|output|error"
done
