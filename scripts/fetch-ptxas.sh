#!/usr/bin/env bash
# Fetches NVIDIA's ptxas (from the `nvidia-cuda-nvcc` wheel on PyPI; needs python3 with pip and the
# network) into target/tools/ and prints its path. With FERROFUSE_PTXAS set to it, the build ships
# every kernel as machine code for sm_80 and sm_90a (host/build.rs), so a first run on such a GPU
# compiles nothing:
#
#   FERROFUSE_PTXAS=$(scripts/fetch-ptxas.sh) cargo build --release
#
# The version matches the oldest driver the cubins must load on: cubins from CUDA 13.0's ptxas load
# on any driver of CUDA 13.0 or newer (older drivers refuse them and ferrofuse compiles the PTX
# instead, as without shipped cubins).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${FERROFUSE_PTXAS_VERSION:-13.0.88}
dest=target/tools/ptxas-$version
if [ ! -x "$dest/ptxas" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" \
    "nvidia-cuda-nvcc==$version" >&2
  mkdir -p "$dest"
  python3 - "$tmp" "$dest" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith("/bin/ptxas"))
    out = os.path.join(sys.argv[2], "ptxas")
    with z.open(name) as src, open(out + ".tmp", "wb") as dst:
        dst.write(src.read())
    os.chmod(out + ".tmp", 0o755)
    os.replace(out + ".tmp", out)
PY
fi
echo "$(pwd)/$dest/ptxas"
