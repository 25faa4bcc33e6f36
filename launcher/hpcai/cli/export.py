"""CLI command: `hpcai export k8s PAYLOAD --image REF` writes a Kubeflow MPIJob (v2beta1) that
runs the payload on Kubernetes through the mpi-operator (hpcai.k8s). The image must be an -ssh
image (`hpcai build FLAVOR --ssh 1`): its workers run an ssh server. When the local engine has
the image, its labels are checked (ssh server, MPI, payloads, GPU family); otherwise --mpi and
--gpu-vendor say what it is, and a note says nothing was checked."""

from __future__ import annotations

from typing import Optional

import typer


def local_labels(image: str) -> dict[str, str]:
    """IMAGE's labels from the first local engine that has it; {} when none has it (or none runs)."""
    import shutil

    from hpcai.errors import HpcaiError
    from hpcai.image.engine import _inspect

    for binary in ("docker", "podman"):
        if not shutil.which(binary):
            continue
        try:
            attrs = _inspect(binary, image)
        except HpcaiError:
            continue
        if attrs is not None:
            return dict((attrs.get("Config") or {}).get("Labels") or {})
    return {}


def register(app: typer.Typer) -> None:
    export = typer.Typer(help="Write a payload's job for another scheduler (k8s: a Kubeflow MPIJob).",
                         no_args_is_help=True)
    app.add_typer(export, name="export", rich_help_panel="Launch")

    @export.command("k8s")
    def k8s_command(
        payload: str = typer.Argument(..., help="Payload baked into the image (`hpcai payloads list`)."),
        payload_args: Optional[list[str]] = typer.Argument(None, help="The payload's variables, VAR=VALUE."),
        image: str = typer.Option(..., "--image", "-i", help="Image reference the cluster pulls: an -ssh image "
                                  "(built with --ssh 1)."),
        nodes: int = typer.Option(1, "--nodes", "-N", min=1, help="Worker pods (one per node)."),
        ranks_per_node: Optional[int] = typer.Option(None, "--ranks-per-node", "--ntasks-per-node", min=1,
                                                     help="Ranks per worker (slotsPerWorker); default: its GPUs, else 1."),
        gpus_per_node: int = typer.Option(0, "--gpus-per-node", min=0, help="GPUs each worker pod asks for."),
        gpu_vendor: Optional[str] = typer.Option(None, "--gpu-vendor", help="nvidia | amd (nvidia.com/gpu or "
                                                 "amd.com/gpu); default: the image's family, else nvidia."),
        mpi: Optional[str] = typer.Option(None, "--mpi", help="ompi | mpich: the image's MPI (read from its "
                                          "labels when the local engine has it; default ompi)."),
        profiles: list[str] = typer.Option([], "--profile", help="Payload profile (repeatable)."),
        name: str = typer.Option("", "--name", help="The MPIJob's name (default hpcai-PAYLOAD)."),
        namespace: str = typer.Option("", "--namespace", help="Kubernetes namespace (default: kubectl's)."),
        time: str = typer.Option("", "--time", help="Time limit, as Slurm's --time (activeDeadlineSeconds)."),
        output: str = typer.Option("", "--output", "-o", help="Write to FILE (default: stdout)."),
    ) -> None:
        """Write a Kubeflow MPIJob (kubeflow.org/v2beta1) that runs PAYLOAD from IMAGE."""
        from hpcai import k8s
        from hpcai import labels as label
        from hpcai.errors import UsageError, unknown
        from hpcai.output import emit, plain, say
        from hpcai.paths import ENTRYPOINT
        from hpcai.run.model import LaunchOptions
        from hpcai.run.payload_call import payload_call
        from hpcai.run.timelimits import seconds

        if gpu_vendor is not None and gpu_vendor not in k8s.GPU_RESOURCES:
            raise unknown("GPU vendor", gpu_vendor, k8s.GPU_RESOURCES)
        from hpcai.errors import shaped
        from hpcai.image.values import IMAGE_REF, REF_SHAPE

        shaped("--image", image, IMAGE_REF, REF_SHAPE)  # it is written into the job
        found = local_labels(image)
        chosen_mpi, vendor = k8s.image_facts(found, image, mpi, gpu_vendor)
        baked = [p for p in found.get(label.PAYLOADS, "").split(",") if p] if found else None
        call = payload_call(LaunchOptions(image=image, payload=payload, payload_args=tuple(payload_args or ()),
                                          profiles=tuple(profiles)), baked, found.get(label.FAMILY) or None)
        job_name = name or k8s.default_name(payload)
        k8s.check_name(job_name, nodes)
        if namespace and not k8s.DNS_LABEL.fullmatch(namespace):
            raise UsageError(f"--namespace {namespace!r}: not a Kubernetes namespace name (a DNS label)")

        req = k8s.MpiJobRequest(
            name=job_name, image=image, rank_command=(ENTRYPOINT, *call.command), payload=payload,
            workers=nodes, slots=ranks_per_node or gpus_per_node or 1, gpus=gpus_per_node, vendor=vendor,
            mpi=chosen_mpi, namespace=namespace, deadline=seconds(time) if time else 0)
        text = k8s.to_yaml(k8s.mpijob(req))
        if not found:
            say(f"note: image {image} is not in a local engine: its labels were not checked (an ssh server, "
                f"MPI {chosen_mpi}, payload {payload})")
        if not output:
            emit(text)
            return
        from hpcai.files import write_atomic

        write_atomic(output, text, mode=None, what="--output")
        say(f"wrote {plain(output, lines=False)}: kubectl apply -f {plain(output, lines=False)}")
