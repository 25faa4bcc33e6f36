"""TensorFlow/Keras ResNet-50 on synthetic ImageNet-shaped data: images/s (CARAML's ResNet-50).

Multi-worker through Horovod (`--strategy horovod`, where the image has it) or
MultiWorkerMirroredStrategy with Slurm's cluster resolver (`--strategy mwms`); `auto` picks Horovod
when importable and several ranks run, else MWMS under Slurm, else a single worker. Prints per-step
lines and a total in tf_cnn_benchmarks' format (`total images/sec: X`), global over all workers.
"""

import argparse
import os
import statistics
import time


def pick_strategy(name, world):
    import tensorflow as tf
    if name == "auto":
        try:
            import horovod.tensorflow.keras  # noqa: F401
            name = "horovod" if world > 1 else "single"
        except ImportError:
            name = "mwms" if world > 1 else "single"
    if name == "horovod":
        import horovod.tensorflow.keras as hvd
        hvd.init()
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
        return name, None, hvd
    if name == "mwms":
        if os.environ.get("SLURM_STEP_NODELIST") and "TF_CONFIG" not in os.environ:
            resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
                port_base=int(os.environ.get("HPCAI_TF_PORT_BASE", "15000")))
        else:
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return name, tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver), None
    return "single", tf.distribute.get_strategy(), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=64, help="per worker")
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
    global_batch = args.batch_size * (workers if kind == "mwms" else 1)
    shape = (args.image_size, args.image_size, 3)
    images = tf.random.uniform((args.batch_size,) + shape)
    labels = tf.random.uniform((args.batch_size,), maxval=1000, dtype=tf.int32)
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    if kind == "mwms":
        data = tf.data.Dataset.from_tensors((tf.random.uniform((global_batch,) + shape),
                                             tf.random.uniform((global_batch,), maxval=1000, dtype=tf.int32))).repeat()
        opts = tf.data.Options()
        opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        data = data.with_options(opts)

    def build():
        model = tf.keras.applications.ResNet50(weights=None, input_shape=shape, classes=1000)
        opt = tf.keras.optimizers.SGD(0.01, momentum=0.9)
        if hvd:
            opt = hvd.DistributedOptimizer(opt)
        model.compile(optimizer=opt, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=False))
        return model

    if strategy is not None and kind != "single":
        with strategy.scope():
            model = build()
    else:
        model = build()

    times = []

    class Timer(tf.keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.time()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.time() - self.start)

    callbacks = [Timer()]
    if hvd:
        callbacks.insert(0, hvd.callbacks.BroadcastGlobalVariablesCallback(0))
    if rank == 0:
        print("tf-resnet50: TensorFlow %s, strategy %s, %d worker(s), batch %d per worker, image %dx%d, %s, synthetic data"
              % (tf.__version__, kind, workers, args.batch_size, args.image_size, args.image_size, args.precision),
              flush=True)
    model.fit(data, steps_per_epoch=args.warmup + args.steps, epochs=1, callbacks=callbacks,
              verbose=0)
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
