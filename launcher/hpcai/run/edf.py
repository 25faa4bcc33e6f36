"""CSCS Container Engine environment definition files (EDF): the schema, the values, the TOML.

An EDF is a TOML file that `srun --environment=FILE` turns into a container (CSCS docs,
software/container-engine/edf.md and resource-hook.md, cscs-docs 2026-08). `SCHEMA` holds every
documented top-level key with its TOML type (a hpcai.schema Table, as for every TOML file hpcai
reads or writes); `ANNOTATIONS` the hook annotations hpcai writes or
accepts, with their documented values. `build` makes the document for one container, `check`
tests any document against the schema (tests parse written files back with tomllib and call it),
and `render` writes TOML with tomli-w: every value passes `_value` first, the one place that
refuses what CE would read differently (a control character; `$`, which CE expands as ${VAR}).
A secret (hpcai.redact's one rule, by name or by value) is never written: `build` leaves it out of
[env] and the container inherits it from the environment `srun` runs in, as `launch --runtime ce`
passes it; `render` names it in a comment, and `write` makes a private (0600) file without
following a link planted at its path.

Format: image = "REF or /path.sqsh"
        mounts = ["/src:/dst", "/src:/dst:ro"]
        entrypoint = false
        [env]
        NAME = "value"
        [annotations.com.hooks.aws_ofi_nccl]
        enabled = "true"
        variant = "cuda-dl"
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hpcai.errors import UsageError, has_control
from hpcai.schema import Key, Table

REQUIRED = ("image",)
MOUNT_FLAGS = ("ro", "private")  # the flags the reference names ("ro", "private", etc.)
TRUE_FALSE = ("true", "false")   # annotation values are strings, not TOML booleans
# annotation -> documented values (() = any one-line string). Verified in resource-hook.md,
# except where VERIFIED says otherwise.
ANNOTATIONS: dict[str, tuple[str, ...]] = {
    "com.hooks.cxi.enabled": TRUE_FALSE,
    "com.hooks.aws_ofi_nccl.enabled": TRUE_FALSE,
    "com.hooks.aws_ofi_nccl.variant": ("cuda-dl", "cuda12", "cuda13", "cuda11", "rocm5", "rocm6"),
    "com.hooks.netstack.source": ("host", "artifact"),
    "com.hooks.netstack.version": (),
    "com.hooks.netstack.name": (),
    "com.hooks.nvidia_cuda_mps.enabled": TRUE_FALSE,
    "com.hooks.ssh.enabled": TRUE_FALSE,
    "com.hooks.ssh.authorize_ssh_key": (),
    "com.hooks.ssh.port": (),
}
# Not confirmed on a CE installation from here (no Alps access): the docs name `cuda11` in an
# older revision only, and say variants "may vary depending on vClusters".
UNVERIFIED = ("com.hooks.aws_ofi_nccl.variant=cuda11",)
NCCL_VARIANTS = {"nvidia": "cuda-dl", "amd": "rocm6"}  # CSCS recommends cuda-dl (dynamic CUDA)


def _base_environment(where: str, value: Any) -> Any:
    if isinstance(value, str) or _is_strings(value):
        return value
    raise UsageError(f"{where}: base_environment must be a string or a list of strings, got {value!r}")


def _strings(name: str):
    """[env] and [annotations]: tables whose values (dotted names flattened) are strings."""
    def parse(where: str, value: Any) -> Any:
        if not isinstance(value, dict):
            raise UsageError(f"{where}: {name} must be a table, got {value!r}")
        wrong = next(((k, v) for k, v in flatten(value).items() if not isinstance(v, str)), None)
        if wrong:
            raise UsageError(f"{where}: {name}.{wrong[0]} must be a string, got {wrong[1]!r}")
        return value
    return parse


def _annotations_json() -> dict[str, Any]:
    """ANNOTATIONS as nested JSON Schema objects: [annotations.com.hooks.cxi] enabled = "true"."""
    root: dict[str, Any] = {"type": "object", "properties": {}}
    for name, values in ANNOTATIONS.items():
        node = root
        *parents, leaf = name.split(".")
        for part in parents:
            node = node["properties"].setdefault(part, {"type": "object", "properties": {}})
        node["properties"][leaf] = {"type": "string", **({"enum": list(values)} if values else {})}
    return root


# The top-level keys, verified against the CSCS EDF reference, declared as every TOML file of
# hpcai is (hpcai.schema). CE reads more than hpcai writes; `check` adds what a key's type cannot
# say (the mounts' form, the annotations hpcai knows).
SCHEMA = Table([
    Key("base_environment", None, parse=_base_environment,  # an EDF name or path, or a list of them
        json={"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
    Key("image", ""), Key("workdir", ""),
    Key("entrypoint", True),  # CE's default: run the image's ENTRYPOINT
    Key("writable", True),
    Key("mounts", ()),        # "SOURCE:DESTINATION[:FLAGS]", flags joined by "+"
    Key("env", None, parse=_strings("env"), json={"type": "object", "additionalProperties": {"type": "string"}}),
    Key("annotations", None, parse=_strings("annotations"), json=_annotations_json()),
], "EDF")


@dataclass(frozen=True)
class EdfSpec:
    """One container as an EDF. hooks: CE's aws_ofi_nccl hook (GPU) or cxi hook (no GPU) brings
    the host fabric; False switches the cxi hook off so that hpcai's own swap (binds to /host/lib,
    the entrypoint's host-fabric hook) is the only one."""

    image: str
    mounts: tuple[tuple[str, str], ...] = ()  # (SRC, DST[:ro|rw]) as hpcai's binds hold them
    env: tuple[tuple[str, str], ...] = ()
    workdir: str = ""
    entrypoint: bool = False  # hpcai names hpcai-entrypoint in the command itself
    gpu: str = "none"
    hooks: bool = True
    nccl_variant: str = ""  # "" = NCCL_VARIANTS[gpu]
    writable: bool | None = None  # None: CE's default (writable)


def _value(what: str, value: str) -> str:
    """The one check for every string written into an EDF: one line, and no `$`, which CE
    expands (${VAR}; "$$" escapes it only where expansion is enabled, a technical preview)."""
    if has_control(value):
        raise UsageError(f"EDF {what} {value!r} holds a control character (a line break, tab or escape)")
    if "$" in value:
        raise UsageError(f"EDF {what} {value!r} holds '$', which the Container Engine expands as ${{VAR}}; "
                         "give the value itself")
    return value


def mount(src: str, dst: str) -> str:
    """hpcai's (SRC, DST[:ro|rw]) as CE's SOURCE:DESTINATION[:FLAGS] (rw is CE's default)."""
    path, _, option = dst.partition(":")
    flags = "" if option in ("", "rw") else option
    if flags and flags not in MOUNT_FLAGS:
        raise UsageError(f"EDF mount {src}:{dst}: option {option!r} is not one of: rw, {', '.join(MOUNT_FLAGS)}")
    return f"{src}:{path}" + (f":{flags}" if flags else "")


def annotations(spec: EdfSpec) -> dict[str, str]:
    """The hook annotations: aws_ofi_nccl (it implies cxi) for a GPU image, cxi alone without
    GPUs; with hooks off, cxi explicitly false (CE enables it by default on most vClusters)."""
    if not spec.hooks:
        return {"com.hooks.cxi.enabled": "false"}
    if spec.gpu in NCCL_VARIANTS:
        return {"com.hooks.aws_ofi_nccl.enabled": "true",
                "com.hooks.aws_ofi_nccl.variant": spec.nccl_variant or NCCL_VARIANTS[spec.gpu]}
    return {"com.hooks.cxi.enabled": "true"}


def build(spec: EdfSpec) -> dict[str, Any]:
    """The EDF document (flat annotation names; `render` nests them as TOML tables)."""
    if not spec.image.strip():
        raise UsageError("EDF image is empty: give a registry reference ([USER@][REGISTRY#]IMAGE[:TAG]) "
                         "or a SquashFS file")
    doc: dict[str, Any] = {"image": _value("image", spec.image)}
    if spec.workdir:
        if not spec.workdir.startswith("/"):
            raise UsageError(f"EDF workdir {spec.workdir!r}: expected an absolute path in the container")
        doc["workdir"] = _value("workdir", spec.workdir)
    doc["entrypoint"] = spec.entrypoint
    if spec.writable is not None:
        doc["writable"] = spec.writable
    if spec.mounts:
        doc["mounts"] = [_value("mount", mount(src, dst)) for src, dst in spec.mounts]
    env, _ = split_secrets(spec.env)
    if env:
        doc["env"] = {name: _value(f"env {name}", value) for name, value in env}
    doc["annotations"] = {k: _value(f"annotation {k}", v) for k, v in annotations(spec).items()}
    problems = check(doc)
    if problems:
        raise UsageError(f"EDF: {problems[0]}")
    return doc


def split_secrets(env: Iterable[tuple[str, str]]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(the pairs an EDF may hold, the names of the secrets it must not): the rule that keeps them
    out of every launch (hpcai.redact.secret_items), so `hpcai edf` and `launch --runtime ce` agree.
    A left-out secret reaches the container by inheritance: CE passes srun's environment in."""
    from hpcai.redact import is_secret_pair

    pairs = tuple(env)
    secret = tuple(name for name, value in pairs if is_secret_pair(name, value))
    return tuple((n, v) for n, v in pairs if n not in secret), secret


def _nest(flat: dict[str, str]) -> dict[str, Any]:
    """{"com.hooks.cxi.enabled": "true"} -> {"com": {"hooks": {"cxi": {"enabled": "true"}}}}."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested TOML tables back to dotted names (how CE names annotations)."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def render(doc: dict[str, Any], inherited: Iterable[str] = ()) -> str:
    """TOML text of a `build` document: the annotations as [annotations.com.hooks.X] tables, the
    second of the two forms CE documents as equivalent. `inherited`: the secrets' names, written
    in a comment (never their values) so that a reader of the file knows what srun must pass in."""
    import tomli_w

    out = dict(doc)
    if "annotations" in out:
        out["annotations"] = _nest(out["annotations"])
    head = "# Container Engine environment definition file, written by hpcai\n"
    names = [_value("env name", name) for name in inherited]
    if names:
        # Format: # secrets, not written here: export them where srun runs (the container inherits them): A, B
        head += ("# secrets, not written here: export them where srun runs (the container inherits them): "
                 f"{', '.join(names)}\n")
    return head + tomli_w.dumps(out)


def _is_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def check(doc: dict[str, Any]) -> list[str]:
    """What in a parsed EDF (tomllib's dict, or `build`'s) CE would refuse or read otherwise, every
    problem ([] when valid): each key against SCHEMA, then the mounts' form and the annotations."""
    problems = [f"missing {k!r}" for k in REQUIRED if not doc.get(k)]
    for key, value in doc.items():
        try:
            SCHEMA.read("EDF", {key: value})
        except UsageError as exc:
            problems.append(str(exc).removeprefix("EDF: "))  # one list of one document's problems
            continue
        if key == "annotations":
            problems += _check_annotations(flatten(value))
        elif key == "mounts":
            problems += [p for item in value for p in _check_mount(item)]
    return problems


def _check_annotations(flat: dict[str, Any]) -> list[str]:
    out = []
    for name, value in flat.items():
        if name not in ANNOTATIONS:
            out.append(f"annotation {name!r} is not one hpcai knows; known: {', '.join(ANNOTATIONS)}")
        elif ANNOTATIONS[name] and value not in ANNOTATIONS[name]:
            out.append(f"annotation {name} = {value!r}: expected one of {', '.join(ANNOTATIONS[name])}")
    return out


def _check_mount(item: str) -> list[str]:
    parts = item.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]) or not parts[1].startswith("/"):
        return [f"mount {item!r}: expected SOURCE:DESTINATION[:FLAGS] with an absolute destination"]
    flags = parts[2].split("+") if len(parts) == 3 else []
    bad = [f for f in flags if f not in MOUNT_FLAGS]
    return [f"mount {item!r}: flag(s) {', '.join(bad)} not among {', '.join(MOUNT_FLAGS)}"] if bad else []


def hooks_on(site: Any, runtime: Any) -> bool:
    """The runtime's own hooks bring the host fabric: a runtime that has them (ce), on a site
    that does not switch them off (fabric_hooks = false)."""
    return runtime.fabric_hooks and site.fabric_hooks


def without_swap(site: Any, binds: list[tuple[str, str]], env: dict[str, str],
                 keep: Iterable[str] = ()) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """hpcai's swap taken out where CE's hooks do it: no host libfabric bind, and none of the
    fabric profile's NCCL_* and FI_* variables, the site's deviations included (CE's aws_ofi_nccl
    hook sets them; CSCS: do not duplicate them). Names in `keep` (the user's --env) stay."""
    from hpcai.run.slingshot import profile_env

    fabric = {k for gpu in ("nvidia", "amd") for k in profile_env(site.fabric_profile, gpu)
              if k.startswith(("NCCL_", "FI_"))}
    binds = [(s, d) for s, d in binds if not (site.libfabric and d.split(":")[0] == site.libfabric_dest)]
    return binds, {k: v for k, v in env.items() if k not in fabric or k in set(keep)}


def write(path: Any, text: str) -> None:
    """Write a new EDF, private (0600: its mounts and variables are the user's business), with
    hpcai.files.write_atomic: a symbolic link at PATH is refused, never followed (issue 25: a link
    planted there would send the file to its target), and a failed write leaves nothing half-written."""
    from hpcai import files

    files.write_atomic(path, text, files.PRIVATE_FILE, what="-o")
