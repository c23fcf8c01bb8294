#!/usr/bin/env bash
# On the GPU machine, from the checkout with gpu-pack/ built: exports the users' models
# (benches/models/export_users.py, cached in $MODELS), measures the CLI's cold start
# (benches/coldstart.py) and prints each model's steady-state summary. Logs and JSON go to $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")/.." && pwd)
MODELS=${MODELS:-/tmp/ff-models-b2}
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
# The other first-contact commands: warmup (all kernels; one model's plan), doctor --cold, the
# per-step profile, the session's arena plan. (The export's symbols are read off its inputs.)
syms=$(python3 -c "import onnx,sys; m=onnx.load(sys.argv[1], load_external_data=False); print(' '.join(d.dim_param for d in m.graph.input[0].type.tensor_type.shape.dim))" "$MODELS/gpt2.onnx")
set -- $syms; binds="--bind $1=2 --bind $2=128"
FERROFUSE_CACHE_DIR=$(mktemp -d) "$bin" warmup 2>&1 | tee "$out/warmup-all.log" | tail -2
w=$(mktemp -d); FERROFUSE_CACHE_DIR=$w "$bin" warmup "$MODELS/gpt2.onnx" $binds 2>&1 | tee "$out/warmup-gpt2.log" | tail -2
FERROFUSE_CACHE_DIR=$w "$bin" doctor --cold 2>&1 | tee "$out/doctor-cold.log" | grep -E "kernel load|passed|failed"
"$bin" run "$MODELS/gpt2.onnx" --input input_ids="$MODELS/gpt2.in.input_ids.npy" --repeat 20 --profile 2>&1 \
  | tee "$out/profile-gpt2.log" | grep -E "^plan \(|^by kernel|^  [a-z]" | head -12
"$bin" inspect "$MODELS/gpt2.onnx" --memory $binds 2>&1 | tee "$out/inspect-memory-gpt2.log" | head -6
