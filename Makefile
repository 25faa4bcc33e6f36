# hpcai — thin targets over the CLI. The virtualenv is created on first use.
# Variables (all optional): WITH_MPI (1/0 or ompi/mpich/none), WITH_OFI, WITH_HVD, WITH_CXI, WITH_SSH, GPU_ARCHS (or CUDA_ARCHS), HPC_LIBS_DIR,
# PAYLOADS, NGC_VERSION, ROCM_VERSION, TAG, DOCKER (docker|podman), WHEELHOUSE, CA_BUNDLE.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
HPCAI := $(VENV)/bin/hpcai
FLAVORS := pytorch-ngc tensorflow-ngc pytorch-rocm tensorflow-rocm pytorch-poplar pytorch-cpu tensorflow-cpu
PYTEST_ARGS ?=

# Make variables reach the CLI as environment variables (each CLI option names its envvar).
export WITH_MPI WITH_OFI WITH_HVD WITH_CXI WITH_SSH GPU_ARCHS CUDA_ARCHS HPC_LIBS_DIR PAYLOADS NGC_VERSION ROCM_VERSION TAG DOCKER WHEELHOUSE CA_BUNDLE
# Also read by the image commands: BASE_IMAGE, ARCH, APT_SOURCES, SOURCES_DIR, ALLOW_UNVERIFIED, HPCAI_REPOSITORY,
# <COMPONENT>_VERSION (e.g. LIBFABRIC_VERSION). Every image option's variable: launcher/hpcai/image/options.py.
export BASE_IMAGE ARCH APT_SOURCES SOURCES_DIR ALLOW_UNVERIFIED HPCAI_REPOSITORY LIBFABRIC_VERSION OPENMPI_VERSION MPICH_VERSION PMIX_VERSION AWS_OFI_NCCL_VERSION HOROVOD_VERSION
FORMAT ?= docker

.PHONY: help venv test test-unit gpu-check lint demo clean base-debian base-cuda base-rocm gpu-recipe rocm-recipe golden bench check-fresh $(addprefix build-,$(FLAVORS)) $(addprefix sif-,$(FLAVORS)) $(addprefix render-,$(FLAVORS))

help:
	@echo "make demo | test | gpu-check | lint | build-<flavor> | sif-<flavor> | render-<flavor> | base-debian | base-cuda | base-rocm | gpu-recipe MPI=ompi|mpich | rocm-recipe | golden | bench | clean"
	@echo "flavors: $(FLAVORS)"

# Debian's python3 makes virtualenvs only with python3-venv (tests/infra/packages.txt, group base).
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || bash tests/infra/install-packages.sh base
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

$(addprefix build-,$(FLAVORS)): build-%: venv
	$(HPCAI) build $*

$(addprefix sif-,$(FLAVORS)): sif-%: venv
	$(HPCAI) sif $*

$(addprefix render-,$(FLAVORS)): render-%: venv
	$(HPCAI) render $* --format $(FORMAT)

# A local Debian base image (mmdebstrap + docker import) for machines without a registry.
base-debian:
	bash tests/infra/docker-up.sh

# The CUDA stand-in base (CUDA 13.2 + NCCL from PyPI wheels, NGC's layout) for GPU-recipe builds
# and tests on machines without NGC; see docs/building.md.
base-cuda: venv
	HPCAI_PYTHON=$(VENV)/bin/python bash tests/infra/base-cuda.sh

# The ROCm stand-in base (Debian trixie's HIP 5.7 and RCCL 5.4 in AMD's /opt/rocm layout) for
# ROCm-recipe builds and tests on machines without AMD's registry; see docs/building.md.
base-rocm:
	bash tests/infra/base-rocm.sh

# The GPU recipe built for real on the stand-in from reachable, checksummed sources, then checked
# in the image: tests/integration/test_gpu_recipe.py builds it (with the host's pip wheelhouse
# and CA bundle, as every test build) and runs its checks. MPI=ompi is what CI runs; MPI=mpich
# is the MPICH-over-OFI configuration, kept out of CI for time (about 40 min cold on 2 cores).
MPI ?= ompi
gpu-recipe: venv
	HPCAI_GPU_RECIPE_MPI=$(MPI) PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/pytest tests/integration/test_gpu_recipe.py $(PYTEST_ARGS)

# The ROCm recipe, likewise, on the ROCm stand-in (tests/integration/test_rocm_recipe.py), every test
# required to run (no skip passes); when all pass, the digest of its inputs is recorded in
# tests/infra/rocm-recipe.proven (commit it): CI runs these tests only when the inputs changed since,
# as the recipe does not fit beside the CUDA one in CI's 60 minutes cold (tests/infra/rocm_recipe_inputs.py).
rocm-recipe: venv
	HPCAI_REQUIRE_ENGINES=1 HPCAI_ROCM_RECIPE=build PATH="$(CURDIR)/$(VENV)/bin:$$PATH" \
	  $(VENV)/bin/pytest tests/integration/test_rocm_recipe.py
	$(VENV)/bin/python tests/infra/rocm_recipe_inputs.py --write

# Build the small CPU image and run a payload locally, printing a results table.
demo: venv base-debian
	bash tests/infra/demo.sh

# Start what the tests need (docker, the Slurm test cluster, charliecloud), then run them all.
test: venv
	bash tests/infra/up.sh
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/pytest $(PYTEST_ARGS)

test-unit: venv
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/pytest tests/unit tests/hooks $(PYTEST_ARGS)

# On a machine with an NVIDIA GPU and PyTorch, without Docker/Apptainer (and maybe without network):
# payloads, entrypoint and results from the source tree (tests/gpu, docs/development.md). With the
# venv when it works there, else with $(PYTHON) and launcher/ on PYTHONPATH: nothing is installed.
gpu-check:
	@if $(VENV)/bin/python -c 'import pytest, hpcai' 2>/dev/null; then py=$(VENV)/bin/python; \
	else py=$(PYTHON); echo "gpu-check: no usable $(VENV); running $(PYTHON) -m pytest with PYTHONPATH=launcher"; fi; \
	PYTHONPATH="$(CURDIR)/launcher$${PYTHONPATH:+:$$PYTHONPATH}" $$py -m pytest -m gpu tests/gpu -v -s $(PYTEST_ARGS); \
	rc=$$?; echo "gpu-check: figures (JSON lines) in $${HPCAI_GPU_REPORT:-build/gpu-check.jsonl}, logs under $${HPCAI_GPU_OUT:-build/gpu-check}/"; \
	exit $$rc

# Does tests/infra/packages.txt cover every command the tests use? (a fresh Debian container, simulated)
check-fresh: venv base-debian
	$(VENV)/bin/python tests/infra/check-fresh.py --verbose

lint: venv
	bash tests/infra/lint.sh

golden: venv
	HPCAI_REGEN_GOLDEN=1 $(VENV)/bin/pytest tests/unit -k golden -q

bench: venv  # QUICK=1: only the benchmarks that need no image, build or cluster
	$(VENV)/bin/python benchmarks/report.py $(if $(QUICK),--quick) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
