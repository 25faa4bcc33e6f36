"""CLI command: `hpcai export k8s PAYLOAD --image REF` writes a Kubeflow MPIJob (v2beta1) that
runs the payload on Kubernetes through the mpi-operator (hpcai.k8s). The image must be an -ssh
image (`hpcai build FLAVOR --ssh 1`): its workers run an ssh server. When the local engine has
the image, its labels are checked (ssh server, MPI, payloads, GPU family); otherwise --mpi and
--gpu-vendor say what it is, and a note says nothing was checked."""

from __future__ import annotations

from typing import Optional

import typer


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
        nodes: Optional[int] = typer.Option(None, "--nodes", "-N", help="Worker pods, one per node (default: "
                                            "the payload profile's, else 1)."),
        ranks_per_node: Optional[int] = typer.Option(None, "--ranks-per-node", "--ntasks-per-node",
                                                     help="Ranks per worker (slotsPerWorker); default: its GPUs, else 1."),
        gpus_per_node: int = typer.Option(0, "--gpus-per-node", help="GPUs each worker pod asks for."),
        gpu_vendor: Optional[str] = typer.Option(None, "--gpu-vendor", help="nvidia | amd (nvidia.com/gpu or "
                                                 "amd.com/gpu); default: the image's family, else nvidia."),
        mpi: Optional[str] = typer.Option(None, "--mpi", help="ompi | mpich: the image's MPI (read from its "
                                          "labels when the local engine has it; default ompi)."),
        profiles: list[str] = typer.Option([], "--profile", help="Payload profile (repeatable)."),
        name: str = typer.Option("", "--name", help="The MPIJob's name (default hpcai-PAYLOAD)."),
        namespace: str = typer.Option("", "--namespace", help="Kubernetes namespace (default: kubectl's)."),
        time: str = typer.Option("", "--time", help="Time limit, as Slurm's --time (activeDeadlineSeconds; "
                                 "default: the payload profile's, else none)."),
        output: str = typer.Option("", "--output", "-o", help="Write to FILE (default: stdout)."),
    ) -> None:
        """Write a Kubeflow MPIJob (kubeflow.org/v2beta1) that runs PAYLOAD from IMAGE."""
        from hpcai import k8s
        from hpcai import labels as label
        from hpcai.errors import unknown
        from hpcai.image.engine import local_labels
        from hpcai.output import emit, plain, say
        from hpcai.paths import ENTRYPOINT
        from hpcai.run import scheduler
        from hpcai.run.model import LaunchOptions
        from hpcai.run.payload_call import payload_call

        if gpu_vendor is not None and gpu_vendor not in k8s.GPU_RESOURCES:
            raise unknown("GPU vendor", gpu_vendor, k8s.GPU_RESOURCES)
        opts = LaunchOptions(image=image, payload=payload, payload_args=tuple(payload_args or ()),
                             profiles=tuple(profiles), nodes=nodes, ntasks_per_node=ranks_per_node,
                             gpus_per_node=gpus_per_node, time=time)
        scheduler.check_scheduler_values(opts)  # --image and --time as launch reads them
        found = local_labels(image)
        chosen_mpi, vendor = k8s.image_facts(found, image, mpi, gpu_vendor)
        baked = [p for p in found.get(label.PAYLOADS, "").split(",") if p] if found else None
        call = payload_call(opts, baked, found.get(label.FAMILY) or None)
        opts = scheduler.with_profile(opts, call.launch)  # the profile's -N and --time, as launch takes them
        for flag, value in (("--nodes", opts.nodes), ("--ntasks-per-node", ranks_per_node),
                            ("--gpus-per-node", gpus_per_node)):
            scheduler.check_size(flag, value)
        workers = opts.nodes or 1
        req = k8s.MpiJobRequest(
            name=name or k8s.default_name(payload), image=image, rank_command=(ENTRYPOINT, *call.command),
            payload=payload, workers=workers, slots=ranks_per_node or gpus_per_node or 1, gpus=gpus_per_node,
            vendor=vendor, mpi=chosen_mpi, namespace=namespace, deadline=k8s.deadline(opts.time))
        k8s.check_request(req)
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
