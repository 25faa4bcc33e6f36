"""Image files as registry artifacts: a SIF or a SquashFS pushed and pulled by digest (ORAS).

A SIF goes up as Apptainer's own registry format (`apptainer push oras://…` writes the same media
types), so `apptainer pull oras://REG/REPO@DIGEST` takes it back byte for byte; a SquashFS (from
`hpcai sqsh`, for enroot/pyxis and Charliecloud) as an artifact of hpcai's own type, which
`hpcai stage` fetches. Either way the image's hpcai.* labels ride along as manifest annotations.

The registry client is oras-py; credentials are the ones `hpcai login` (or a runtime's own login)
wrote, read by hpcai.registry_login.credentials, and never passed on a command line. A fetched
layer is hashed while it is written and must match its digest; the manifest must match the digest
asked for, so a pull by digest cannot return anything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import tempfile
from pathlib import Path

from hpcai.errors import HpcaiError

# (config media type, layer media type) per kind of file
SIF = ("application/vnd.sylabs.sif.config.v1+json", "application/vnd.sylabs.sif.layer.v1.sif")
SQSH = ("application/vnd.hpcai.image.config.v1+json", "application/vnd.hpcai.image.squashfs.v1")
MEDIA = {"sif": SIF, "sqsh": SQSH}
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CHUNK = 64 << 20  # chunked upload above this: oras-py's single PUT reads the whole file into memory


def file_kind(image: str) -> str | None:
    """"sif" or "sqsh" for an image file hpcai pushes as an artifact; None for an engine's image."""
    if not os.path.isfile(image):
        return None
    suffix = Path(image).suffix.lower()
    return "sif" if suffix == ".sif" else "sqsh" if suffix in (".sqsh", ".squashfs", ".sqfs") else None


def ca_bundle() -> str | bool:
    """The CA bundle requests should trust: the system's (where a site's or a proxy's CA is added),
    not certifi's; REQUESTS_CA_BUNDLE / SSL_CERT_FILE win."""
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if os.environ.get(name):
            return os.environ[name]
    paths = ssl.get_default_verify_paths()
    return next((p for p in (paths.cafile, paths.openssl_cafile) if p and os.path.isfile(p)), True)


def client(registry: str):
    """An oras-py Registry for REGISTRY with the credentials stored for it (if any)."""
    import oras.provider

    from hpcai import registry_login

    scheme = registry_login.challenge(registry)  # "basic", "bearer" or "" (anonymous access)
    reg = oras.provider.Registry(hostname=registry, auth_backend="basic" if scheme == "basic" else "token",
                                 tls_verify=ca_bundle())
    found = registry_login.credentials(registry)
    if scheme == "basic" and not found:
        raise HpcaiError(f"{registry} asks for a login and none is stored for it: run `hpcai login {registry} -u USER`")
    if found:
        reg.auth.set_basic_auth(*found)
        if scheme == "basic":  # sent up front: a blob PUT answered 401 would have to be sent twice
            reg.session.headers.update(reg.auth.get_auth_header())
    return reg


def push_file(path: Path, kind: str, registry: str, repo: str, tag: str, labels: dict[str, str]) -> str:
    """Push PATH (a SIF or SquashFS) to REGISTRY/REPO:TAG; the manifest digest."""
    config_type, layer_type = MEDIA[kind]
    reg = client(registry)
    with tempfile.TemporaryDirectory(prefix="hpcai-push-") as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps({"labels": labels} if kind == "sqsh" else {}))
        try:
            res = reg.push(target=f"{registry}/{repo}:{tag}", files=[f"{path.resolve()}:{layer_type}"],
                           manifest_config=f"{config}:{config_type}", manifest_annotations=dict(labels) or None,
                           disable_path_validation=True, do_chunked=path.stat().st_size > CHUNK,
                           chunk_size=CHUNK, quiet=True)
        except Exception as exc:  # requests, oras-py's ValueError/RuntimeError: the reason, one line
            raise HpcaiError(f"push to {registry} failed: {_reason(exc)}") from None
    digest = res.headers.get("Docker-Content-Digest", "")
    if not digest.startswith("sha256:"):
        raise HpcaiError(f"push to {registry}: the registry named no manifest digest")
    return digest


def pull_file(registry: str, repo: str, digest: str, out: Path, kind: str | None = None) -> dict[str, str]:
    """Fetch the artifact REGISTRY/REPO@DIGEST (of KIND, "sif" or "sqsh", where given) into OUT
    (written whole or not at all); its annotations. The manifest and the layer are checked against
    their digests."""
    reg = client(registry)
    where = f"{registry}/{repo}@{digest}"
    try:
        res = reg.do_request(f"{reg.prefix}://{registry}/v2/{repo}/manifests/{digest}", "GET",
                             headers={"Accept": MANIFEST})
        if res.status_code != 200:
            raise HpcaiError(f"pull {where}: the registry answered {res.status_code} {res.reason}")
        if "sha256:" + hashlib.sha256(res.content).hexdigest() != digest:
            raise HpcaiError(f"pull {where}: the manifest does not match its digest")
        manifest = res.json()
        wanted = [MEDIA[kind][1]] if kind else [SIF[1], SQSH[1]]
        layers = [ly for ly in manifest.get("layers", []) if ly.get("mediaType") in wanted]
        if len(layers) != 1:
            raise HpcaiError(f"pull {where}: not a {kind or 'SIF or SquashFS'} artifact (no single image layer of "
                             f"type {' or '.join(wanted)})")
        _fetch_blob(reg, registry, repo, layers[0]["digest"], out)
    except HpcaiError:
        raise
    except Exception as exc:
        raise HpcaiError(f"pull {where} failed: {_reason(exc)}") from None
    return {str(k): str(v) for k, v in (manifest.get("annotations") or {}).items()}


def _fetch_blob(reg, registry: str, repo: str, digest: str, out: Path) -> None:
    """The blob into OUT through a private file beside it, renamed once whole and checked."""
    from hpcai import files

    hasher = hashlib.sha256()
    with files.aside_dir(out, "the image file") as part:
        with reg.do_request(f"{reg.prefix}://{registry}/v2/{repo}/blobs/{digest}", "GET", stream=True) as res:
            res.raise_for_status()
            with open(part, "wb") as fh:
                for block in res.iter_content(chunk_size=1 << 20):
                    hasher.update(block)
                    fh.write(block)
        if "sha256:" + hasher.hexdigest() != digest:
            raise HpcaiError(f"pull {registry}/{repo}: the layer does not match its digest {digest}")


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
