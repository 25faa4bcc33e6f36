"""Check megatron_torch_port.py (the torch stand-ins for apex and flash-attn that port_torch.py
puts into Megatron-LM) against plain torch: attention against an explicit causal softmax, the
L2 norm, scale and copy, the accumulating weight-gradient GEMM, layer norm and an AdamW step.

Usage: python torch_port_check.py PORT_MODULE DEVICE   (cuda: fp16 activations, as Megatron's
fp16 run; cpu: fp32). Run by make gpu-check on a GPU and in the pytorch-cpu image in CI.
Prints "torch port: ok" when every check holds."""

import importlib.util
import math
import sys

import torch


def load(path):
    spec = importlib.util.spec_from_file_location("torch_port", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(path, dev):
    tp = load(path)
    half = torch.float16 if dev == "cuda" else torch.float32
    tol = 2e-2 if half == torch.float16 else 1e-4
    torch.manual_seed(0)

    b, s, h, d = 2, 128, 4, 64
    q, k, v = (torch.randn(b, s, h, d, device=dev, dtype=half) for _ in range(3))
    cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=dev)
    out = tp.flash_attn_unpadded_func(*(x.reshape(b * s, h, d) for x in (q, k, v)), cu, cu, s, s, 0.0, causal=True)
    att = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) / math.sqrt(d)
    att = att.masked_fill(torch.triu(torch.ones(s, s, dtype=torch.bool, device=dev), 1), float("-inf")).softmax(-1)
    ref = torch.einsum("bhqk,bkhd->bqhd", att, v.float()).reshape(b * s, h, d)
    assert out.shape == ref.shape and (out.float() - ref).abs().max() < tol, (out.float() - ref).abs().max()

    ts = [torch.randn(300, 70, device=dev), torch.randn(33, device=dev)]
    flag = torch.zeros(1, dtype=torch.int, device=dev)
    norm, _ = tp.multi_tensor_applier(tp.amp_C.multi_tensor_l2norm, flag, [ts], False)
    assert torch.allclose(norm, torch.sqrt(sum((t ** 2).sum() for t in ts)).reshape(1), rtol=1e-5), norm
    copies = [torch.empty_like(t).to(half) for t in ts]
    tp.multi_tensor_applier(tp.amp_C.multi_tensor_scale, flag, [ts, copies], 1.0)
    assert all(torch.equal(c, t.to(half)) for c, t in zip(copies, ts))
    scaled = [t.clone() for t in ts]
    tp.multi_tensor_applier(tp.amp_C.multi_tensor_scale, flag, [scaled, scaled], 0.5)
    assert all(torch.allclose(x, t * 0.5) for x, t in zip(scaled, ts))

    inp = torch.randn(64, 32, device=dev, dtype=half)
    grad_out = torch.randn(64, 16, device=dev, dtype=half)
    main_grad = torch.ones(16, 32, device=dev)
    tp.fused_weight_gradient_mlp_cuda.wgrad_gemm_accum_fp32(inp, grad_out, main_grad)
    assert (main_grad - 1 - grad_out.float().t() @ inp.float()).abs().max() < 5 * tol

    x = torch.randn(8, 256, device=dev, dtype=half)
    w, bias = (torch.randn(256, device=dev, dtype=half) for _ in range(2))
    ln = tp.FusedLayerNormAffineFunction.apply(x, w, bias, torch.Size([256]), 1e-5).float()
    mu, var = x.float().mean(-1, keepdim=True), x.float().var(-1, unbiased=False, keepdim=True)
    assert (ln - ((x.float() - mu) / torch.sqrt(var + 1e-5) * w.float() + bias.float())).abs().max() < 5 * tol

    p1 = torch.nn.Parameter(torch.randn(1000, device=dev))
    p2 = torch.nn.Parameter(p1.detach().clone())
    opts = (tp.Adam([p1], lr=1e-3, weight_decay=0.1, betas=(0.9, 0.999), eps=1e-8),
            torch.optim.AdamW([p2], lr=1e-3, weight_decay=0.1, betas=(0.9, 0.999), eps=1e-8))
    for opt, p in zip(opts, (p1, p2)):
        p.grad = torch.linspace(-1, 1, 1000, device=dev)
        opt.step()
    assert isinstance(opts[0], torch.optim.AdamW) and torch.allclose(p1, p2, atol=1e-6)
    print("torch port: ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
