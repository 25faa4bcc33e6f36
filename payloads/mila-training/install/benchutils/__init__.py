"""The parts of benchutils that the Mila training suite (mila-iqia/training @224a69c3) imports,
written for hpcai from how that suite uses them and from its README's documented behaviour.

Mila's `common/perf` imports benchutils from Pierre Delaunay's GitHub repository (`master`, in its
requirements.txt), which is neither on PyPI nor in our source mirror. These modules provide what
`perf` calls, with the semantics Mila's reports depend on:

- arguments.get_arguments: --repeat (100), --number (10) and --report (none) added to the
  benchmark's parser; show=True prints each argument as Mila's stdout example shows.
- chrono.MultiStageChrono: `with chrono.time('train')` times a block, calling `sync` before
  the start and before the end (torch.cuda.synchronize on GPUs), and keeps a StatStream per name;
  to_dict() gives each stream's avg, min, max, sd, count and unit.
- statstream.StatStream: the first `drop_first_obs` observations are warm-up (see its docstring).
- versioning.get_file_version: a version of a benchmark's script, its content's sha256.
"""
