#!/usr/bin/env python3
"""The sequence-model blocks written with the operators of OPS.md (../shared/design/OPS.md), as a
user who targets ferrofuse (or SOFIE) writes them, for the benchmark: the same block as a PyTorch
module (its scan a loop over time, as the reference implementations write it) and as an ONNX model
built from that module's weights, the scan one custom operator. Symbolic batch and sequence.

  ops_mamba    two Mamba-1 blocks (RMSNorm, in_proj, causal depthwise conv + SiLU, x_proj, dt_proj,
               `SelectiveScan` (ai.ferrofuse) with delta_bias, softplus and the z gate, out_proj,
               residual); d_model 256, d_inner 512, state 16, dt rank 16
  sofie_mamba  the same blocks with SOFIE's `MambaScan` (com.sofie): softplus, delta bias, D skip and
               z gate outside the scan, as SOFIE's contract has them
  ops_griffin  two Griffin recurrent blocks (RMSNorm, gelu(linear_y) branch, linear_x + causal conv +
               the RG-LRU gates, `RGLRU` (ai.ferrofuse), linear_out, residual); width 256
  ops_rwkv     two RWKV-6 time-mixing blocks (LayerNorm, token shift, r / k / v / g / w projections,
               `WKV6` (ai.ferrofuse, [B,T,H,N]), per-head GroupNorm, silu(g) gate, output, residual);
               d 256, 4 heads of 64

    python3 benches/models/export_ops.py OUT_DIR [NAME ...]

Writes NAME.onnx (and NAME.in.x.npy / NAME.out.npy for batch 2 x sequence 64) like
export_users.py; `build(name)` gives the PyTorch module of the same weights.
"""
import os
import sys

import numpy as np
import torch
from torch.nn import functional as F

D, LAYERS, SEQ, BATCH = 256, 2, 64, 2


def rms(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class MambaLayer(torch.nn.Module):
    def __init__(self, d=D, inner=2 * D, n=16, rank=16, width=4):
        super().__init__()
        self.inner, self.n, self.rank, self.width = inner, n, rank, width
        self.norm = torch.nn.Parameter(1 + 0.1 * torch.randn(d))
        self.w_in = torch.nn.Parameter(torch.randn(d, 2 * inner) / d ** 0.5)
        self.conv_w = torch.nn.Parameter(torch.randn(inner, 1, width) / width ** 0.5)
        self.conv_b = torch.nn.Parameter(0.1 * torch.randn(inner))
        self.w_x = torch.nn.Parameter(torch.randn(inner, rank + 2 * n) / inner ** 0.5)
        self.w_dt = torch.nn.Parameter(torch.randn(rank, inner) / rank ** 0.5)
        self.dt_bias = torch.nn.Parameter(torch.log(torch.expm1(torch.empty(inner).uniform_(1e-3, 1e-1))))
        self.a_log = torch.nn.Parameter(torch.log(torch.arange(1, n + 1, dtype=torch.float32)).repeat(inner, 1))
        self.d = torch.nn.Parameter(torch.ones(inner))
        self.w_out = torch.nn.Parameter(torch.randn(inner, d) / inner ** 0.5)

    def forward(self, x):
        L = x.shape[1]
        xin, z = (rms(x, self.norm) @ self.w_in).split(self.inner, dim=-1)
        u = F.silu(F.conv1d(xin.transpose(1, 2), self.conv_w, self.conv_b, padding=self.width - 1,
                            groups=self.inner)[..., :L])  # (B, Di, L)
        dbl = u.transpose(1, 2) @ self.w_x
        dt, bm, cm = dbl.split([self.rank, self.n, self.n], dim=-1)
        delta = F.softplus((dt @ self.w_dt) + self.dt_bias).transpose(1, 2)  # (B, Di, L)
        a = -torch.exp(self.a_log)  # (Di, N)
        h = x.new_zeros(x.shape[0], self.inner, self.n)
        ys = []
        for t in range(L):
            h = torch.exp(delta[..., t, None] * a) * h + (delta[..., t] * u[..., t])[..., None] * bm[:, None, t]
            ys.append((h * cm[:, None, t]).sum(-1))
        y = torch.stack(ys, dim=-1) + u * self.d[:, None]
        y = y * F.silu(z.transpose(1, 2))
        return x + y.transpose(1, 2) @ self.w_out


class GriffinLayer(torch.nn.Module):
    def __init__(self, d=D, width=4, heads=4):
        super().__init__()
        self.width, self.heads = width, heads
        self.norm = torch.nn.Parameter(1 + 0.1 * torch.randn(d))
        self.w_y = torch.nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.w_x = torch.nn.Parameter(torch.randn(d, d) / d ** 0.5)
        self.conv_w = torch.nn.Parameter(torch.randn(d, 1, width) / width ** 0.5)
        self.conv_b = torch.nn.Parameter(0.1 * torch.randn(d))
        blk = d // heads
        self.gate_a = torch.nn.Parameter(torch.randn(heads, blk, blk) / blk ** 0.5)
        self.gate_x = torch.nn.Parameter(torch.randn(heads, blk, blk) / blk ** 0.5)
        self.b_a = torch.nn.Parameter(0.1 * torch.randn(d))
        self.b_x = torch.nn.Parameter(0.1 * torch.randn(d))
        self.lam = torch.nn.Parameter(torch.empty(d).uniform_(-1, 2))
        self.w_out = torch.nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def block_diag(self, x, w):
        B, L, Dm = x.shape
        return torch.einsum("blhi,hij->blhj", x.reshape(B, L, self.heads, -1), w).reshape(B, L, Dm)

    def forward(self, x):
        L = x.shape[1]
        h0 = rms(x, self.norm)
        y_branch = F.gelu(h0 @ self.w_y, approximate="tanh")
        xb = F.conv1d((h0 @ self.w_x).transpose(1, 2), self.conv_w, self.conv_b, padding=self.width - 1,
                      groups=x.shape[-1])[..., :L].transpose(1, 2)
        r = torch.sigmoid(self.block_diag(xb, self.gate_a) + self.b_a)
        i = torch.sigmoid(self.block_diag(xb, self.gate_x) + self.b_x)
        a = torch.exp(-8.0 * r * F.softplus(self.lam))
        xin = xb * i
        h = x.new_zeros(x.shape[0], x.shape[-1])
        ys = []
        for t in range(L):
            h = a[:, t] * h + torch.sqrt(1 - a[:, t] ** 2) * xin[:, t]
            ys.append(h)
        return x + (torch.stack(ys, dim=1) * y_branch) @ self.w_out


class RwkvLayer(torch.nn.Module):
    def __init__(self, d=D, heads=4):
        super().__init__()
        self.heads, self.n = heads, d // heads
        self.ln_w = torch.nn.Parameter(1 + 0.1 * torch.randn(d))
        self.ln_b = torch.nn.Parameter(0.1 * torch.randn(d))
        self.mix = torch.nn.Parameter(torch.rand(5, d))
        self.w = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(d, d) / d ** 0.5) for _ in range(5))
        self.decay = torch.nn.Parameter(torch.empty(d).uniform_(-2, 0.5))
        self.u = torch.nn.Parameter(0.5 * torch.randn(heads, d // heads))
        self.gn_w = torch.nn.Parameter(1 + 0.1 * torch.randn(d))
        self.gn_b = torch.nn.Parameter(0.1 * torch.randn(d))
        self.w_out = torch.nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def forward(self, x):
        B, L, Dm = x.shape
        H, N = self.heads, self.n
        h = F.layer_norm(x, (Dm,), self.ln_w, self.ln_b)
        prev = F.pad(h, (0, 0, 1, -1))  # token shift: h[t - 1], zeros at t = 0
        mixed = [h + (prev - h) * self.mix[i] for i in range(5)]
        r, k, v, g, w = (mixed[i] @ self.w[i] for i in range(5))
        w = w + self.decay
        r, k, v, w = (t.reshape(B, L, H, N) for t in (r, k, v, w))
        s = x.new_zeros(B, H, N, N)
        ys = []
        for t in range(L):
            kv = k[:, t, :, :, None] * v[:, t, :, None, :]  # (B, H, N_key, N_value)
            ys.append((r[:, t, :, :, None] * (self.u[None, :, :, None] * kv + s)).sum(-2))
            s = torch.exp(-torch.exp(w[:, t]))[..., None] * s + kv
        y = torch.stack(ys, dim=1)  # (B, L, H, N)
        y = F.group_norm(y.reshape(B * L, Dm), H, self.gn_w, self.gn_b, eps=1e-5).reshape(B, L, Dm)
        return x + (y * F.silu(g)) @ self.w_out


class Stack(torch.nn.Module):
    def __init__(self, layer, sofie=False):
        super().__init__()
        self.layers = torch.nn.ModuleList(layer() for _ in range(LAYERS))
        self.sofie = sofie

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


FAMILIES = {"ops_mamba": MambaLayer, "sofie_mamba": MambaLayer, "ops_griffin": GriffinLayer, "ops_rwkv": RwkvLayer}


def build(name):
    torch.manual_seed(0)
    return Stack(FAMILIES[name]).eval()


class Onnx:
    """A small ONNX graph builder over onnx.helper."""

    def __init__(self):
        import onnx
        from onnx import helper
        self.onnx, self.h = onnx, helper
        self.nodes, self.inits, self.k = [], [], 0

    def name(self, base):
        self.k += 1
        return f"{base}_{self.k}"

    def const(self, array, base="c"):
        n = self.name(base)
        self.inits.append(self.onnx.numpy_helper.from_array(np.asarray(array), n))
        return n

    def op(self, op, inputs, base=None, domain="", outputs=1, **attrs):
        outs = [self.name(base or op.lower()) for _ in range(outputs)]
        self.nodes.append(self.h.make_node(op, inputs, outs, name=self.name("n_" + op), domain=domain, **attrs))
        return outs[0] if outputs == 1 else outs

    def silu(self, x):
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def softplus(self, x):
        return self.op("Softplus", [x])

    def rms(self, x, w, eps=1e-5):
        ms = self.op("ReduceMean", [self.op("Mul", [x, x]), self.const(np.array([-1], np.int64))], keepdims=1)
        inv = self.op("Reciprocal", [self.op("Sqrt", [self.op("Add", [ms, self.const(np.float32(eps))])])])
        return self.op("Mul", [self.op("Mul", [x, inv]), self.const(w)])

    def causal_conv(self, x_bcl, w, b):
        """Depthwise causal conv of (B, C, L): Conv with pads (K-1, 0)."""
        k = w.shape[-1]
        return self.op("Conv", [x_bcl, self.const(w), self.const(b)], group=w.shape[0], pads=[k - 1, 0],
                       kernel_shape=[k])

    def model(self, x, y, dm):
        h = self.h
        tp = self.onnx.TensorProto.FLOAT
        graph = h.make_graph(self.nodes, "ops_block", [h.make_tensor_value_info(x, tp, ["batch", "seq", dm])],
                             [h.make_tensor_value_info(y, tp, ["batch", "seq", dm])], self.inits)
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", 18), h.make_opsetid("ai.ferrofuse", 1),
                                               h.make_opsetid("com.sofie", 1)], producer_name="export_ops.py")
        m.ir_version = 9
        return m


def p(t):
    return t.detach().float().numpy()


def mamba_onnx(g, layer, x, sofie):
    di, n, r = layer.inner, layer.n, layer.rank
    xz = g.op("MatMul", [g.rms(x, p(layer.norm)), g.const(p(layer.w_in))])
    xin, z = g.op("Split", [xz, g.const(np.array([di, di], np.int64))], axis=-1, outputs=2)
    u = g.silu(g.causal_conv(g.op("Transpose", [xin], perm=[0, 2, 1]), p(layer.conv_w), p(layer.conv_b)))
    dbl = g.op("MatMul", [g.op("Transpose", [u], perm=[0, 2, 1]), g.const(p(layer.w_x))])
    dt, bm, cm = g.op("Split", [dbl, g.const(np.array([r, n, n], np.int64))], axis=-1, outputs=3)
    dt = g.op("Transpose", [g.op("MatMul", [dt, g.const(p(layer.w_dt))])], perm=[0, 2, 1])  # (B, Di, L)
    bm, cm = (g.op("Transpose", [t], perm=[0, 2, 1]) for t in (bm, cm))  # (B, N, L)
    a = g.const(-np.exp(p(layer.a_log)))
    zt = g.op("Transpose", [z], perm=[0, 2, 1])
    if sofie:
        # SOFIE's contract: delta already positive; D skip and the z gate outside the scan.
        delta = g.softplus(g.op("Add", [dt, g.const(p(layer.dt_bias)[:, None])]))
        y = g.op("MambaScan", [u, delta, a, bm, cm, g.const(np.zeros(di, np.float32))], domain="com.sofie")
        y = g.op("Add", [y, g.op("Mul", [u, g.const(p(layer.d)[:, None])])])
        y = g.op("Mul", [y, g.silu(zt)])
    else:
        y = g.op("SelectiveScan", [u, dt, a, bm, cm, g.const(p(layer.d)), zt, g.const(p(layer.dt_bias))],
                 domain="ai.ferrofuse", delta_softplus=1)
    out = g.op("MatMul", [g.op("Transpose", [y], perm=[0, 2, 1]), g.const(p(layer.w_out))])
    return g.op("Add", [x, out])


def griffin_onnx(g, layer, x):
    d = layer.w_y.shape[0]
    h0 = g.rms(x, p(layer.norm))
    # Gelu (tanh) spelled out, as opset 18 has no Gelu: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    yl = g.op("MatMul", [h0, g.const(p(layer.w_y))])
    cube = g.op("Mul", [yl, g.op("Mul", [yl, yl])])
    inner = g.op("Mul", [g.op("Add", [yl, g.op("Mul", [cube, g.const(np.float32(0.044715))])]),
                         g.const(np.float32(np.sqrt(2 / np.pi)))])
    yb = g.op("Mul", [g.op("Mul", [yl, g.const(np.float32(0.5))]),
                      g.op("Add", [g.op("Tanh", [inner]), g.const(np.float32(1))])])
    xl = g.op("Transpose", [g.op("MatMul", [h0, g.const(p(layer.w_x))])], perm=[0, 2, 1])
    xb = g.op("Transpose", [g.causal_conv(xl, p(layer.conv_w), p(layer.conv_b))], perm=[0, 2, 1])  # (B, L, W)
    # Block-diagonal gates as one MatMul with the block-diagonal matrix.
    def bd(w):
        m = np.zeros((d, d), np.float32)
        blk = d // layer.heads
        for hh in range(layer.heads):
            m[hh * blk:(hh + 1) * blk, hh * blk:(hh + 1) * blk] = p(w[hh])
        return m
    r = g.op("Sigmoid", [g.op("Add", [g.op("MatMul", [xb, g.const(bd(layer.gate_a))]), g.const(p(layer.b_a))])])
    i = g.op("Sigmoid", [g.op("Add", [g.op("MatMul", [xb, g.const(bd(layer.gate_x))]), g.const(p(layer.b_x))])])
    sp = np.log1p(np.exp(p(layer.lam))).astype(np.float32)
    a = g.op("Exp", [g.op("Mul", [r, g.const(-8.0 * sp)])])
    y = g.op("RGLRU", [g.op("Mul", [xb, i]), a], domain="ai.ferrofuse")
    out = g.op("MatMul", [g.op("Mul", [y, yb]), g.const(p(layer.w_out))])
    return g.op("Add", [x, out])


def rwkv_onnx(g, layer, x):
    d, H, N = layer.w_out.shape[0], layer.heads, layer.n
    h = g.op("LayerNormalization", [x, g.const(p(layer.ln_w)), g.const(p(layer.ln_b))], axis=-1, epsilon=1e-5)
    # Token shift: h[t-1] with zeros at t = 0 (Pad one step at the front of the sequence, drop the last).
    padded = g.op("Pad", [h, g.const(np.array([0, 1, 0, 0, 0, 0], np.int64))])
    seq = g.op("Gather", [g.op("Shape", [h]), g.const(np.array(1, np.int64))], axis=0)
    prev = g.op("Slice", [padded, g.const(np.array([0], np.int64)), g.op("Unsqueeze", [seq, g.const(np.array([0], np.int64))]),
                          g.const(np.array([1], np.int64))])
    diff = g.op("Sub", [prev, h])
    proj = []
    for k in range(5):
        mixed = g.op("Add", [h, g.op("Mul", [diff, g.const(p(layer.mix[k]))])])
        proj.append(g.op("MatMul", [mixed, g.const(p(layer.w[k]))]))
    r, k_, v, gate, w = proj
    w = g.op("Add", [w, g.const(p(layer.decay))])
    shape4 = g.const(np.array([0, 0, H, N], np.int64))
    r, k_, v, w = (g.op("Reshape", [t, shape4]) for t in (r, k_, v, w))
    y = g.op("WKV6", [r, k_, v, w, g.const(p(layer.u))], domain="ai.ferrofuse", layout="BTHN")  # (B, L, H, N)
    # Per-head GroupNorm over each (b, t): normalize over N within a head.
    mean = g.op("ReduceMean", [y, g.const(np.array([-1], np.int64))], keepdims=1)
    cen = g.op("Sub", [y, mean])
    var = g.op("ReduceMean", [g.op("Mul", [cen, cen]), g.const(np.array([-1], np.int64))], keepdims=1)
    y = g.op("Div", [cen, g.op("Sqrt", [g.op("Add", [var, g.const(np.float32(1e-5))])])])
    y = g.op("Reshape", [y, g.const(np.array([0, 0, d], np.int64))])
    y = g.op("Add", [g.op("Mul", [y, g.const(p(layer.gn_w))]), g.const(p(layer.gn_b))])
    out = g.op("MatMul", [g.op("Mul", [y, g.silu(gate)]), g.const(p(layer.w_out))])
    return g.op("Add", [x, out])


def export(name, out_dir):
    path = os.path.join(out_dir, f"{name}.onnx")
    if os.path.exists(path):
        print(f"{name}: cached ({path})")
        return
    model = build(name)
    g = Onnx()
    x = y = "x"
    for layer in model.layers:
        if name == "ops_mamba":
            y = mamba_onnx(g, layer, y, sofie=False)
        elif name == "sofie_mamba":
            y = mamba_onnx(g, layer, y, sofie=True)
        elif name == "ops_griffin":
            y = griffin_onnx(g, layer, y)
        else:
            y = rwkv_onnx(g, layer, y)
    y = g.op("Identity", [y], base="y")
    import onnx
    m = g.model(x, y, D)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    torch.manual_seed(1)
    inp = torch.randn(BATCH, SEQ, D)
    with torch.no_grad():
        want = model(inp)
    np.save(os.path.join(out_dir, f"{name}.in.x.npy"), inp.numpy())
    np.save(os.path.join(out_dir, f"{name}.out.npy"), want.numpy())
    print(f"{name}: {len(m.graph.node)} nodes")


if __name__ == "__main__":
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or list(FAMILIES):
        export(name, out_dir)
