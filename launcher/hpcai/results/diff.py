"""`hpcai results diff A B`: what differs in the provenance of two runs, ranked by how likely it is
to move a figure (issue 30, item 3): the first step from "it got slower" to "because the stack
changed".

Each record is read into areas of named values, from what it holds: the image's component
versions (`hpcai.component.*` labels), the NCCL version its log printed (nccl-tests), the
libfabric and MPI each rank actually mapped (the sanity payload's lines), the host MPI swapped in,
the image (digest, reference, its other labels), the container environment of the plan (the
fabric and collective variables first), the geometry and nodes, the launch (site, runtime,
backend, srun's MPI type), the payload's variables and hpcai itself. A value one record does not
hold is "-". Areas are in the order above (RANKS), keys in name order within an area, so the
first line of a diff is the likeliest cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpcai.labels import COMPONENT, PREFIX

RANKS = ("components", "NCCL", "libfabric mapped", "MPI mapped", "host MPI", "image", "environment",
         "geometry", "launch", "payload", "hpcai")
# container variables that set the fabric and the collectives: listed before the rest
PERFORMANCE_ENV = ("NCCL_", "FI_", "UCX_", "OMPI_", "MPICH_", "CXI_", "RCCL_", "HSA_", "CUDA_", "OMP_")
MISSING = "-"


@dataclass(frozen=True)
class Difference:
    area: str
    key: str
    a: str
    b: str

    @property
    def rank(self) -> int:
        return RANKS.index(self.area) + 1


def provenance(rec) -> dict[str, dict[str, str]]:
    """The record's provenance as {area: {key: value}} (text values, the areas of RANKS)."""
    plan, details = rec.plan, (rec.result.details if rec.result else {}) or {}
    labels = {str(k): str(v) for k, v in (plan.get("image_labels") or {}).items()}
    env = {str(k): str(v) for k, v in (plan.get("env") or {}).items()}
    ranks = details.get("ranks") if isinstance(details.get("ranks"), dict) else {}
    geometry = plan.get("geometry") if isinstance(plan.get("geometry"), dict) else {}
    return {
        "components": {k[len(COMPONENT):]: v for k, v in labels.items() if k.startswith(COMPONENT)},
        "NCCL": {"version": str(details["nccl_version"])} if details.get("nccl_version") else {},
        "libfabric mapped": _per_rank(ranks, ("libfabric", "fabric_version", "provider")),
        "MPI mapped": _per_rank(ranks, ("mpi", "mpi_version")),
        "host MPI": {k: v for k, v in env.items() if k.startswith("HPCAI_HOST_MPI")},
        "image": {"digest": str(plan.get("image_digest") or MISSING), "image": str(plan.get("image") or MISSING),
                  **{k: v for k, v in labels.items() if k.startswith(PREFIX) and not k.startswith(COMPONENT)}},
        "environment": {k: v for k, v in env.items() if not k.startswith("HPCAI_HOST_MPI")},
        "geometry": {"nodes": str(plan.get("nodes", MISSING)), "ranks per node": str(plan.get("ntasks_per_node", MISSING)),
                     "gpus per node": str(plan.get("gpus_per_node", MISSING)),
                     "cpus per task": str(plan.get("cpus_per_task", MISSING)),
                     "node list": str(geometry.get("nodelist") or ",".join(details.get("hosts") or []) or MISSING)},
        "launch": {"site": str(plan.get("site", MISSING)), "cluster": str(plan.get("cluster") or MISSING),
                   "partition": str(plan.get("partition") or MISSING),
                   "runtime": str(plan.get("runtime", MISSING)), "backend": str(plan.get("backend", MISSING)),
                   "srun --mpi": str(plan.get("mpi") or MISSING)},
        "payload": {"payload": rec.payload, **{f"var {k}": str(v) for k, v in (plan.get("payload_vars") or {}).items()},
                    "profiles": ",".join(plan.get("profiles") or []) or MISSING},
        "hpcai": {"version": str(plan.get("hpcai_version", MISSING)), "git": str(plan.get("git_sha") or MISSING)},
    }


def _per_rank(ranks: dict[str, Any], fields: tuple[str, ...]) -> dict[str, str]:
    """What the ranks mapped, as one value per field: the distinct values, with the ranks that
    differ from the first named (a node with another libfabric is the finding)."""
    found: dict[str, str] = {}
    for field in fields:
        values = {str(r): str(v.get(field)) for r, v in ranks.items() if isinstance(v, dict) and v.get(field)}
        distinct = sorted(set(values.values()))
        if distinct:
            found[field] = distinct[0] if len(distinct) == 1 else " | ".join(
                f"{value} (ranks {','.join(sorted((r for r, v in values.items() if v == value), key=int))})"
                for value in distinct)
    return found


def _env_order(key: str) -> tuple[int, str]:
    return (0 if key.startswith(PERFORMANCE_ENV) else 1, key)


def diff(a, b) -> list[Difference]:
    """The differences between records A and B, likeliest cause first."""
    pa, pb = provenance(a), provenance(b)
    found = []
    for area in RANKS:
        keys = set(pa[area]) | set(pb[area])
        for key in sorted(keys, key=_env_order if area == "environment" else str):
            va, vb = pa[area].get(key, MISSING), pb[area].get(key, MISSING)
            if va != vb:
                found.append(Difference(area, key, va, vb))
    return found


def unrecorded(a, b) -> list[str]:
    """Areas neither record holds, said so a clean diff is not read as "the same there"."""
    pa, pb = provenance(a), provenance(b)
    hints = {"libfabric mapped": "run the sanity payload to record them",
             "MPI mapped": "run the sanity payload to record them",
             "NCCL": "nccl-tests logs print it"}
    return [f"{area}: not recorded in either run ({hints[area]})" for area in hints if not pa[area] and not pb[area]]
