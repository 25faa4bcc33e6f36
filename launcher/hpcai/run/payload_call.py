"""The payload's part of a launch: which payload (or raw command) runs in the container, its
variables resolved as the image's runner will resolve them, and what its manifest asks of the
launch (an MPI world, the profile's scheduler options and sizes).
"""

from __future__ import annotations

from typing import Any

from hpcai.errors import UsageError, unknown
from hpcai.run.model import Backend, Geometry, LaunchOptions, PayloadCall
from hpcai.run.site import ENV_NAME, SiteProfile


def parse_vars(args: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if not sep or not ENV_NAME.fullmatch(name):
            raise UsageError(f"payload argument {arg!r}: expected var=value (or use --cmd for a raw command)")
        out[name] = value
    return out


def payload_call(opts: LaunchOptions, valid: list[str] | None, family: str | None = None,
                 site: SiteProfile | None = None) -> PayloadCall:
    """What runs in the container; the variables resolved as the image's runner will resolve them
    (defaults, the family's profile, --profile, overrides). The manifest is read once, here."""
    if opts.cmd:
        if opts.payload or opts.payload_args:
            raise UsageError("give either a payload name or --cmd with a raw command, not both")
        if opts.profiles:
            raise UsageError("--profile sets a payload's variables; a --cmd command has none")
        return PayloadCall("cmd", {}, list(opts.cmd), {}, False)
    from hpcai import payload_rules, payloads
    from hpcai.paths import RUNNER

    packaged = payloads.available_payloads()
    known = valid if valid is not None else packaged
    if not opts.payload:
        raise UsageError(f"no payload given; valid: {', '.join(known)}")
    if opts.payload not in known:
        raise unknown("payload", opts.payload, known)
    overrides = parse_vars(opts.payload_args)
    values: dict[str, str] = {}
    needs_mpi = False
    srun_args: tuple[str, ...] = ()
    launch: dict[str, Any] = {}
    if opts.payload in packaged:  # unknown profiles and variables fail here
        manifest = payloads.load_payload(opts.payload)
        known_profiles = sorted(manifest.raw.get("profiles", {}))
        for name in opts.profiles:
            if name not in known_profiles:
                raise UsageError(f"payload {opts.payload} has no profile {name!r}; its profiles: "
                                 f"{', '.join(known_profiles) or 'none'}")
        values = manifest.validate_vars(overrides, family=family, profiles=opts.profiles)
        needs_mpi = manifest.needs_mpi
        srun_args = manifest.srun_args(opts.profiles)
        # Without a site (`hpcai export k8s`) a site fact is empty: rows that select on it pick nothing.
        facts = {name: getattr(site, name) if site else "" for name in payload_rules.SITE_FACTS}
        launch = manifest.launch_defaults(opts.profiles, values, facts)
    profile_args = [arg for name in opts.profiles for arg in ("--profile", name)]
    command = [RUNNER, *profile_args, opts.payload, *(f"{k}={v}" for k, v in overrides.items())]
    return PayloadCall(opts.payload, overrides, command, values, needs_mpi, srun_args, launch)


def check_mpi_launch(call: PayloadCall, backend: Backend, geom: Geometry) -> None:
    """A payload that needs one MPI world cannot run under the local backend with several ranks:
    its N containers would each be an MPI world of one (and report "ranks 1")."""
    if call.needs_mpi and backend.per_rank and geom.ntasks > 1 and not geom.per_gpu:
        raise UsageError(f"payload {call.label} needs an MPI process manager, which the local backend is not "
                         f"({geom.ntasks} ranks would be {geom.ntasks} MPI worlds of 1): launch it with "
                         "srun --mpi=pmix (--backend srun) or mpirun (--backend mpiexec)")
