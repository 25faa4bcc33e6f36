"""One module names the image label keys (hpcai.labels): the build writes them, planning, GPU
selection and results read them, and no other module spells a key out."""

from __future__ import annotations

import ast
from pathlib import Path

from hpcai import labels
from hpcai.image.spec import make_spec

PACKAGE = Path(labels.__file__).parent
KEYS = {value for name, value in vars(labels).items()
        if name.isupper() and isinstance(value, str) and value.startswith(labels.PREFIX) and value != labels.PREFIX}


def test_every_label_the_build_writes_has_its_name():
    written = make_spec("pytorch-ngc", cxi="1", gpu_archs="90", payloads="sanity", sha="abc").labels()
    ours = {key for key in written if key.startswith(labels.PREFIX) and not key.startswith(labels.COMPONENT)}
    assert ours <= KEYS, ours - KEYS
    assert {labels.CXI, labels.OFI, labels.HOROVOD, labels.MPI, labels.FAMILY, labels.PAYLOADS} <= ours


def test_no_other_module_spells_a_key_out():
    spelled = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "labels.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and (node.value in KEYS or node.value == labels.COMPONENT):
                spelled.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.value}")
    assert spelled == []


def test_the_facts_a_launch_reads():
    facts = labels.facts({labels.PAYLOADS: "sanity,nccl-tests", labels.FAMILY: "rocm", labels.MPI: "mpich"})
    assert (facts.payloads, facts.family, facts.mpi) == (["sanity", "nccl-tests"], "rocm", "mpich")
    unknown = labels.facts({})  # an image not built by hpcai: nothing known, nothing refused
    assert (unknown.payloads, unknown.family, unknown.mpi) == (None, None, "")
    assert labels.facts({labels.PAYLOADS: ""}).payloads is None
