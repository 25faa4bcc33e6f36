# hpcai image: pytorch-cpu on debian:bookworm-slim
# Rendered by hpcai 0.1.0 (0123456789ab); edit dockerfiles/*.j2, not this file.
# Stage "builder" compiles the stack and payload tools into /opt/hpcai; the final stage copies
# only that prefix, so compilers, headers and source trees stay out of the image.
# Layers go from rarely to often changed: system packages, framework, stack, payload hooks,
# payload folders; editing a payload's run script only rebuilds the last layers.

FROM debian:bookworm-slim AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND="noninteractive" \
    HPCAI_BUILD="/opt/hpcai-build" \
    HPCAI_PREFIX="/opt/hpcai" \
    HPCAI_FAMILY="cpu" \
    HPCAI_MPI="ompi" \
    HPCAI_WITH_OFI="1" \
    HPCAI_WITH_HVD="0" \
    HPCAI_FROM_SOURCE="0"
# The site's apt sources replace the base image's (mirrors, air-gapped sites).
COPY install/lib.sh install/apt-sources.sh /opt/hpcai-build/install/
COPY apt/debian.sources /opt/hpcai-build/apt/debian.sources
RUN /opt/hpcai-build/install/apt-sources.sh /opt/hpcai-build/apt/debian.sources
COPY install/lib.sh install/fetch.sh /opt/hpcai-build/install/
# Step: system packages (builder, no compilers)
COPY install/system-packages.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/system-packages.sh python
ENV HPCAI_FLAVOR="pytorch-cpu" \
    HPCAI_FRAMEWORK="pytorch" \
    HPCAI_BASE_ENTRYPOINT=""
# The site's CA bundle (TLS-inspecting proxies); lib.sh points pip and curl at it. Builder only.
COPY ca-bundle.crt /opt/hpcai-build/ca-bundle.crt
# Local wheels (air-gapped sites, CPU builds of the framework); lib.sh adds them to pip's find-links.
COPY wheelhouse/ /opt/hpcai-build/wheelhouse/
ENV HPCAI_FRAMEWORK_REQUIREMENT="torch==2.13.0 numpy==2.4.6"
# Step: python venv and framework
COPY install/python-venv.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/python-venv.sh
# Pinned sources: each step that downloads gets its pins (<NAME>_VERSION/_URL/_SHA256) in an ENV
# just before it, so bumping one component rebuilds from its own step on; every download is
# checked against its sha256 (install/lib.sh: fetch). sources/ holds pre-downloaded tarballs for
# air-gapped builds (may be empty).
COPY sources/ /opt/hpcai-build/sources/

FROM debian:bookworm-slim
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND="noninteractive" \
    HPCAI_BUILD="/opt/hpcai-build" \
    HPCAI_PREFIX="/opt/hpcai" \
    HPCAI_FAMILY="cpu" \
    HPCAI_MPI="ompi" \
    HPCAI_WITH_OFI="1" \
    HPCAI_WITH_HVD="0" \
    HPCAI_FROM_SOURCE="0"
# The site's apt sources replace the base image's (mirrors, air-gapped sites).
COPY install/lib.sh install/apt-sources.sh /opt/hpcai-build/install/
COPY apt/debian.sources /opt/hpcai-build/apt/debian.sources
RUN /opt/hpcai-build/install/apt-sources.sh /opt/hpcai-build/apt/debian.sources
COPY install/lib.sh /opt/hpcai-build/install/
# Step: system packages (runtime)
COPY install/system-packages.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/system-packages.sh final libfabric1 libfabric-bin openmpi-bin libopenmpi3
ENV HPCAI_FLAVOR="pytorch-cpu" \
    HPCAI_FRAMEWORK="pytorch" \
    HPCAI_BASE_ENTRYPOINT=""
COPY --from=builder /opt/hpcai /opt/hpcai
ENV PATH="/opt/hpcai/bin:/opt/hpcai/venv/bin:$PATH" \
    LD_LIBRARY_PATH="/opt/hpcai/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    HPCAI_DEFAULT_SUITE="sanity,mpi-allreduce" \
    OMPI_ALLOW_RUN_AS_ROOT="1" \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"
# Step: finalize prefix
COPY install/finalize.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/finalize.sh
# Step: payload mpi-allreduce (runtime)
COPY payload-hooks/mpi-allreduce/ /opt/hpcai-build/payloads/mpi-allreduce/
COPY install/payload-hook.sh install/payload-lib.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/payload-hook.sh mpi-allreduce install-debian.sh
# Nothing of the build stays in the image: scripts, downloads. (The CA bundle and wheelhouse never
# reach this stage: payload runtime hooks install system packages only; downloads are build hooks.)
RUN rm -rf /opt/hpcai-build
COPY runtime/ /opt/hpcai/
COPY payloads/ /opt/hpcai/payloads/
COPY hpcai-bench /opt/hpcai/bin/hpcai-bench
LABEL org.opencontainers.image.title="hpcai pytorch-cpu" \
      org.opencontainers.image.description="pytorch on debian:bookworm-slim with the hpcai HPC stack" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="0123456789ab" \
      org.opencontainers.image.created="2026-01-01T00:00:00Z" \
      org.opencontainers.image.base.name="debian:bookworm-slim" \
      org.opencontainers.image.licenses="Apache-2.0" \
      hpcai.flavor="pytorch-cpu" \
      hpcai.family="cpu" \
      hpcai.framework="pytorch" \
      hpcai.base="debian:bookworm-slim" \
      hpcai.arch="amd64" \
      hpcai.mpi="ompi" \
      hpcai.ofi="1" \
      hpcai.cxi="0" \
      hpcai.horovod="0" \
      hpcai.ssh="0" \
      hpcai.hpc-libs="" \
      hpcai.payloads="sanity,mpi-allreduce" \
      hpcai.stack="debian-packages" \
      hpcai.version="0.1.0" \
      hpcai.git-sha="0123456789ab" \
      hpcai.build-date="2026-01-01T00:00:00Z" \
      hpcai.component.framework="torch==2.13.0 numpy==2.4.6"
ENTRYPOINT ["/opt/hpcai/bin/hpcai-entrypoint"]
CMD ["/opt/hpcai/bin/hpcai-bench"]
