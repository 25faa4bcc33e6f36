"""Let Megatron-LM f7727433 (with CARAML's patch) run on PyTorch without apex, flash-attn or
nvfuser, as on PyTorch's own wheels, and build its data helpers without python3-config.

Usage: port_torch.py TREE   (the baked Megatron-LM tree; run once, at image build)

Every change is a fallback taken only where the original import or call fails, so a tree on an
NGC image (apex, flash-attn, nvfuser) runs exactly as before; CHANGES lists each with its reason,
and the build prints them. An edit whose original text is missing stops the build (the archive
is checksummed, so this fires only when the pin moves). The torch equivalents are in
megatron_torch_port.py, copied into the tree as megatron/torch_port.py.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

FALLBACK = "except ImportError:  # hpcai port: torch equivalents where apex is absent\n"

CHANGES = [
    ("megatron/optimizer/__init__.py",
     "from apex.optimizers import FusedAdam as Adam\nfrom apex.optimizers import FusedSGD as SGD\n",
     "try:\n    from apex.optimizers import FusedAdam as Adam\n    from apex.optimizers import FusedSGD as SGD\n"
     + FALLBACK + "    from megatron.torch_port import Adam, SGD\n",
     "apex's FusedAdam/FusedSGD: torch's fused AdamW and SGD where apex is absent"),
    ("megatron/optimizer/distrib_optimizer.py",
     "from apex.optimizers import FusedAdam as Adam\n",
     "try:\n    from apex.optimizers import FusedAdam as Adam\n" + FALLBACK + "    from megatron.torch_port import Adam\n",
     "the distributed optimizer checks for that same Adam class"),
    ("megatron/optimizer/optimizer.py",
     "from apex.multi_tensor_apply import multi_tensor_applier\nimport amp_C\n",
     "try:\n    from apex.multi_tensor_apply import multi_tensor_applier\n    import amp_C\n"
     + FALLBACK + "    from megatron.torch_port import multi_tensor_applier, amp_C\n",
     "apex's multi-tensor copy: torch copies where apex is absent"),
    ("megatron/optimizer/clip_grads.py",
     "from apex.multi_tensor_apply import multi_tensor_applier\nimport amp_C\n",
     "try:\n    from apex.multi_tensor_apply import multi_tensor_applier\n    import amp_C\n"
     + FALLBACK + "    from megatron.torch_port import multi_tensor_applier, amp_C\n",
     "apex's multi-tensor L2 norm and scale (gradient clipping): torch's _foreach ops where apex is absent"),
    ("megatron/core/tensor_parallel/layers.py",
     "try:\n    import fused_weight_gradient_mlp_cuda\nexcept ImportError:\n    _grad_accum_fusion_available = False\n",
     "try:\n    import fused_weight_gradient_mlp_cuda\n" + FALLBACK
     + "    from megatron.torch_port import fused_weight_gradient_mlp_cuda\n",
     "apex's weight-gradient GEMM with accumulation (on by default: --no-gradient-accumulation-fusion turns "
     "it off): a torch matmul added to main_grad where apex is absent"),
    ("megatron/model/fused_layer_norm.py",
     "except:\n    FusedLayerNormAffineFunction = None\n",
     "except:\n    from megatron.torch_port import FusedLayerNormAffineFunction  # hpcai port\n",
     "apex's fused layer norm: torch's layer norm where apex is absent"),
    ("megatron/model/fused_layer_norm.py",
     '        fused_layer_norm_cuda = importlib.import_module("fused_layer_norm_cuda")\n',
     '        try:\n            fused_layer_norm_cuda = importlib.import_module("fused_layer_norm_cuda")\n'
     '        except ImportError:  # hpcai port: only imported here; the torch layer norm needs none\n'
     '            fused_layer_norm_cuda = None\n',
     "the layer norm imported apex's CUDA extension even where it does not call it"),
    ("megatron/model/transformer.py",
     "        flash_attn_unpadded_func = None\n",
     "        from megatron.torch_port import flash_attn_unpadded_func  # hpcai port\n",
     "flash-attn (CARAML passes --use-flash-attn): torch's scaled_dot_product_attention where it is absent"),
    ("megatron/initialize.py",
     "        torch._C._jit_set_nvfuser_enabled(True)\n",
     "        try:\n            torch._C._jit_set_nvfuser_enabled(True)\n"
     "        except RuntimeError:  # hpcai port: PyTorch 2.2 and later have no nvfuser\n"
     "            pass\n",
     "PyTorch 2.2 removed nvfuser, and enabling it raises; the fused functions run unfused there"),
    ("megatron/data/Makefile",
     "LIBEXT = $(shell python3-config --extension-suffix)\n",
     "LIBEXT = $(shell python3 -c \"import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))\")\n",
     "python3-config is missing from virtual environments and from images without python3-dev; "
     "sysconfig gives the same suffix"),
]


def port_one(tree: Path, change: tuple[str, str, str, str]) -> None:
    rel, old, new, why = change
    path = tree / rel
    text = path.read_text()
    if text.count(old) != 1 or new in text:
        sys.exit(f"port_torch.py: {rel}: expected {old.strip()!r} once ({why})")
    path.write_text(text.replace(old, new))
    print(f"port_torch.py: {rel}: {why}")


def port(tree: Path) -> None:
    shutil.copyfile(Path(__file__).with_name("megatron_torch_port.py"), tree / "megatron" / "torch_port.py")
    for change in CHANGES:
        port_one(tree, change)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: port_torch.py TREE")
    port(Path(sys.argv[1]))
