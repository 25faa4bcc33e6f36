"""The SIF's hpcai.mpi label chooses srun's --mpi type (hpcai.run.pmi), read by the real
`apptainer inspect` from real SIFs with real labels.

The SIFs are tiny: the session's Debian SIF (tests/integration/test_launch_apptainer_local.py)
with a `%labels` section added by a def build (`Bootstrap: localimage`), one per MPI, cached by
the def's text (which names the base by its Docker image Id). The rule itself is unit-tested in
tests/unit/run/test_pmi.py; the pairs are proven on the Slurm cluster in tests/integration/test_pmi_slurm.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sifcache import cached_sif
from test_launch_apptainer_local import apptainer_build, debian_sif_path

from hpcai.errors import UsageError
from hpcai.run.plan import LaunchOptions, plan_launch

pytestmark = [pytest.mark.apptainer, pytest.mark.docker]

# Format: a def that only adds labels (no %post or %test: nothing runs in the container). Root
# cannot build it here without --fakeroot all the same: Apptainer asks for every capability, and
# root's bounding set lacks CAP_SYS_RESOURCE (apptainer_build passes --fakeroot).
LABELLED_DEF = """Bootstrap: localimage
From: {base}

%labels
    hpcai.mpi {mpi}
    hpcai.payloads sanity,mpi-allreduce
"""


@pytest.fixture(scope="module")
def labelled_sif(tmp_path_factory):
    """labelled_sif(MPI) -> a SIF labelled hpcai.mpi=MPI, built once and cached."""
    def make(mpi: str) -> Path:
        definition = LABELLED_DEF.format(base=debian_sif_path(), mpi=mpi)
        def_file = tmp_path_factory.mktemp(f"def-{mpi}") / "labels.def"
        def_file.write_text(definition)
        key = hashlib.sha256(definition.encode()).hexdigest()[:16]
        return cached_sif(f"labels-{mpi}-{key}.sif", lambda part: apptainer_build(part, str(def_file)))

    return make


@pytest.mark.parametrize("mpi, want, other", [("ompi", "pmix", "pmi2"), ("mpich", "pmi2", "pmix")])
def test_the_sif_label_chooses_the_type_in_the_srun_line(labelled_sif, tmp_path, mpi, want, other):
    image = str(labelled_sif(mpi))
    opts = LaunchOptions(image=image, payload="mpi-allreduce", site="cray-ex-nvidia", nodes=2, userns=True,
                         host_mpi=False, output_dir=str(tmp_path / "run"))
    for check in (True, False):  # the launch and its --dry-run agree
        plan = plan_launch(opts, check=check)
        assert f"--mpi={want}" in plan.argv and f"--mpi={other}" not in plan.argv
        assert plan.image_labels["hpcai.mpi"] == mpi
    with pytest.raises(UsageError, match=f"^--mpi {other} cannot start one MPI world"):
        plan_launch(LaunchOptions(**{**opts.__dict__, "mpi": other}), check=True)
    assert not (tmp_path / "run").exists()  # refused before anything was written
