#!/usr/bin/env bash
# Machine code of one kernel, without a GPU: compiles the Hopper PTX flavour of the last release
# build with ptxas (scripts/fetch-ptxas.sh), disassembles ENTRY with cuobjdump / nvdisasm (fetched
# from the `nvidia-cuda-cuobjdump` and `nvidia-cuda-nvdisasm` wheels on PyPI into target/tools/;
# their oldest release there is 13.2, newer than the ptxas of the build, which they read fine),
# and prints ptxas's register and stack report, the instruction mix of every backward branch's
# body longer than MIN instructions (loops; nested ones counted in their parents too) and the
# local-memory operations (STL / LDL: arrays or spills in local memory) in the whole entry.
#
#   scripts/sass.sh attention_small_f32 [MIN]     # after `cargo build --release`
#
# The full listing is left in target/tools/sass/ENTRY.sass. What it found first: the small-head
# attention kept its score tiles in local memory (a rolled loop), which ptxas -v alone did not
# show (no spills, a stack frame that looked like the score program's staging array).
set -euo pipefail
cd "$(dirname "$0")/.."
entry=${1:?usage: scripts/sass.sh ENTRY [MIN]}
min=${2:-50}
version=${FERROFUSE_SASS_TOOLS_VERSION:-13.5.37}
tools=target/tools/sass-$version
if [ ! -x "$tools/cuobjdump" ] || [ ! -x "$tools/nvdisasm" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" \
    "nvidia-cuda-cuobjdump==$version" "nvidia-cuda-nvdisasm==$version" >&2
  mkdir -p "$tools"
  python3 - "$tmp" "$tools" <<'PY'
import glob, os, sys, zipfile
for wheel in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            base = os.path.basename(name)
            if "/bin/" in name and base in ("cuobjdump", "nvdisasm"):
                out = os.path.join(sys.argv[2], base)
                with z.open(name) as src, open(out + ".tmp", "wb") as dst:
                    dst.write(src.read())
                os.chmod(out + ".tmp", 0o755)
                os.replace(out + ".tmp", out)
PY
fi
ptxas=$(scripts/fetch-ptxas.sh)
ptx=$(ls -t target/release/build/host/*/out/kernels-hopper.ptx 2>/dev/null | head -1)
[ -n "$ptx" ] || { echo "no Hopper PTX: run cargo build --release first" >&2; exit 1; }
mkdir -p target/tools/sass
cubin=target/tools/sass/kernels-hopper.cubin
if [ ! -f "$cubin" ] || [ "$ptx" -nt "$cubin" ]; then
  "$ptxas" -arch=sm_90a -v "$ptx" -o "$cubin" > target/tools/sass/ptxas.txt 2>&1
fi
grep -A3 "entry function '$entry'" target/tools/sass/ptxas.txt | grep -E "stack|registers" || {
  echo "no entry $entry in $ptx" >&2
  exit 1
}
out=target/tools/sass/$entry.sass
PATH="$(pwd)/$tools:$PATH" "$tools/cuobjdump" -sass -fun "$entry" "$cubin" > "$out"
python3 - "$out" "$min" <<'PY'
import collections, re, sys
ins = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s*(.*?);", line)
    if m:
        ins.append((int(m.group(1), 16), m.group(2).strip()))

def opcode(text):
    return re.sub(r"^@!?U?P\w+\s+", "", text).split()[0].split(".")[0]

def mix(lo, hi):
    c = collections.Counter(opcode(t) for a, t in ins if lo <= a <= hi)
    return " ".join(f"{k}:{v}" for k, v in c.most_common(12))

print(f"{len(ins)} instructions")
for a, t in ins:
    m = re.search(r"BRA\s+(?:`?\(?\.L_x_\d+\)?|0x([0-9a-f]+))", t)
    if m and m.group(1):
        target = int(m.group(1), 16)
        n = sum(1 for b, _ in ins if target <= b <= a)
        if target < a and n > int(sys.argv[2]):
            print(f"loop {target:#x}..{a:#x}: {n} instructions; {mix(target, a)}")
local = [(a, t) for a, t in ins if re.search(r"\b(STL|LDL)\b", t)]
print(f"{len(local)} local-memory operations (STL / LDL)")
PY
