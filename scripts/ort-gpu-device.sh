#!/usr/bin/env bash
# On the GPU machine, from the checkout: receives ONNX Runtime GPU in the parts that
# scripts/ort-gpu-parts.sh made, one per device call (see there).
#   scripts/ort-gpu-device.sh part   moves the carried .ort/*/part.* out of the checkout
#   scripts/ort-gpu-device.sh env    reassembles them once into /tmp/ort-site and prints the exports
#                                    that make `import onnxruntime` find it: eval "$(... env)"
set -euo pipefail
parts=/tmp/ort-parts site=/tmp/ort-site
mkdir -p "$parts"
case "${1:-}" in
  part)
    mv .ort/*/part.* "$parts"/ 2>/dev/null || true
    ls -l "$parts" >&2
    ;;
  env)
    mv .ort/*/part.* "$parts"/ 2>/dev/null || true
    if [ ! -d "$site/onnxruntime" ]; then
      mkdir -p "$site"
      cat "$parts"/part.* | xz -dc | tar -xf - -C "$site"
    fi
    sp=$(python3 -c 'import site; print(site.getsitepackages()[0])')
    libs=$( (ls -d "$sp"/nvidia/*/lib 2>/dev/null || true) | tr "\n" ":")
    echo "export PYTHONPATH=$site\${PYTHONPATH:+:\$PYTHONPATH} LD_LIBRARY_PATH=$libs\${LD_LIBRARY_PATH:-}"
    ;;
  *)
    echo "usage: $0 part | env" >&2
    exit 2
    ;;
esac
