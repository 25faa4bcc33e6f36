# The smallest image with pytorch-cpu's content, written by hand: the same Debian base, the same
# Debian MPI/libfabric packages and python3-mpi4py, and one venv with the same wheels (the
# framework and the payloads' requirements). No entrypoint, payload scripts or labels.
# benchmarks/image_size.py and benchmarks/cold_build.py build it beside hpcai's image and check that
# both hold the same Debian packages and Python distributions before comparing.
#
# Context (made by benchmarks/minimal/__init__.py): wheelhouse/ (may be empty), ca-bundle.crt (may be
# empty), requirements/*.txt (the payloads' requirements files).
ARG BASE=debian:bookworm-slim

FROM ${BASE} AS venv
ARG FRAMEWORK="torch numpy"
# Debian's packages at the base's release, as hpcai's image takes them (no pins).
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates python3-venv \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY wheelhouse/ /tmp/wheelhouse/
COPY ca-bundle.crt /tmp/ca-bundle.crt
COPY requirements/ /tmp/requirements/
# One pip resolve of everything; the words of FRAMEWORK and the -r list split on purpose.
# hadolint ignore=DL3013,SC2046,SC2086
RUN python3 -m venv --system-site-packages /opt/venv \
    && if [ -s /tmp/ca-bundle.crt ]; then export PIP_CERT=/tmp/ca-bundle.crt; fi \
    && /opt/venv/bin/pip install --no-cache-dir --find-links /tmp/wheelhouse $FRAMEWORK \
       $(printf -- '-r %s ' /tmp/requirements/*.txt)

FROM ${BASE}
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates python3 \
       libfabric1 libfabric-bin openmpi-bin libopenmpi3 python3-mpi4py \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY --from=venv /opt/venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"
