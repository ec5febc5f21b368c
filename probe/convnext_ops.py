"""Probe: ConvNeXt-T's ops, fwd+bwd, JAX vs torch, one H200, bf16, batch 256."""
import sys, time, json
B = 256
STAGES = [(56, 96), (28, 192), (14, 384), (7, 768)]
DEPTHS = [3, 3, 9, 3]
out = {}

def jax_side():
    import jax, jax.numpy as jnp
    def bench(f, *args, n=20):
        g = jax.jit(f)
        r = g(*args); jax.block_until_ready(r)
        t = time.perf_counter()
        for _ in range(n): r = g(*args)
        jax.block_until_ready(r)
        return (time.perf_counter() - t) / n * 1e3
    res = {}
    for (hw, c), d in zip(STAGES, DEPTHS):
        x = jnp.ones((B, hw, hw, c), jnp.bfloat16)
        w = jnp.ones((7, 7, 1, c), jnp.bfloat16)
        def dw(x, w):
            return jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=c)
        def dw_loss(x, w):
            return dw(x, w).astype(jnp.float32).sum()
        res[f"dw{hw}_fwd"] = bench(dw, x, w) * d
        res[f"dw{hw}_fwdbwd"] = bench(jax.grad(dw_loss, argnums=(0, 1)), x, w) * d
        def ln(x, g, b):
            xf = x.astype(jnp.float32)
            m = xf.mean(-1, keepdims=True); v = ((xf - m) ** 2).mean(-1, keepdims=True)
            return (((xf - m) * jax.lax.rsqrt(v + 1e-6)) * g + b).astype(jnp.bfloat16)
        g = jnp.ones((c,), jnp.float32); b = jnp.zeros((c,), jnp.float32)
        res[f"ln{hw}_fwdbwd"] = bench(jax.grad(lambda x, g, b: ln(x, g, b).astype(jnp.float32).sum(), argnums=(0, 1, 2)), x, g, b) * d
        w1 = jnp.ones((c, 4 * c), jnp.bfloat16); w2 = jnp.ones((4 * c, c), jnp.bfloat16)
        def mlp(x, w1, w2):
            h = jax.nn.gelu(x @ w1, approximate=False)
            return (h @ w2).astype(jnp.float32).sum()
        res[f"mlp{hw}_fwdbwd"] = bench(jax.grad(mlp, argnums=(0, 1, 2)), x, w1, w2) * d
    return res

def torch_side():
    import torch, torch.nn.functional as F
    def bench(f, n=20):
        f(); torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(n): f()
        torch.cuda.synchronize(); return (time.perf_counter() - t) / n * 1e3
    res = {}
    for (hw, c), d in zip(STAGES, DEPTHS):
        x = torch.ones(B, c, hw, hw, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last).requires_grad_()
        w = torch.ones(c, 1, 7, 7, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        res[f"dw{hw}_fwd"] = bench(lambda: F.conv2d(x, w, padding=3, groups=c)) * d
        def fb():
            y = F.conv2d(x, w, padding=3, groups=c); y.float().sum().backward()
        res[f"dw{hw}_fwdbwd"] = bench(fb) * d
        xl = torch.ones(B, hw, hw, c, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        lnm = torch.nn.LayerNorm(c, eps=1e-6).cuda()
        lnc = torch.compile(lambda x: lnm(x))
        def lnfb():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = lnc(xl)
            y.float().sum().backward()
        res[f"ln{hw}_fwdbwd"] = bench(lnfb) * d
        l1 = torch.nn.Linear(c, 4 * c).cuda(); l2 = torch.nn.Linear(4 * c, c).cuda()
        mlpc = torch.compile(lambda x: l2(F.gelu(l1(x))))
        def mfb():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = mlpc(xl)
            y.float().sum().backward()
        res[f"mlp{hw}_fwdbwd"] = bench(mfb) * d
    return res

side = sys.argv[1]
r = jax_side() if side == "jax" else torch_side()
print(json.dumps({side: {k: round(v, 3) for k, v in r.items()}}))
tot = {}
for k, v in r.items():
    kind = k.rstrip("0123456789_fwdbw") if False else ''.join(ch for ch in k.split('_')[0] if ch.isalpha()) + "_" + k.split('_')[1]
    tot[kind] = tot.get(kind, 0) + v
print(side, {k: round(v, 2) for k, v in tot.items()})
