"""TensorFlow/Keras ResNet-50 on ImageNet TFRecords or synthetic data: images/s (CARAML's ResNet-50).

Multi-worker through Horovod (`--strategy horovod`, where the image has it) or
MultiWorkerMirroredStrategy with Slurm's cluster resolver (`--strategy mwms`); `auto` picks Horovod
when importable and several ranks run, else MWMS under Slurm, else a single worker. Prints per-step
lines and a total in tf_cnn_benchmarks' format (`total images/sec: X`), global over all workers.

The batch per worker is --batch-size, or with --global-batch-size G, int(G / workers) as
CARAML's resnet50_benchmark.xml computes batch_size_per_device. --data-dir names a folder of
ImageNet TFRecords as tf_cnn_benchmarks reads them (train-*-of-*: image/encoded JPEG,
image/class/label 1…1000), each worker reading its share of the files; without it the images
are random (synthetic, as CARAML's `synthetic` tag).
"""

import argparse
import contextlib
import os
import statistics
import time


def slurm_tf_config():
    """TF_CONFIG for this Slurm step: worker i listens on <its node>:<port base + i>.

    Unlike SlurmClusterResolver (port base + local index), ports are unique per step, so several
    ranks' containers sharing a network namespace or a host name cannot collide."""
    import json
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as scr

    base = int(os.environ.get("HPCAI_TF_PORT_BASE", "15000"))
    hosts = scr.expand_hostlist(os.environ["SLURM_STEP_NODELIST"])
    tasks = scr.expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"])
    workers = [h for h, n in zip(hosts, tasks) for _ in range(n)]  # block distribution
    workers = ["%s:%d" % (h, base + i) for i, h in enumerate(workers)]
    rank = int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "0")))
    return json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}})


def per_device_batch(batch_size, global_batch_size, workers):
    """CARAML's batch_size_per_device = int(global_batch_size / total_devices) when a global batch
    is given (> 0), else BATCH_SIZE per worker."""
    if global_batch_size > 0:
        return max(int(global_batch_size / workers), 1)
    return batch_size


def imagenet(data_dir, batch, image_size, shard, shards):
    """ImageNet TFRecords as tf_cnn_benchmarks reads them: JPEG decoded, resized to the image
    size, scaled to [0, 1]; labels 1…1000 made 0…999. Files split over the workers by index."""
    import tensorflow as tf
    files = tf.io.gfile.glob(os.path.join(data_dir, "train-*-of-*"))
    if not files:
        raise SystemExit("tf-resnet50: no ImageNet TFRecords (train-*-of-*) in data_dir %s" % data_dir)
    files = sorted(files)[shard::shards] or sorted(files)
    features = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record):
        example = tf.io.parse_single_example(record, features)
        image = tf.io.decode_jpeg(example["image/encoded"], channels=3)
        image = tf.image.resize(tf.cast(image, tf.float32) / 255.0, (image_size, image_size))
        return image, tf.cast(example["image/class/label"] - 1, tf.int32) % 1000

    data = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE).repeat()
    return data.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(batch, drop_remainder=True) \
        .prefetch(tf.data.AUTOTUNE)


def pick_strategy(name, world):
    import tensorflow as tf
    if name == "auto":
        try:
            import horovod.tensorflow  # noqa: F401
            name = "horovod" if world > 1 else "single"
        except ImportError:
            name = "mwms" if world > 1 else "single"
    if name == "horovod":
        import horovod.tensorflow as hvd
        hvd.init()
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
        return name, None, hvd
    if name == "mwms":
        if os.environ.get("SLURM_STEP_NODELIST") and "TF_CONFIG" not in os.environ:
            os.environ["TF_CONFIG"] = slurm_tf_config()
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return name, tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver), None
    return "single", tf.distribute.get_strategy(), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=64, help="per worker")
    ap.add_argument("--global-batch-size", type=int, default=0,
                    help="> 0: per worker int(global / workers), CARAML's rule (overrides --batch-size)")
    ap.add_argument("--data-dir", default="", help="ImageNet TFRecords (train-*-of-*); empty: synthetic")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--strategy", default="auto", choices=["auto", "horovod", "mwms", "single"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "mixed_float16", "mixed_bfloat16"])
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1")))
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))

    import tensorflow as tf
    kind, strategy, hvd = pick_strategy(args.strategy, world)
    if args.precision != "fp32":
        tf.keras.mixed_precision.set_global_policy(args.precision)
    workers = hvd.size() if hvd else (strategy.num_replicas_in_sync if kind == "mwms" else 1)
    args.batch_size = per_device_batch(args.batch_size, args.global_batch_size, workers)
    global_batch = args.batch_size * (workers if kind == "mwms" else 1)
    shape = (args.image_size, args.image_size, 3)
    images = tf.random.uniform((args.batch_size,) + shape)
    labels = tf.random.uniform((args.batch_size,), maxval=1000, dtype=tf.int32)
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    if args.data_dir:  # each worker its own files and batches (MWMS: one replica per worker)
        def real(_context=None):
            return imagenet(args.data_dir, args.batch_size, args.image_size, rank, world)
        data = real()
    elif kind == "mwms":
        data = tf.data.Dataset.from_tensors((tf.random.uniform((global_batch,) + shape),
                                             tf.random.uniform((global_batch,), maxval=1000, dtype=tf.int32))).repeat()
        opts = tf.data.Options()
        opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        data = data.with_options(opts)

    # A custom loop (strategy.run) rather than model.fit: Keras 3's fit does not accept the
    # per-replica batches MultiWorkerMirroredStrategy hands out.
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        model = tf.keras.applications.ResNet50(weights=None, input_shape=shape, classes=1000)
        opt = tf.keras.optimizers.SGD(0.01, momentum=0.9)
        loss_obj = tf.keras.losses.SparseCategoricalCrossentropy(
            reduction=tf.keras.losses.Reduction.NONE if hasattr(tf.keras.losses, "Reduction") else "none")

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_obj(y, model(x, training=True)),
                                              global_batch_size=global_batch)
        if hvd:
            tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    if kind == "mwms":
        batches = iter(strategy.distribute_datasets_from_function(real) if args.data_dir  # a worker's own
                       else strategy.experimental_distribute_dataset(data))
        train_step = tf.function(lambda x, y: strategy.reduce(
            tf.distribute.ReduceOp.SUM, strategy.run(step, args=(x, y)), axis=None))
    else:
        batches = iter(data)
        train_step = tf.function(step)
    if rank == 0:
        source = "ImageNet TFRecords from %s" % args.data_dir if args.data_dir else "synthetic data"
        print("tf-resnet50: TensorFlow %s, strategy %s, %d worker(s), batch %d per worker, image %dx%d, %s, %s"
              % (tf.__version__, kind, workers, args.batch_size, args.image_size, args.image_size, args.precision,
                 source), flush=True)
    times = []
    for i in range(args.warmup + args.steps):
        x, y = next(batches)
        start = time.time()
        train_step(x, y).numpy()  # .numpy() waits for the step to finish
        times.append(time.time() - start)
        if hvd and i == 0:  # after the first step the variables exist; rank 0's win
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)
    measured = times[args.warmup:]
    images_per_step = args.batch_size * workers
    rates = [images_per_step / t for t in measured]
    if rank == 0:
        for i in range(0, len(rates), max(1, len(rates) // 10)):
            window = rates[max(0, i - 9):i + 1]
            jitter = statistics.median([abs(r - statistics.median(window)) for r in window])
            print("%d\timages/sec: %.1f +/- %.1f (jitter = %.1f)" % (
                i + 1, rates[i], statistics.pstdev(window) if len(window) > 1 else 0.0, jitter))
        print("----------------------------------------------------------------")
        print("total images/sec: %.2f" % (images_per_step * len(measured) / sum(measured)))
        print("----------------------------------------------------------------", flush=True)


if __name__ == "__main__":
    main()
