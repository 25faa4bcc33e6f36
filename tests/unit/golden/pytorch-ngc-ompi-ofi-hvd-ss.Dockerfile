# hpcai image: pytorch-ngc on nvcr.io/nvidia/pytorch:26.03-py3
# Rendered by hpcai 0.1.0 (0123456789ab); edit dockerfiles/*.j2, not this file.
# Stage "builder" compiles the stack and payload tools into /opt/hpcai; the final stage copies
# only that prefix, so compilers, headers and source trees stay out of the image.
# Layers go from rarely to often changed: system packages, framework, stack, payload hooks,
# payload folders; editing a payload's run script only rebuilds the last layers.

FROM nvcr.io/nvidia/pytorch:26.03-py3 AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND="noninteractive" \
    HPCAI_BUILD="/opt/hpcai-build" \
    HPCAI_PREFIX="/opt/hpcai" \
    HPCAI_FAMILY="cuda" \
    HPCAI_MPI="ompi" \
    HPCAI_WITH_OFI="1" \
    HPCAI_WITH_HVD="1" \
    HPCAI_FROM_SOURCE="1"
COPY install/lib.sh install/fetch.sh /opt/hpcai-build/install/
# Step: system packages (builder)
COPY install/system-packages.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/system-packages.sh builder libnuma-dev libevent-dev libhwloc-dev zlib1g-dev flex openssh-client cmake git
ENV HPCAI_FLAVOR="pytorch-ngc" \
    HPCAI_FRAMEWORK="pytorch" \
    HPCAI_BASE_ENTRYPOINT="/opt/nvidia/nvidia_entrypoint.sh"
# Step: python venv and framework
COPY install/python-venv.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/python-venv.sh
# Pinned sources: each step that downloads gets its pins (<NAME>_VERSION/_URL/_SHA256) in an ENV
# just before it, so bumping one component rebuilds from its own step on; every download is
# checked against its sha256 (install/lib.sh: fetch). sources/ holds pre-downloaded tarballs for
# air-gapped builds (may be empty).
COPY sources/ /opt/hpcai-build/sources/
# Step: libfabric
ENV LIBFABRIC_VERSION="2.5.1" \
    LIBFABRIC_URL="https://github.com/ofiwg/libfabric/releases/download/v2.5.1/libfabric-2.5.1.tar.bz2" \
    LIBFABRIC_SHA256="ac34788a52b3e4a3a1ef712ec29bc4261c63dfbd9e5e4d6e202a0c3687be368d"
COPY install/libfabric.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/libfabric.sh
# Step: pmix
ENV PMIX_VERSION="5.0.10" \
    PMIX_URL="https://github.com/openpmix/openpmix/releases/download/v5.0.10/pmix-5.0.10.tar.bz2" \
    PMIX_SHA256="78663f6b932589d68e24feaf7f8a948d60be68d91965f3effbacb4cd88cf9a95"
COPY install/pmix.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/pmix.sh
# Step: openmpi
ENV OPENMPI_VERSION="5.0.10" \
    OPENMPI_URL="https://download.open-mpi.org/release/open-mpi/v5.0/openmpi-5.0.10.tar.bz2" \
    OPENMPI_SHA256="0acecc4fc218e5debdbcb8a41d182c6b0f1d29393015ed763b2a91d5d7374cc6"
COPY install/openmpi.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/openmpi.sh
# Step: aws-ofi-nccl
ENV AWS_OFI_NCCL_VERSION="1.19.0" \
    AWS_OFI_NCCL_URL="https://github.com/aws/aws-ofi-nccl/releases/download/v1.19.0/aws-ofi-nccl-1.19.0.tar.gz" \
    AWS_OFI_NCCL_SHA256="fd8ecd15f0de88e07b2194637938dadcf247ad3b5150651dfd0bb0c4bb32ff3c"
COPY install/aws-ofi-nccl.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/aws-ofi-nccl.sh
# Step: horovod
ENV HOROVOD_VERSION="0.28.1" \
    HOROVOD_URL="https://files.pythonhosted.org/packages/e4/86/da559fcc1620ac7831a16ccb2ad3acb477a8da8a631f75a83b6410507210/horovod-0.28.1.tar.gz" \
    HOROVOD_SHA256="92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0"
COPY install/horovod.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/horovod.sh
# Step: payload nccl-tests (build)
ENV NCCL_TESTS_VERSION="2.17.6" \
    NCCL_TESTS_URL="https://github.com/NVIDIA/nccl-tests/archive/v2.17.6.tar.gz" \
    NCCL_TESTS_SHA256="38974e70342150ede0e3fb8fd24bfe60ccbde90fa20241716ba8bb338e6b61a0"
COPY payload-hooks/nccl-tests/ /opt/hpcai-build/payloads/nccl-tests/
COPY install/payload-hook.sh install/payload-lib.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/payload-hook.sh nccl-tests build.sh
# Step: payload osu (build)
ENV OSU_MICRO_BENCHMARKS_VERSION="7.5.2" \
    OSU_MICRO_BENCHMARKS_URL="https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-7.5.2.tar.gz" \
    OSU_MICRO_BENCHMARKS_SHA256="618de3d0b1122f73a9229177d2da1e5cd62e431190580cb915f2605849cbbbdc"
COPY payload-hooks/osu/ /opt/hpcai-build/payloads/osu/
COPY install/payload-hook.sh install/payload-lib.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/payload-hook.sh osu build.sh

FROM nvcr.io/nvidia/pytorch:26.03-py3
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND="noninteractive" \
    HPCAI_BUILD="/opt/hpcai-build" \
    HPCAI_PREFIX="/opt/hpcai" \
    HPCAI_FAMILY="cuda" \
    HPCAI_MPI="ompi" \
    HPCAI_WITH_OFI="1" \
    HPCAI_WITH_HVD="1" \
    HPCAI_FROM_SOURCE="1"
COPY install/lib.sh /opt/hpcai-build/install/
# Step: system packages (runtime)
COPY install/system-packages.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/system-packages.sh final libnuma1 libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 openssh-client
ENV HPCAI_FLAVOR="pytorch-ngc" \
    HPCAI_FRAMEWORK="pytorch" \
    HPCAI_BASE_ENTRYPOINT="/opt/nvidia/nvidia_entrypoint.sh"
COPY --from=builder /opt/hpcai /opt/hpcai
ENV PATH="/opt/hpcai/bin:/opt/hpcai/venv/bin:$PATH" \
    LD_LIBRARY_PATH="/opt/hpcai/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    HPCAI_DEFAULT_SUITE="sanity,nccl-tests,osu"
# Step: finalize prefix
COPY install/finalize.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/finalize.sh
# Site libraries (-ss image), first on the library path; see hpc_libs/README.md. Late, so the
# -hpc and -ss images share every layer before this one.
COPY hpc-libs/ /opt/hpcai/hpc-libs/
ENV LD_LIBRARY_PATH="/opt/hpcai/hpc-libs:$LD_LIBRARY_PATH" \
    HPCAI_HPC_LIBS="/opt/hpcai/hpc-libs"
# Step: site libraries
COPY install/hpc-libs.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/hpc-libs.sh
# Nothing of the build stays in the image: scripts, downloads. (The CA bundle and wheelhouse never
# reach this stage: payload runtime hooks install system packages only; downloads are build hooks.)
RUN rm -rf /opt/hpcai-build
COPY runtime/ /opt/hpcai/
COPY payloads/ /opt/hpcai/payloads/
COPY hpcai-bench /opt/hpcai/bin/hpcai-bench
LABEL org.opencontainers.image.title="hpcai pytorch-ngc" \
      org.opencontainers.image.description="pytorch on nvcr.io/nvidia/pytorch:26.03-py3 with the hpcai HPC stack" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="0123456789ab" \
      org.opencontainers.image.created="2026-01-01T00:00:00Z" \
      org.opencontainers.image.base.name="nvcr.io/nvidia/pytorch:26.03-py3" \
      org.opencontainers.image.licenses="Apache-2.0" \
      hpcai.flavor="pytorch-ngc" \
      hpcai.family="cuda" \
      hpcai.framework="pytorch" \
      hpcai.base="nvcr.io/nvidia/pytorch:26.03-py3" \
      hpcai.arch="amd64" \
      hpcai.mpi="ompi" \
      hpcai.ofi="1" \
      hpcai.cxi="0" \
      hpcai.horovod="1" \
      hpcai.ssh="0" \
      hpcai.hpc-libs="/opt/hpcai/hpc-libs" \
      hpcai.payloads="sanity,nccl-tests,osu" \
      hpcai.stack="source" \
      hpcai.version="0.1.0" \
      hpcai.git-sha="0123456789ab" \
      hpcai.build-date="2026-01-01T00:00:00Z" \
      hpcai.component.libfabric="2.5.1" \
      hpcai.component.pmix="5.0.10" \
      hpcai.component.openmpi="5.0.10" \
      hpcai.component.aws-ofi-nccl="1.19.0" \
      hpcai.component.horovod="0.28.1" \
      hpcai.component.nccl-tests="2.17.6" \
      hpcai.component.osu-micro-benchmarks="7.5.2"
ENTRYPOINT ["/opt/hpcai/bin/hpcai-entrypoint"]
CMD ["/opt/hpcai/bin/hpcai-bench"]
