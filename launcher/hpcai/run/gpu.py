"""Which GPU flags a launch gets (`--nv`/`--rocm`, `docker --gpus all`/`--device /dev/kfd …`):
from the requested geometry and the image's vendor, not only the site.

A workstation (`--site local`) has no GPU kind of its own, yet `--gpus-per-node 1` there must give
the container its GPU; a Cray EX site's NVIDIA GPUs do not suit a ROCm image. The image says what
it was built for in its `hpcai.family` label (cuda, rocm, poplar, cpu: hpcai.labels.ImageFacts).
"""

from __future__ import annotations

GPU_OF_FAMILY = {"cuda": "nvidia", "rocm": "amd", "poplar": "none", "cpu": "none"}


def choose_gpu(site_gpu: str, gpus_per_node: int, family: str | None) -> tuple[str, str]:
    """(nvidia | amd | none, a note for the user or "").

    No GPUs asked for: none. Otherwise the vendor of the image's family where its label names one,
    else the site's.
    """
    if not gpus_per_node:
        return "none", ""
    image_gpu = GPU_OF_FAMILY.get(family or "")
    if image_gpu is None:
        if site_gpu == "none":
            return "none", (f"--gpus-per-node {gpus_per_node}: neither the site nor the image (no hpcai.family "
                            "label here) names the GPU vendor, so no GPU flags are passed; set `gpu` in a site file")
        return site_gpu, ""
    if image_gpu == "none":
        note = f"--gpus-per-node {gpus_per_node}: this is a {family} image, so no GPU flags are passed"
        return "none", note
    if site_gpu not in ("none", image_gpu):
        return image_gpu, (f"the image is built for {image_gpu} GPUs ({family}) but site says {site_gpu}: "
                           f"passing the {image_gpu} flags")
    return image_gpu, ""
