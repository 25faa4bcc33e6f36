#!/bin/bash
# horovod.sh: Horovod from the checksummed PyPI sdist, built against the image's MPI (and NCCL/RCCL).
# Its CMake asks for C++14, which current PyTorch/TensorFlow headers reject: raise it to 17.
# The build fails unless horovod imports with the framework (a silent no-op build helps nobody).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Two steps: a failed download must stop the script (set -e does not see inside "$(...)" arguments).
archive=$(fetch "$HOROVOD_URL" "$HOROVOD_SHA256")
src=$(unpack "$archive")
sed -i -E 's/(CMAKE_CXX_STANDARD[[:space:]]+)1[14]/\117/; s/-std=c\+\+1[14]/-std=c++17/g' "$src/CMakeLists.txt"
export PATH="$HPCAI_PREFIX/bin:$PATH" HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_GLOO=1
case ${HPCAI_FRAMEWORK:-} in
  pytorch) export HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 mod=horovod.torch ;;
  tensorflow) export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 mod=horovod.tensorflow ;;
  *) die "unknown framework ${HPCAI_FRAMEWORK:-}" ;;
esac
if with_cuda || with_rocm; then
  export HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
  with_rocm && export HOROVOD_GPU=ROCM
fi
py=$(venv_python)
"$py" -m pip install --no-cache-dir --no-build-isolation "$src"
"$py" -c "import ${mod} as hvd; print('horovod', hvd.__version__ if hasattr(hvd, '__version__') else ''); assert hvd.mpi_built()"
