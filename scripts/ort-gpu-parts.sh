#!/usr/bin/env bash
# Prepares ONNX Runtime GPU (onnxruntime-gpu 1.31.1, CUDA 13, Python 3.12) for the GPU machine,
# which has no registry: downloads the wheel here (cached in $ORT_CACHE, default ~/.cache/ferrofuse-ort),
# unpacks it without the TensorRT provider (the image has no TensorRT), packs it as tar | xz and
# splits it into parts small enough that one part and the checkout fit a device call's 64 MiB.
#
#   scripts/ort-gpu-parts.sh            # -> $ORT_CACHE/part.00 .. part.NN
#
# Then, back to back so the machine stays warm (it is released after 30 s idle), for each part:
#   mkdir -p .ort/N && cp $ORT_CACHE/part.N .ort/N/        # .ort/ is ignored; carry it: carry [".ort"]
#   scripts/ort-gpu-device.sh part                         # on the device: moves it out of the checkout
# and, in the call that runs the peers (after every part has landed):
#   eval "$(scripts/ort-gpu-device.sh env)"                # reassembles once, exports PYTHONPATH and
#                                                          # LD_LIBRARY_PATH (torch's CUDA 13 libraries)
# Keep the checkout's other untracked files small in those calls (a stripped binary is ~9 MB).
set -euo pipefail
version=1.31.1
cache=${ORT_CACHE:-$HOME/.cache/ferrofuse-ort}
part_bytes=${ORT_PART_BYTES:-48700000}
mkdir -p "$cache"
cd "$cache"
wheel=$(ls onnxruntime_gpu-$version-*.whl 2>/dev/null | head -1 || true)
if [ -z "$wheel" ]; then
  pip download --no-deps "onnxruntime-gpu==$version" --python-version 3.12 --only-binary=:all: \
    --platform manylinux_2_28_x86_64 -d . >&2
  wheel=$(ls onnxruntime_gpu-$version-*.whl | head -1)
fi
rm -rf site part.* && mkdir site
python3 -m zipfile -e "$wheel" site
rm -f site/onnxruntime/capi/libonnxruntime_providers_tensorrt.so
tar -cf - -C site . | xz -T0 -6 > ort.tar.xz
split -b "$part_bytes" -d ort.tar.xz part.
rm -rf site ort.tar.xz
ls -l "$cache"/part.*
