"""Where things are inside every hpcai image: one name per path, for the build that puts them
there (the Dockerfile and def templates get them through render.py) and the launch that runs them."""

from __future__ import annotations

PREFIX = "/opt/hpcai"
ENTRYPOINT = f"{PREFIX}/bin/hpcai-entrypoint"  # entrypoints/hpcai-entrypoint: the image's ENTRYPOINT
RUNNER = f"{PREFIX}/bin/hpcai-bench"           # payloads/_runner/hpcai-bench: runs a payload by name
PAYLOADS = f"{PREFIX}/payloads"                # one folder per baked payload
VENV_PYTHON = f"{PREFIX}/venv/bin/python"      # the payloads' Python
HPC_LIBS = f"{PREFIX}/hpc-libs"                # site libraries baked in (--hpc-libs)
BUILD_DIR = "/opt/hpcai-build"                 # scripts, downloads and sources; never in the final image
