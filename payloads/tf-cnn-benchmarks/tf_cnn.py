"""CARAML's tf_cnn_benchmarks (chelseajohn/tf_cnn_benchmarks, baked unmodified) on today's TensorFlow.

Usage: tf_cnn.py --src DIR --out DIR --batch-size B [--global-batch-size G] … -- TF_CNN_BENCHMARKS_FLAGS…
(--src: the fork's scripts/tf_cnn_benchmarks, where install.sh put it: $HPCAI_PREFIX/share)

The benchmark's own files run as they are (their sha256 is pinned in components.toml); what the
fork needs from a TensorFlow newer than it was written for is supplied here, before it starts,
each item one change:

1. TF_USE_LEGACY_KERAS=1: TensorFlow >= 2.16 ships Keras 3, in which `tf.nn.rnn_cell` (imported by
   its deepspeech model at start-up) does not exist; the image has tf-keras (Keras 2) for it.
2. `tensorflow.python.ops.variables.VariableV1`: moved to `variable_v1` (TensorFlow 2.14); the
   synthetic input variable of models/model.py is made with it. Aliased back.
3. `tf_keras.legacy_tf_layers`: TensorFlow's `tf.layers` shims import it by that name, tf-keras
   keeps it under `tf_keras.src.legacy_tf_layers`. Aliased.
4. jpwr on a node without NVML (a CPU node, or an AMD node without ACCELERATOR=MI250/MI300X): the
   fork always measures GPU power with jpwr, whose measuring process dies on nvmlInit there and
   leaves the benchmark waiting for ever; a power method that measures nothing takes its place
   and a line says so. The per-rank power CSVs are then written with timestamps only.

Also as CARAML's JUBE step does: SLURM_PROCID/SLURM_NTASKS (the fork names its power files with
them) from hpcai's rank variables when Slurm did not set them; the power files go to --out; with
--global-batch-size G > 0 the batch per device is int(G / ranks), CARAML's
batch_size_per_device.
"""

import argparse
import importlib
import os
import runpy
import sys

LEGACY_LAYERS = ("", ".base", ".convolutional", ".core", ".normalization", ".pooling",
                 ".variable_scope_shim", ".migration_utils")


def world():
    for name in ("SLURM_NTASKS", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


def rank():
    for name in ("SLURM_PROCID", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def per_device_batch(batch_size, global_batch_size, devices):
    """CARAML's batch_size_per_device = int(global_batch_size / total_devices) when G > 0."""
    if global_batch_size > 0:
        per = global_batch_size // devices
        if per < 1:
            raise SystemExit("tf-cnn-benchmarks: global_batch_size %d is below one image per device (%d devices)"
                             % (global_batch_size, devices))
        return per
    return batch_size


def legacy_keras():
    from tensorflow.python.ops import variable_v1, variables

    if not hasattr(variables, "VariableV1"):
        variables.VariableV1 = variable_v1.VariableV1
    try:
        importlib.import_module("tf_keras.legacy_tf_layers")
    except ImportError:
        for part in LEGACY_LAYERS:
            sys.modules["tf_keras.legacy_tf_layers" + part] = importlib.import_module(
                "tf_keras.src.legacy_tf_layers" + part)


def variable_update(asked):
    """auto: Horovod for several ranks (CARAML's --variable_update horovod), else parameter_server
    (one process); several ranks need Horovod, or they would run unconnected copies."""
    if asked != "auto":
        return asked
    if world() == 1:
        return "parameter_server"
    try:
        importlib.import_module("horovod.tensorflow")
    except ImportError as exc:
        raise SystemExit("tf-cnn-benchmarks: %d ranks need Horovod (variable_update=horovod), which this image "
                         "lacks (%s): build it with --horovod 1, or run one rank" % (world(), exc))
    return "horovod"


class NoPower:
    """A jpwr power method that measures nothing (jpwr's init/measure/finalize protocol)."""

    def init(self, power_value_dict):
        pass

    def measure(self, power_value_dict):
        pass

    def finalize(self, power_value_dict):
        return {}


def power_methods_that_work():
    """Keep jpwr's GPU method where it can start; replace it where it cannot (see 4. above)."""
    amd = os.environ.get("ACCELERATOR") in ("MI250", "MI300X")  # the fork's own test
    module = "jpwr.gpu.rocm" if amd else "jpwr.gpu.pynvml"
    try:
        method = importlib.import_module(module)
        method.power().init({})
    except Exception as exc:  # ImportError, NVMLError, …: whatever stops jpwr's measuring process
        print("tf-cnn-benchmarks: jpwr %s cannot measure here (%s): no GPU power is recorded"
              % (module, str(exc).strip() or type(exc).__name__), flush=True)
        stub = type(sys)(module)
        stub.power = NoPower
        sys.modules[module] = stub


def main(argv):
    ours, flags = _split(argv)
    p = argparse.ArgumentParser(prog="tf_cnn.py")
    p.add_argument("--src", required=True, help="the fork's scripts/tf_cnn_benchmarks folder")
    p.add_argument("--out", required=True, help="where its per-rank power CSVs go")
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--global-batch-size", type=int, default=0)
    p.add_argument("--device", choices=("auto", "gpu", "cpu"), default="auto")
    p.add_argument("--data-format", choices=("auto", "NCHW", "NHWC"), default="auto")
    p.add_argument("--variable-update", default="auto")
    p.add_argument("--accelerator", default="")
    args = p.parse_args(ours)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # before TensorFlow is imported
    os.environ.setdefault("SLURM_PROCID", str(rank()))
    os.environ.setdefault("SLURM_NTASKS", str(world()))
    batch = per_device_batch(args.batch_size, args.global_batch_size, world())
    import tensorflow as tf

    device = args.device
    if device == "auto":
        device = "gpu" if tf.config.list_physical_devices("GPU") else "cpu"
    data_format = args.data_format if args.data_format != "auto" else ("NCHW" if device == "gpu" else "NHWC")
    update = variable_update(args.variable_update)
    if args.accelerator:
        os.environ["ACCELERATOR"] = args.accelerator
    os.environ.setdefault("ACCELERATOR", device.upper())
    legacy_keras()
    power_methods_that_work()
    os.makedirs(args.out, exist_ok=True)
    os.chdir(args.out)
    script = os.path.join(args.src, "tf_cnn_benchmarks.py")
    sys.path.insert(0, args.src)
    # CARAML's: one GPU per rank (--num_gpus 1), the ranks joined by Horovod
    sys.argv = [script, "--batch_size=%d" % batch, "--device=" + device, "--data_format=" + data_format,
                "--variable_update=" + update, *(["--num_gpus=1"] if device == "gpu" else []), *flags]
    print("tf-cnn-benchmarks: %s %s" % (os.path.basename(script), " ".join(sys.argv[1:])), flush=True)
    runpy.run_path(script, run_name="__main__")


def _split(argv):
    """Our options, then the benchmark's flags after `--`."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    return argv[:i], argv[i + 1:]


if __name__ == "__main__":
    main(sys.argv[1:])
