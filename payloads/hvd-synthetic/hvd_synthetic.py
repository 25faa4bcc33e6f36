"""Horovod's synthetic benchmark for PyTorch and TensorFlow 2, in Horovod's output format.

Follows examples/pytorch/pytorch_synthetic_benchmark.py and
examples/tensorflow2/tensorflow2_synthetic_benchmark.py: warm-up batches, then `num_iters`
timings of `num_batches_per_iter` steps each; prints `Iter #i: X img/sec per GPU|CPU`,
`Img/sec per GPU|CPU: mean +-1.96σ` and `Total img/sec on N GPU(s)|CPU(s): …` on rank 0.
The framework is the image's (HPCAI_FRAMEWORK) unless --framework says otherwise. Models come
from torchvision / keras.applications; `convnet` is a small built-in network for CPU runs.
"""

import argparse
import os
import timeit


def log(hvd, text):
    if hvd.rank() == 0:
        print(text, flush=True)


def report(hvd, args, device, step):
    log(hvd, "Model: %s" % args.model)
    log(hvd, "Batch size: %d" % args.batch_size)
    log(hvd, "Number of %ss: %d" % (device, hvd.size()))
    log(hvd, "Running warmup...")
    timeit.timeit(step, number=args.num_warmup_batches)
    log(hvd, "Running benchmark...")
    rates = []
    for x in range(args.num_iters):
        seconds = timeit.timeit(step, number=args.num_batches_per_iter)
        rate = args.batch_size * args.num_batches_per_iter / seconds
        log(hvd, "Iter #%d: %.1f img/sec per %s" % (x, rate, device))
        rates.append(rate)
    mean = sum(rates) / len(rates)
    conf = 1.96 * (sum((r - mean) ** 2 for r in rates) / len(rates)) ** 0.5  # 95 % band, like numpy std
    log(hvd, "Img/sec per %s: %.1f +-%.1f" % (device, mean, conf))
    log(hvd, "Total img/sec on %d %s(s): %.1f +-%.1f" % (hvd.size(), device, hvd.size() * mean, hvd.size() * conf))


def run_pytorch(args):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import horovod.torch as hvd

    hvd.init()
    cuda = torch.cuda.is_available() and not args.no_cuda
    if cuda:
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    if args.model == "convnet":
        model = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                              nn.Conv2d(64, 128, 3, 2, 1), nn.ReLU(), nn.Conv2d(128, 256, 3, 2, 1),
                              nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 1000))
    else:
        import torchvision
        model = getattr(torchvision.models, args.model)()
    if cuda:
        model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.LongTensor(args.batch_size).random_() % 1000
    if cuda:
        data, target = data.cuda(), target.cuda()

    def step():
        optimizer.zero_grad()
        F.cross_entropy(model(data), target).backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()

    report(hvd, args, "GPU" if cuda else "CPU", step)


def run_tensorflow(args):
    import tensorflow as tf
    import horovod.tensorflow as hvd

    hvd.init()
    gpus = tf.config.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus and not args.no_cuda:
        tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    shape = (args.image_size, args.image_size, 3)
    if args.model == "convnet":
        model = tf.keras.Sequential([tf.keras.Input(shape), tf.keras.layers.Conv2D(64, 7, 2, activation="relu"),
                                     tf.keras.layers.Conv2D(128, 3, 2, activation="relu"),
                                     tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(1000)])
    else:
        names = {"resnet50": "ResNet50", "resnet101": "ResNet101"}
        model = getattr(tf.keras.applications, names.get(args.model, args.model))(weights=None, input_shape=shape)
    opt = tf.keras.optimizers.SGD(0.01)
    data = tf.random.uniform([args.batch_size] + list(shape))
    target = tf.random.uniform([args.batch_size, 1], minval=0, maxval=999, dtype=tf.int64)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    first = [True]

    @tf.function
    def train_step(first_batch):
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(data, training=True))
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if first_batch:  # after the first step the variables exist; rank 0's win
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)

    def step():
        train_step(first[0])
        first[0] = False

    report(hvd, args, "GPU" if gpus and not args.no_cuda else "CPU", step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--framework", default=os.environ.get("HPCAI_FRAMEWORK", "auto"),
                    choices=["auto", "pytorch", "tensorflow"])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--num-warmup-batches", type=int, default=10)
    ap.add_argument("--num-batches-per-iter", type=int, default=10)
    ap.add_argument("--num-iters", type=int, default=10)
    ap.add_argument("--fp16-allreduce", action="store_true")
    ap.add_argument("--no-cuda", action="store_true")
    args = ap.parse_args()
    framework = args.framework
    if framework == "auto":
        try:
            import horovod.torch  # noqa: F401
            framework = "pytorch"
        except ImportError:
            framework = "tensorflow"
    run_pytorch(args) if framework == "pytorch" else run_tensorflow(args)


if __name__ == "__main__":
    main()
