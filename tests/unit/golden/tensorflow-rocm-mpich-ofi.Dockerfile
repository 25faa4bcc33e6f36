# hpcai image: tensorflow-rocm on rocm/tensorflow:rocm6.4-py3.12-tf2.18-dev
# Rendered by hpcai 0.1.0 (0123456789ab); edit dockerfiles/*.j2, not this file.
# Stage "builder" compiles the stack and payload tools into /opt/hpcai; the final stage copies
# only that prefix, so compilers, headers and source trees stay out of the image.
# Layers go from rarely to often changed: system packages, framework, stack, payload hooks,
# payload folders; editing a payload's run script only rebuilds the last layers.

FROM rocm/tensorflow:rocm6.4-py3.12-tf2.18-dev AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND="noninteractive" \
    HPCAI_BUILD="/opt/hpcai-build" \
    HPCAI_PREFIX="/opt/hpcai" \
    HPCAI_FAMILY="rocm" \
    HPCAI_MPI="mpich" \
    HPCAI_WITH_OFI="1" \
    HPCAI_WITH_HVD="0" \
    HPCAI_FROM_SOURCE="1"
COPY install/lib.sh install/fetch.sh /opt/hpcai-build/install/
# Step: system packages (builder)
COPY install/system-packages.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/system-packages.sh builder libnuma-dev libhwloc-dev libtool-bin
ENV HPCAI_FLAVOR="tensorflow-rocm" \
    HPCAI_FRAMEWORK="tensorflow" \
    HPCAI_BASE_ENTRYPOINT=""
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
# Step: mpich
ENV MPICH_VERSION="4.3.2" \
    MPICH_URL="https://www.mpich.org/static/downloads/4.3.2/mpich-4.3.2.tar.gz" \
    MPICH_SHA256="47d774587a7156a53752218c811c852e70ac44db9c502dc3f399b4cb817e3818"
COPY install/mpich.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/mpich.sh
# Step: aws-ofi-nccl
ENV AWS_OFI_NCCL_VERSION="1.19.0" \
    AWS_OFI_NCCL_URL="https://github.com/aws/aws-ofi-nccl/releases/download/v1.19.0/aws-ofi-nccl-1.19.0.tar.gz" \
    AWS_OFI_NCCL_SHA256="fd8ecd15f0de88e07b2194637938dadcf247ad3b5150651dfd0bb0c4bb32ff3c"
COPY install/aws-ofi-nccl.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/aws-ofi-nccl.sh
# Step: payload osu (build)
ENV OSU_MICRO_BENCHMARKS_VERSION="7.5.2" \
    OSU_MICRO_BENCHMARKS_URL="https://mvapich.cse.ohio-state.edu/download/mvapich/osu-micro-benchmarks-7.5.2.tar.gz" \
    OSU_MICRO_BENCHMARKS_SHA256="618de3d0b1122f73a9229177d2da1e5cd62e431190580cb915f2605849cbbbdc"
COPY payload-hooks/osu/ /opt/hpcai-build/payloads/osu/
COPY install/payload-hook.sh install/payload-lib.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/payload-hook.sh osu build.sh

FROM rocm/tensorflow:rocm6.4-py3.12-tf2.18-dev
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV DEBIAN_FRONTEND="noninteractive" \
    HPCAI_BUILD="/opt/hpcai-build" \
    HPCAI_PREFIX="/opt/hpcai" \
    HPCAI_FAMILY="rocm" \
    HPCAI_MPI="mpich" \
    HPCAI_WITH_OFI="1" \
    HPCAI_WITH_HVD="0" \
    HPCAI_FROM_SOURCE="1"
COPY install/lib.sh /opt/hpcai-build/install/
# Step: system packages (runtime)
COPY install/system-packages.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/system-packages.sh final libnuma1 libhwloc15
ENV HPCAI_FLAVOR="tensorflow-rocm" \
    HPCAI_FRAMEWORK="tensorflow" \
    HPCAI_BASE_ENTRYPOINT=""
COPY --from=builder /opt/hpcai /opt/hpcai
ENV PATH="/opt/hpcai/bin:/opt/hpcai/venv/bin:$PATH" \
    LD_LIBRARY_PATH="/opt/hpcai/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    HPCAI_DEFAULT_SUITE="sanity,osu"
# Step: finalize prefix
COPY install/finalize.sh /opt/hpcai-build/install/
RUN /opt/hpcai-build/install/finalize.sh
# Nothing of the build stays in the image: scripts, downloads. (The CA bundle and wheelhouse never
# reach this stage: payload runtime hooks install system packages only; downloads are build hooks.)
RUN rm -rf /opt/hpcai-build
COPY runtime/ /opt/hpcai/
COPY payloads/ /opt/hpcai/payloads/
COPY hpcai-bench /opt/hpcai/bin/hpcai-bench
LABEL org.opencontainers.image.title="hpcai tensorflow-rocm" \
      org.opencontainers.image.description="tensorflow on rocm/tensorflow:rocm6.4-py3.12-tf2.18-dev with the hpcai HPC stack" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="0123456789ab" \
      org.opencontainers.image.created="2026-01-01T00:00:00Z" \
      org.opencontainers.image.base.name="rocm/tensorflow:rocm6.4-py3.12-tf2.18-dev" \
      org.opencontainers.image.licenses="Apache-2.0" \
      hpcai.flavor="tensorflow-rocm" \
      hpcai.family="rocm" \
      hpcai.framework="tensorflow" \
      hpcai.base="rocm/tensorflow:rocm6.4-py3.12-tf2.18-dev" \
      hpcai.arch="amd64" \
      hpcai.mpi="mpich" \
      hpcai.ofi="1" \
      hpcai.cxi="0" \
      hpcai.horovod="0" \
      hpcai.ssh="0" \
      hpcai.hpc-libs="" \
      hpcai.payloads="sanity,osu" \
      hpcai.stack="source" \
      hpcai.version="0.1.0" \
      hpcai.git-sha="0123456789ab" \
      hpcai.build-date="2026-01-01T00:00:00Z" \
      hpcai.component.libfabric="2.5.1" \
      hpcai.component.mpich="4.3.2" \
      hpcai.component.aws-ofi-nccl="1.19.0" \
      hpcai.component.osu-micro-benchmarks="7.5.2"
ENTRYPOINT ["/opt/hpcai/bin/hpcai-entrypoint"]
CMD ["/opt/hpcai/bin/hpcai-bench"]
