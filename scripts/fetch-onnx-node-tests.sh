#!/usr/bin/env bash
# Fetches the official ONNX backend node tests (model.onnx + test_data_set_*/{input,output}_*.pb for
# each case) from the pinned onnx release on PyPI into target/onnx-node-tests/ (never vendored).
# The wheel is a zip; only onnx/backend/test/data/node/ is extracted. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

version=1.22.0
wheel=onnx-1.22.0-cp312-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
sha256=955e02e1f6d385b53d52f9cd7b9cdf5caf417c300bcfe3c64c6d542be763845b
dest=target/onnx-node-tests
cache=target/onnx-wheel

if [ -f "$dest/.version" ] && [ "$(cat "$dest/.version")" = "$version" ]; then
  echo "onnx $version node tests already in $dest ($(ls "$dest" | wc -l) cases)"
  exit 0
fi
mkdir -p "$cache"
if [ ! -f "$cache/$wheel" ]; then
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$cache" "onnx==$version"
fi
echo "$sha256  $cache/$wheel" | sha256sum --check --quiet
rm -rf "$dest" "$cache/extract"
python3 - "$cache/$wheel" "$cache/extract" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("onnx/backend/test/data/node/")]
    z.extractall(sys.argv[2], names)
PY
mv "$cache/extract/onnx/backend/test/data/node" "$dest"
rm -rf "$cache/extract"
echo "$version" > "$dest/.version"
echo "onnx $version node tests in $dest ($(ls "$dest" | wc -l) cases)"
