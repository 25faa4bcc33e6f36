"""hpcai: build AI container images for supercomputers and launch them correctly."""

__version__ = "0.1.0"
