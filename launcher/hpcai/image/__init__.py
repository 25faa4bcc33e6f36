"""The BUILD pipeline: an image spec (flavor, options, pinned components, payloads) rendered into a
Dockerfile and an Apptainer definition, built with Docker or Podman, converted to a SIF.

spec.py (ImageSpec) -> render.py (pure) -> context.py (the build folder) -> build.py -> sif.py
"""
