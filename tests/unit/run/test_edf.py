"""CSCS Container Engine EDF files: built from a spec, written with tomli-w, read back with
tomllib and checked against hpcai.run.edf.SCHEMA (written from CSCS's EDF reference and
resource-hook pages); `hpcai edf` on stdout, into a file, and its bad input (one line, exit 2)."""

from __future__ import annotations

import sys

import pytest
from hpcai.errors import UsageError
from hpcai.run import edf

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def parsed(spec: edf.EdfSpec) -> dict:
    text = edf.render(edf.build(spec))
    doc = tomllib.loads(text)
    assert edf.check(doc) == [], text
    return doc


def test_gpu_image_gets_the_aws_ofi_nccl_hook_as_nested_tables():
    spec = edf.EdfSpec(image="nvcr.io#nvidia/pytorch:25.11-py3", mounts=(("/scratch", "/scratch"), ("/ds", "/data:ro")),
                       env=(("NCCL_DEBUG", "INFO"), ("A", "x y,z")), gpu="nvidia")
    text = edf.render(edf.build(spec))
    assert "[annotations.com.hooks.aws_ofi_nccl]\nenabled = \"true\"\nvariant = \"cuda-dl\"\n" in text
    assert tomllib.loads(text) == {
        "image": "nvcr.io#nvidia/pytorch:25.11-py3", "entrypoint": False,
        "mounts": ["/scratch:/scratch", "/ds:/data:ro"], "env": {"NCCL_DEBUG": "INFO", "A": "x y,z"},
        "annotations": {"com": {"hooks": {"aws_ofi_nccl": {"enabled": "true", "variant": "cuda-dl"}}}}}
    assert edf.flatten(tomllib.loads(text)["annotations"]) == {"com.hooks.aws_ofi_nccl.enabled": "true",
                                                              "com.hooks.aws_ofi_nccl.variant": "cuda-dl"}


@pytest.mark.parametrize("gpu,hooks,want", [
    ("amd", True, {"com.hooks.aws_ofi_nccl.enabled": "true", "com.hooks.aws_ofi_nccl.variant": "rocm6"}),
    ("none", True, {"com.hooks.cxi.enabled": "true"}),
    ("nvidia", False, {"com.hooks.cxi.enabled": "false"}),  # hpcai's own swap only
])
def test_annotations_per_gpu_and_hooks(gpu, hooks, want):
    doc = parsed(edf.EdfSpec(image="/store/img.sqsh", gpu=gpu, hooks=hooks, workdir="/w"))
    assert edf.flatten(doc["annotations"]) == want and doc["workdir"] == "/w"


def test_rw_is_the_default_and_not_written():
    assert edf.mount("/a", "/b:rw") == "/a:/b" and edf.mount("/a", "/b") == "/a:/b"


@pytest.mark.parametrize("spec,message", [
    (edf.EdfSpec(image=""), "EDF image is empty"),
    (edf.EdfSpec(image="ubuntu:${TAG}"), "holds '$', which the Container Engine expands"),
    (edf.EdfSpec(image="img", env=(("A", "x\ny"),)), "EDF env A 'x\\ny' holds a control character"),
    (edf.EdfSpec(image="img", env=(("P", "$PATH:/x"),)), "EDF env P '$PATH:/x' holds '$'"),
    (edf.EdfSpec(image="img", workdir="rel"), "expected an absolute path"),
    (edf.EdfSpec(image="img", gpu="nvidia", nccl_variant="cuda9"), "variant = 'cuda9': expected one of"),
])
def test_bad_values_are_one_line(spec, message):
    with pytest.raises(UsageError) as err:
        edf.build(spec)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_schema_refuses_what_ce_would_not_read():
    doc = {"image": "x", "mounts": ["/a", "/a:/b:rw", "/a:/b:ro+private"], "entrypoint": "no", "envv": {},
           "env": {"A": 1}, "annotations": {"com": {"hooks": {"cxi": {"enabled": "yes"}, "mine": {"x": "1"}}}}}
    problems = edf.check(doc)
    assert "unknown key(s) envv; valid: annotations, base_environment, entrypoint, env, image, mounts, workdir, " \
           "writable" in problems
    assert "key 'entrypoint' must be true or false, got 'no'" in problems and "env.A must be a string, got 1" in problems
    assert "annotation com.hooks.cxi.enabled = 'yes': expected one of true, false" in problems
    assert any(p.startswith("annotation 'com.hooks.mine.x' is not one hpcai knows") for p in problems)
    assert "mount '/a': expected SOURCE:DESTINATION[:FLAGS] with an absolute destination" in problems
    assert "mount '/a:/b:rw': flag(s) rw not among ro, private" in problems
    assert not any("ro+private" in p for p in problems)  # flags joined by "+" (CE reference)
    assert edf.check({}) == ["missing 'image'"]


def test_cli_stdout_file_and_errors(hpcai, tmp_path):
    res = hpcai("edf", "nvcr.io#nvidia/pytorch:25.11-py3", "--env", "A=1", "--bind", "/data:/data:ro")
    assert res.exit_code == 0, res.stderr
    doc = tomllib.loads(res.stdout)
    assert edf.check(doc) == []
    # cscs-alps with CE's hooks: no /host/lib, none of the Slingshot NCCL_/FI_ variables
    assert doc["mounts"] == ["/usr:/host/usr", "/var/spool/slurmd:/var/spool/slurmd", "/data:/data:ro"]
    assert doc["env"] == {"MPICH_GPU_SUPPORT_ENABLED": "0", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                          "PMIX_MCA_psec": "^munge", "A": "1"}
    out = tmp_path / "env.toml"
    res = hpcai("edf", "img", "--no-hooks", "-o", str(out))
    assert res.exit_code == 0
    doc = tomllib.loads(out.read_text())
    assert doc["env"]["FI_CXI_DEFAULT_TX_SIZE"] == "16384" and doc["env"]["FI_CXI_RX_MATCH_MODE"] == "software"
    assert edf.flatten(doc["annotations"]) == {"com.hooks.cxi.enabled": "false"}
    for args, line in [(["img$x"], "error: EDF image 'img$x' holds '$'"),
                       (["img", "--nccl-variant", "cuda9"], "error: --nccl-variant 'cuda9': expected one of"),
                       (["img", "--site", "mars"], "error: unknown site 'mars'"),
                       (["img", "--bind", "rel:/x"], "error: --bind 'rel:/x'"),
                       (["img", "-o", str(tmp_path / "no" / "dir.toml")], "cannot be written")]:
        res = hpcai("edf", *args)
        assert res.exit_code == 2 and line in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env.toml"]  # nothing half-written


def test_the_schema_as_json_schema_holds_what_hpcai_writes():
    """SCHEMA written as JSON Schema (hpcai.schema, checked with jsonschema): the EDFs `build`
    makes pass it, with their annotations; a document whose keys or types `check` refuses does not."""
    from jsonschema import Draft202012Validator

    schema = edf.SCHEMA.json_schema("CSCS Container Engine EDF")
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    for gpu, hooks in (("nvidia", True), ("amd", True), ("none", True), ("nvidia", False)):
        doc = tomllib.loads(edf.render(edf.build(edf.EdfSpec(image="x.sqsh", mounts=(("/a", "/b:ro"),),
                                                             env=(("A", "1"),), gpu=gpu, hooks=hooks))))
        assert edf.check(doc) == [] and list(validator.iter_errors(doc)) == [], (gpu, hooks)
    for bad in ({"image": "x", "envv": {}}, {"image": "x", "entrypoint": "no"}, {"image": "x", "env": {"A": 1}},
                {"image": "x", "base_environment": 3},
                {"image": "x", "annotations": {"com": {"hooks": {"cxi": {"enabled": "yes"}}}}}):
        assert edf.check(bad) and list(validator.iter_errors(bad)), bad
