"""Port the Mila training suite (mila-iqia/training @224a69c3, 2019) to today's Python and PyTorch.

Usage: port.py SRC   (the unpacked repository; run once, at image build)

Each change is the smallest edit that makes the upstream line run, and each is checked: an edit
whose original text is not found stops the build (the pinned archive is checksummed, so this only
fires when the pin moves). Nothing about timing, batches or reports changes. CHANGES lists
each edit with its reason; the build prints them.
"""

from __future__ import annotations

import sys
from pathlib import Path

CHANGES = [
    ("run.py", "    env['RUN_ID'] = opt.uid\n", "    env['RUN_ID'] = str(opt.uid)\n",
     "os.environ takes strings only: run.py failed every job with TypeError on Python 3"),
    ("common/perf/arguments.py", "args['run_id'] = os.getenvb('RUN_ID', 0)", "args['run_id'] = os.getenv('RUN_ID', 0)",
     "os.getenvb needs a bytes key, and its bytes value cannot go into the JSON report: every report failed"),
    ("run.py", "device_count = torch.cuda.device_count()\n", "device_count = torch.cuda.device_count() or 1\n",
     "with no GPU, run.py started one copy per GPU, that is none: on CPUs one copy runs"),
    ("run.py", "env['JOB_FILE'] = opt.jobs.split('.')[0]\n",
     "env['JOB_FILE'] = os.path.basename(opt.jobs).split('.')[0]\n",
     "the report is named after the jobs file: a jobs file outside the repository (hpcai writes one per run) "
     "gave a path inside the report's folder"),
    ("time_sequence_prediction/lstm/pytorch/train.py", "data = torch.load(data_folder + '/traindata.pt')",
     "data = torch.load(data_folder + '/traindata.pt', weights_only=False)",
     "torch.load defaults to weights_only=True since PyTorch 2.6, which refuses the numpy array "
     "generate_sine_wave.py saves"),
    ("reinforcement/cart_pole/pytorch/reinforce.py", "import gym\n", "import gymnasium as gym\n",
     "gym 0.12 (Mila's pin) does not install on today's Python; gymnasium is its maintained "
     "successor, with CartPole-v0"),
    ("reinforcement/cart_pole/pytorch/reinforce.py", "env.seed(args.seed)\n", "env.reset(seed=args.seed)\n",
     "gymnasium seeds an environment at reset; env.seed is gone"),
    ("reinforcement/cart_pole/pytorch/reinforce.py", "state, ep_reward = env.reset(), 0",
     "state, ep_reward = env.reset()[0], 0", "gymnasium's reset returns (observation, info)"),
    ("reinforcement/cart_pole/pytorch/reinforce.py", "state, reward, done, _ = env.step(action)",
     "state, reward, done, truncated, _ = env.step(action); done = done or truncated",
     "gymnasium's step returns (observation, reward, terminated, truncated, info)"),
    ("config.env", "    sync; sysctl vm.drop_caches=3 > /dev/null 2>&1\n",
     "    sync; sysctl vm.drop_caches=3 > /dev/null 2>&1 || true\n",
     "compute_resource.sh sets -e, so a sysctl that is missing (no procps in the image) or refused "
     "(not root, a container's read-only /proc/sys) ended every job before its script ran"),
    ("recommendation/neural_collaborative_filtering/pytorch/run.sh",
     "    $EXEC python $SCRIPT_PATH/convert.py $DATA_DIRECTORY/ml-20m/ratings.csv $DATA_DIRECTORY/ml-20m "
     "--negatives 999\n",
     "    python $SCRIPT_PATH/convert.py $DATA_DIRECTORY/ml-20m/ratings.csv $DATA_DIRECTORY/ml-20m "
     "--negatives 999 $(printf '%s\\n' \"$@\" | grep -x -- --no-cuda)\n",
     "config.env sets EXEC=exec, so a first run that converted MovieLens ended with the conversion and "
     "never trained; and the conversion synced CUDA on a CPU run (it now gets the job's --no-cuda)"),
    ("natural_language_processing/rnn_translator/pytorch/seq2seq/train/trainer.py",
     "        self.number = 10\n", "        self.number = number\n",
     "the trainer ignored --number (always 10) while the report counts --number batches per "
     "observation: any other number gave a wrong items/s (fast.json's 10 is unchanged)"),
]


def port_one(src: Path, change: tuple[str, str, str, str]) -> None:
    rel, old, new, why = change
    path = src / rel
    text = path.read_text()
    if old not in text or new in text:  # every occurrence is changed (reset() is called twice)
        sys.exit(f"port.py: {rel}: expected {old.strip()!r} ({why})")
    path.write_text(text.replace(old, new))
    print(f"port.py: {rel}: {why}")


def port(src: Path) -> None:
    for change in CHANGES:
        port_one(src, change)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: port.py SRC")
    port(Path(sys.argv[1]))
