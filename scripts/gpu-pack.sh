#!/usr/bin/env bash
# Builds everything the GPU suite needs in release mode (the `gpu` test binaries, the benches and
# the ferrofuse binary) and gathers it into gpu-pack/ (git-ignored) with a runner, so the suite runs
# on a machine that has an NVIDIA GPU but no Rust toolchain:
#
#   scripts/gpu-pack.sh                      # here
#   gpu-pack/run.sh [--bench] [--sanitize] [--latency]   # there; prints a pass/fail summary, exits non-zero on failure
#
# The binaries are stripped and travel xz-compressed (each embeds the PTX text, which compresses
# about tenfold); run.sh unpacks them into a temporary folder. The host package's tests (unit
# tests and the gpu_kernels suite) and every root-package test that can use the GPU are packed;
# run.sh points the latter at the checkout next to gpu-pack/ (FERROFUSE_REPO_DIR) and at the packed
# CLI (FERROFUSE_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup toolchain install >/dev/null
# Ship every kernel as machine code (host/build.rs), as a release build would: the suite then runs
# the shipped cubins. FERROFUSE_PTXAS= (empty) packs without them.
if [ -z "${FERROFUSE_PTXAS+set}" ]; then
  if FERROFUSE_PTXAS=$(scripts/fetch-ptxas.sh); then
    export FERROFUSE_PTXAS
  else
    echo "warning: could not fetch ptxas: packing without shipped cubins" >&2
    export FERROFUSE_PTXAS=
  fi
fi

out=gpu-pack
pack=$out/suite
rm -rf "$out"
mkdir -p "$pack/tests" "$pack/benches" "$pack/bin"

executables() { # cargo JSON messages on stdin -> "target-kind name path" lines
  python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        kind = m["target"]["kind"][0]
        print(kind, m["target"]["name"], m["executable"])
'
}

cargo build --release --bin ferrofuse
cp target/release/ferrofuse "$pack/bin/"
# The stateful decode example: run by run.sh, it checks step-by-step decoding against one
# reference run over the whole sequence.
cargo build --release --example decode
cp target/release/examples/decode "$pack/bin/"

cargo test -p host --release --features gpu --no-run --message-format=json 2>/dev/null \
  | executables | while read -r kind name path; do
      if [ "$kind" != bin ]; then cp "$path" "$pack/tests/${name}-$(basename "$path" | sed 's/.*-//')"; fi
    done

# The root package's tests that can run on the GPU machine: the end-to-end GPU models and the ONNX
# node-test conformance on the GPU, doctor and bench through the CLI, the bad-input suite (its CLI runs take
# the GPU path there), the PyTorch fixtures and the demo model. They read the checkout through
# FERROFUSE_REPO_DIR and run the packed binary through FERROFUSE_BIN (run.sh sets both); the node
# tests travel too when they were fetched.
cargo test --release --features gpu --test gpu_conformance --test gpu_models --test cli_doctor --test cli_warmup --test bad_input \
  --test pytorch_models --test demo_model --test cli_bench --no-run --message-format=json 2>/dev/null \
  | executables | while read -r kind name path; do
      if [ "$kind" = test ]; then cp "$path" "$pack/tests/${name}-$(basename "$path" | sed 's/.*-//')"; fi
    done
if [ -d target/onnx-node-tests ]; then
  tar -cf - -C target onnx-node-tests | xz -T2 -6 > "$out/onnx-node-tests.tar.xz"
fi

# The PTX itself, for ptxas / cuobjdump inspection on the GPU machine.
cp "$(ls -t target/release/build/host/*/out/kernels-portable.ptx | head -1)" "$pack/"
cp "$(ls -t target/release/build/host/*/out/kernels-hopper.ptx | head -1)" "$pack/"

cargo bench -p ferrofuse --features gpu --no-run --message-format=json 2>/dev/null \
  | executables | while read -r kind name path; do
      if [ "$kind" = bench ]; then cp "$path" "$pack/benches/$name"; fi
    done

cat > "$out/run.sh" <<'RUNNER'
#!/usr/bin/env bash
# Runs the packed GPU suite: ferrofuse doctor, every test binary, optionally the benches and a
# compute-sanitizer pass. Prints one PASS/FAIL line per item and a summary; exits 1 on any failure.
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/ferrofuse-suite.XXXXXX)
tar -xJf "$here/suite.tar.xz" -C "$work" && cd "$work/suite" || exit 2
bench=0; sanitize=0; latency=0; tests=1
for a in "$@"; do
  case "$a" in --bench) bench=1 ;; --sanitize) sanitize=1 ;; --latency) latency=1 ;; --no-tests) tests=0 ;;
    *) echo "unknown option $a"; exit 2 ;; esac
done
logs=${OUT:-/tmp}/gpu-suite-logs; mkdir -p "$logs"
# The root package's tests read the checkout next to gpu-pack/ and run the packed CLI; every test
# binary shares one kernel cache (the first fills it).
export FERROFUSE_REPO_DIR="$here/.." FERROFUSE_BIN="$work/suite/bin/ferrofuse"
export FERROFUSE_CACHE_DIR="${FERROFUSE_CACHE_DIR:-$work/kernel-cache}"
pass=0; fail=0; summary=()
record() { # name status
  if [ "$2" -eq 0 ]; then pass=$((pass+1)); summary+=("PASS $1"); else fail=$((fail+1)); summary+=("FAIL $1 (exit $2, log $logs/$1.log)"); fi
}
./bin/ferrofuse doctor 2>&1 | tee "$logs/doctor.log"; record doctor "${PIPESTATUS[0]}"
if [ -f "$here/onnx-node-tests.tar.xz" ]; then
  tar -xJf "$here/onnx-node-tests.tar.xz" -C "$work" && export FERROFUSE_ONNX_NODE_TESTS="$work/onnx-node-tests"
  export FERROFUSE_REPORT_DIR="$logs"
fi
for t in tests/*; do
  [ "$tests" = 1 ] || break
  name=$(basename "$t")
  "$t" --nocapture > "$logs/$name.log" 2>&1; status=$?
  grep -E "^test result|panicked|FAILED|failed" "$logs/$name.log" | sed "s/^/  [$name] /" | head -20
  record "$name" "$status"
done
if [ "$tests" = 1 ]; then
  ./bin/decode 2>&1 | tee "$logs/decode.log"; record example-decode "${PIPESTATUS[0]}"
fi
if [ "$sanitize" = 1 ]; then
  for tool in memcheck racecheck; do
    for t in tests/gpu_kernels-*; do
      [ -e "$t" ] || continue
      name="sanitize-$tool-$(basename "$t")"
      # The out-of-memory test's failed allocation is an API error the sanitizer would count.
      PROPTEST_CASES=8 compute-sanitizer --tool "$tool" --error-exitcode 99 "$t" --test-threads=1 \
        --skip a_binding_too_large_for_device_memory > "$logs/$name.log" 2>&1; status=$?
      tail -3 "$logs/$name.log" | sed "s/^/  [$name] /"
      record "$name" "$status"
    done
  done
fi
if [ "$bench" = 1 ]; then
  for b in benches/*; do
    name="bench-$(basename "$b")"
    "$b" --bench 2>&1 | tee "$logs/$name.log"; record "$name" "${PIPESTATUS[0]}"
  done
fi
if [ "$latency" = 1 ]; then
  # Steady-state latency of the bundled demo and the PyTorch fixtures (from the checkout next to
  # gpu-pack/), graph replay on and off.
  fx="$here/../tests/fixtures/pytorch"
  ./bin/ferrofuse run --repeat 2000 2>&1 | tee "$logs/latency-demo.log"; record latency-demo "${PIPESTATUS[0]}"
  ./bin/ferrofuse run "$fx/gpt2.onnx" --input input_ids="$fx/gpt2.in.input_ids.npy" --repeat 2000 2>&1 \
    | tee "$logs/latency-gpt2.log"; record latency-gpt2 "${PIPESTATUS[0]}"
  ./bin/ferrofuse run "$fx/bert.onnx" --input input_ids="$fx/bert.in.input_ids.npy" \
    --input attention_mask="$fx/bert.in.attention_mask.npy" --input token_type_ids="$fx/bert.in.token_type_ids.npy" \
    --repeat 2000 2>&1 | tee "$logs/latency-bert.log"; record latency-bert "${PIPESTATUS[0]}"
fi
echo "==== GPU suite summary ===="
printf '%s\n' "${summary[@]}"
echo "passed $pass, failed $fail"
[ "$fail" -eq 0 ]
RUNNER
chmod +x "$out/run.sh"
strip "$pack"/bin/* "$pack"/tests/* "$pack"/benches/*
# One xz stream with a window wider than a binary: the binaries share their embedded kernels
# (about 50 MB each), so the pack shrinks about fourfold (58 -> 14 MB) against a per-block stream.
tar -cf - -C "$out" suite | xz -T1 --lzma2=preset=6,dict=256MiB > "$out/suite.tar.xz"
rm -rf "$pack"
ls -la "$out"
