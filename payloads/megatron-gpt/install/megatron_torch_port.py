"""Torch equivalents of the apex and flash-attn entry points Megatron-LM f7727433 calls, for images
without them (PyTorch's own wheels; the NGC images carry both). port_torch.py copies this file into
the baked tree as megatron/torch_port.py and makes each import fall back to it, so a tree with apex
behaves exactly as before. Later Megatron-LM does the same itself (torch optimizers and
local_multi_tensor_* where apex is missing).
"""

import torch
import torch.nn.functional as F


class Adam(torch.optim.AdamW):
    """apex.optimizers.FusedAdam as Megatron builds it (AdamW mode and bias correction, apex's
    defaults): torch's fused AdamW. A subclass, so distrib_optimizer's isinstance check holds."""

    def __init__(self, params, lr=1e-3, bias_correction=True, betas=(0.9, 0.999), eps=1e-8,
                 adam_w_mode=True, weight_decay=0.0, amsgrad=False, set_grad_none=True):
        if not (bias_correction and adam_w_mode):
            raise ValueError("megatron.torch_port.Adam: only FusedAdam's AdamW mode with bias correction")
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         fused=True)


class SGD(torch.optim.SGD):
    """apex.optimizers.FusedSGD's arguments on torch's SGD (apex's extra flags change nothing here)."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 wd_after_momentum=False, materialize_master_grads=True, set_grad_none=False):
        super().__init__(params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                         nesterov=nesterov)


CHUNK_SIZE = 2048 * 32  # apex's applier default; the torch ops below need no chunking


def multi_tensor_applier(op, noop_flag_buffer, tensor_lists, *args):
    """apex.multi_tensor_apply.multi_tensor_applier: OP over the lists, apex's argument order."""
    return op(CHUNK_SIZE, noop_flag_buffer, tensor_lists, *args)


class amp_C:  # noqa: N801 - the name of apex's extension module, which Megatron calls through
    """apex's amp_C kernels Megatron uses, on torch's multi-tensor (_foreach) operations. Megatron
    passes dummy noop flags and never reads them back, so the flag is left as it is."""

    @staticmethod
    def multi_tensor_l2norm(chunk_size, noop_flag, tensor_lists, per_tensor, *args):
        norms = torch._foreach_norm(tensor_lists[0], 2.0)
        total = torch.linalg.vector_norm(torch.stack([n.float() for n in norms]), 2.0).reshape(1)
        return total, (torch.stack(norms) if per_tensor else None)

    @staticmethod
    def multi_tensor_scale(chunk_size, noop_flag, tensor_lists, scale):
        src, dst = tensor_lists
        if src is dst:
            torch._foreach_mul_(dst, scale)
            return
        for s, d in zip(src, dst):
            d.copy_(s if scale == 1.0 else s * scale)


class fused_weight_gradient_mlp_cuda:  # noqa: N801 - apex's extension module's name
    """apex's weight-gradient GEMM that accumulates into main_grad (Megatron's gradient
    accumulation fusion): grad_output^T x input added to main_grad, as Megatron's unfused path
    computes it (a GEMM in the activations' precision, added to the fp32 main_grad)."""

    @staticmethod
    def wgrad_gemm_accum_fp32(total_input, grad_output, main_grad):
        main_grad.add_(torch.matmul(grad_output.t(), total_input))

    wgrad_gemm_accum_fp16 = wgrad_gemm_accum_fp32


class FusedLayerNormAffineFunction:
    """apex.normalization's layer norm with weight and bias: torch's."""

    @staticmethod
    def apply(input, weight, bias, normalized_shape, eps):
        return F.layer_norm(input, normalized_shape, weight, bias, eps)


def flash_attn_unpadded_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                             softmax_scale=None, causal=False):
    """flash-attn's varlen attention as Megatron's FlashSelfAttention calls it: equal-length
    sequences packed as (batch x seq, heads, head dim), its cu_seqlens arange(0, (b+1)s, s). Torch's
    scaled_dot_product_attention picks its own flash kernel where the GPU and shapes allow."""
    batch = cu_seqlens_q.numel() - 1
    q4, k4, v4 = (x.view(batch, -1, *x.shape[1:]).transpose(1, 2) for x in (q, k, v))
    out = F.scaled_dot_product_attention(q4, k4, v4, dropout_p=dropout_p, is_causal=causal, scale=softmax_scale)
    return out.transpose(1, 2).reshape(-1, out.shape[1], out.shape[3])
