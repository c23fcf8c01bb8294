#!/usr/bin/env bash
# Profiles GPT-2's attention and tensor-core GEMM kernels with ncu: summary sections and the hottest SASS lines.
F=/tmp/s/suite/bin/ferrofuse
[ -x $F ] || { mkdir -p /tmp/s && tar -xJf gpu-pack/suite.tar.xz -C /tmp/s; }
if [ ! -f /tmp/g/gpt2.onnx ]; then FERROFUSE_KEEP=/tmp/g timeout 200 python3 scripts/latency_vs_pytorch.py $F /tmp/g/x.json > /dev/null 2>&1; fi
IN=$(python3 -c "import onnx;print(onnx.load('/tmp/g/gpt2.onnx',load_external_data=False).graph.input[0].name)")
for k in ${KERNELS:-attention gemm_tc_program gemm_tc_f32}; do
  timeout 120 ncu --set full --import-source no -k regex:$k -s ${SKIP:-0} -c 1 -o $OUT/$k $F run /tmp/g/gpt2.onnx --input $IN=/tmp/g/ids.npy > /dev/null 2>&1
  ncu -i $OUT/$k.ncu-rep --page details > $OUT/$k.txt 2>&1
  ncu -i $OUT/$k.ncu-rep --page source --csv --print-source sass > $OUT/$k.src.csv 2>&1
  grep -E "Duration|Registers Per|Achieved Occ|Theoretical Occ|Executed Ipc A|Issued Instructions  |Block Limit" $OUT/$k.txt | head -12
  python3 - $OUT/$k.src.csv <<'PY'
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
  rm -f $OUT/$k.src.csv
done
