#!/bin/bash
# horovod.sh: Horovod from the checksummed PyPI sdist, built against the image's MPI (and NCCL/RCCL).
# Its CMake asks for C++14, which current PyTorch/TensorFlow headers reject (#error C++17 or
# later compatible compiler is required): raise it to 17.
# The build fails unless horovod imports with the framework (a silent no-op build helps nobody).
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# Two steps: a failed download must stop the script (set -e does not see inside "$(...)" arguments).
archive=$(fetch "$HOROVOD_URL" "$HOROVOD_SHA256")
src=$(unpack "$archive")
# 0.28.1 sets the standard twice: the top-level CMakeLists and horovod/torch/CMakeLists.txt.
for cm in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
  if [ -f "$cm" ]; then sed -i -E 's/(CMAKE_CXX_STANDARD[[:space:]]+)1[14]\b/\117/' "$cm"; fi
done
grep -q 'CMAKE_CXX_STANDARD 17' "$src/CMakeLists.txt" || die "could not raise Horovod's C++ standard to 17"
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
"$py" -c "import horovod, ${mod} as hvd; print('horovod', horovod.__version__, 'mpi', hvd.mpi_built()); assert hvd.mpi_built()"
