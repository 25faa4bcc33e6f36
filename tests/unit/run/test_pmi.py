"""The srun --mpi rule (hpcai.run.pmi): the image's MPI (its hpcai.mpi label) against the site's
preference and offered types, as pure functions on real site profiles. The label read from a real
SIF by the real `apptainer inspect` is tested in tests/integration/test_pmi_apptainer.py; the pairs
themselves are proven on the Slurm cluster in tests/integration/test_pmi_slurm.py."""

from __future__ import annotations

import pytest

from hpcai.errors import UsageError
from hpcai.run.pmi import choose_pmi
from hpcai.run.site import load_site, parse_site

CRAY = load_site("cray-ex-nvidia")


@pytest.mark.parametrize("image_mpi, want", [("ompi", "pmix"), ("mpich", "pmi2"), ("none", "pmi2"), ("", "pmi2")])
def test_cray_ex_gives_each_mpi_a_type_it_can_use(image_mpi, want):
    assert choose_pmi(image_mpi, None, CRAY, needs_mpi=True) == (want, "")


def test_payloads_without_mpi_keep_the_site_type():
    assert choose_pmi("ompi", None, CRAY, needs_mpi=False) == ("pmi2", "")


@pytest.mark.parametrize("image_mpi, requested, good", [
    ("ompi", "pmi2", "pmix or --mpi pspmix"), ("ompi", "cray_shasta", "pmix"), ("ompi", "none", "pmix"),
    ("mpich", "pmix", "pmi2"), ("mpich", "cray_shasta", "pmi2"), ("mpich", "pspmix", "pmi2")])
def test_a_known_bad_pair_is_refused_with_the_types_that_work(image_mpi, requested, good):
    with pytest.raises(UsageError) as err:
        choose_pmi(image_mpi, requested, CRAY, needs_mpi=True)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"--mpi {requested} cannot start one MPI world for this image's")
    assert "singletons" in line and f"use --mpi {good}" in line


@pytest.mark.parametrize("image_mpi, requested", [("ompi", "pmix"), ("ompi", "pspmix"), ("mpich", "pmi2"),
                                                  ("", "cray_shasta"), ("none", "none")])
def test_a_good_or_unknown_pair_is_kept(image_mpi, requested):
    assert choose_pmi(image_mpi, requested, CRAY, needs_mpi=True) == (requested, "")


def test_a_site_without_declared_types_gets_the_mpi_own_choice_with_a_note():
    site = load_site("generic-ib")  # mpi = "pmix", no mpi_types
    mpi, note = choose_pmi("mpich", None, site, needs_mpi=True)
    assert mpi == "pmi2"
    assert note == ("--mpi=pmi2 for this image's MPICH (PMI-1/2): it would start as singletons under the "
                    "site's --mpi=pmix")


def test_a_site_that_offers_nothing_usable_is_refused():
    site = parse_site("shasta-only", 'mpi = "cray_shasta"\nmpi_types = ["cray_shasta"]\n')
    with pytest.raises(UsageError, match=r"^site shasta-only offers srun --mpi cray_shasta, none of which starts "
                                         r"one MPI world for this image's Open MPI \(PMIx only\) \(it needs pmix or "
                                         r"pspmix\)"):
        choose_pmi("ompi", None, site, needs_mpi=True)


def test_sites_declare_only_known_types():
    with pytest.raises(UsageError, match="mpi_types 'pmi3' is not one of"):
        parse_site("bad", 'mpi_types = ["pmix", "pmi3"]\n')
