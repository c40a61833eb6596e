import torch, sys
sys.path.insert(0, "/work/main")
torch.manual_seed(0)
V, H, R = 157184, 2560, 64
def q8_rows(w):
    scale = w.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 448.0
    return (w / scale).to(torch.float8_e4m3fn).float() * scale
def states_for(w):
    g = torch.Generator().manual_seed(0)
    rnd = torch.randn(R, H, generator=g)
    rows = torch.randint(0, V, (R,), generator=g)
    own = w[rows].float(); own = own / own.pow(2).mean(-1, keepdim=True).sqrt()
    return torch.cat([rnd, own]).to(torch.bfloat16).float()
for name in ("dummy", "known-answer", "garbage-bf16-view"):
    if name == "dummy":
        w = (torch.rand(V, H) * 2e-3 - 1e-3).to(torch.bfloat16).float()
    else:
        e = torch.randn(V, H); e = e / e.pow(2).mean(-1, keepdim=True).sqrt()
        w = e[torch.randperm(V)].to(torch.bfloat16).float()
    x = states_for(w)
    ref = x @ w.t()
    wq = q8_rows(w) if name != "garbage-bf16-view" else torch.randn(V, H)
    xq = q8_rows(x)
    out = xq @ wq.t()
    cos = torch.nn.functional.cosine_similarity(out, ref, dim=-1)
    agree = out.argmax(-1) == ref.argmax(-1)
    print(f"{name:18} cos_min {cos.min():.4f}  top1 random {agree[:R].float().mean():.3f}  top1 head-rows {agree[R:].float().mean():.3f}", flush=True)
