#!/usr/bin/env bash
# Profiles GPT-2's attention and tensor-core GEMM kernels with ncu: summary sections and the hottest SASS lines.
F=${F:-/tmp/s/suite/bin/ferrofuse}
[ -x $F ] || { mkdir -p /tmp/s && tar -xJf gpu-pack/suite.tar.xz -C /tmp/s; }
if [ ! -f /tmp/g/gpt2.onnx ]; then FERROFUSE_KEEP=/tmp/g timeout 200 python3 scripts/latency_vs_pytorch.py $F /tmp/g/x.json > /dev/null 2>&1; fi
IN=$(python3 -c "import onnx;print(onnx.load('/tmp/g/gpt2.onnx',load_external_data=False).graph.input[0].name)")
echo; for k in ${KERNELS:-attention gemm_tc_program gemm_tc_f32}; do
  sk=${k#*@}; [ "$sk" = "$k" ] && sk=${SKIP:-0}; k=${k%@*}
  echo "=== $k launch $sk"; timeout 120 ncu --set full --cache-control none --clock-control none --import-source no -k regex:$k -s $sk -c 1 -o $OUT/$k$sk $F run /tmp/g/gpt2.onnx --input $IN=/tmp/g/ids.npy > /dev/null 2>&1
  ncu -i $OUT/$k$sk.ncu-rep --page details > $OUT/$k$sk.txt 2>&1
  ncu -i $OUT/$k$sk.ncu-rep --page source --csv --print-source sass > $OUT/$k$sk.src.csv 2>&1
  grep -E "Duration|Registers Per|Achieved Occ|Executed Ipc A|Issued Instructions  |L2 Hit Rate|L1/TEX Hit|DRAM Throughput|Memory Throughput|Mem Busy|Max Bandwidth|Warp Cycles Per Issued|No Eligible|Grid Size|Block Size|Local Memory Spill" $OUT/$k$sk.txt | head -24
  python3 - $OUT/$k$sk.src.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((i for i, r in enumerate(rows) if any('Warp Stall Sampling (All' in c for c in r)), None)
if hdr is None: print("no source table"); sys.exit()
h = rows[hdr]; col = next(i for i, c in enumerate(h) if 'Warp Stall Sampling (All' in c); src = next((i for i, c in enumerate(h) if c == 'Source'), 1)
body = [r for r in rows[hdr+1:] if len(r) > col and r[col].replace('.', '').isdigit()]
tot = sum(float(r[col]) for r in body) or 1
for r in sorted(body, key=lambda r: -float(r[col]))[:16]: print(f"{100*float(r[col])/tot:5.1f}%  {r[src][:110]}")
ex = next((i for i, c in enumerate(h) if c.startswith('Instructions Executed')), None)
if ex is not None:
    ops = {}
    for r in body:
        try: n = float(r[ex])
        except ValueError: continue
        t = r[src].split()
        op = (t[1] if t and t[0].startswith('@') and len(t) > 1 else (t[0] if t else '?')).split('.')[0]
        ops[op] = ops.get(op, 0) + n
    tot_ex = sum(ops.values()) or 1
    print("executed (warp instructions) by opcode:", ", ".join(f"{k} {100*v/tot_ex:.0f}%" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:14]), f"total {tot_ex:.0f}")
PY
  rm -f $OUT/$k$sk.src.csv
done
