"""The Slurm options hpcai sets itself, and how Slurm reads an option word.

A copy of one of them from --srun-arg, a payload profile's srun_args or a site's
srun_options/sbatch_options would contradict the plan (or, for --output/--error, put the logs
outside the record): `owned_option` says why such a word is refused. `option_name` names the
option a word sets, so a later copy of an option can replace an earlier one.
"""

from __future__ import annotations

# Slurm reads an option in three spellings, and each is checked: the long name, an abbreviation of it
# (getopt_long: `--outp` is --output when no other option starts so), and the short letter, with
# its value attached or not (`-N5`, `-o/x`, letters grouped as `-lN5`).
# long name -> the hpcai setting that decides it
SRUN_OWN = {"nodes": "--nodes", "ntasks-per-node": "--ntasks-per-node", "ntasks": "--nodes × --ntasks-per-node",
            "nodelist": "--nodelist", "cpus-per-task": "--cpus-per-task", "gpus-per-node": "--gpus-per-node",
            "gpus-per-task": "--per-gpu", "mpi": "--mpi", "kill-on-bad-exit": "one failed rank ends the step",
            "output": "the record's logs/", "error": "the record's logs/", "partition": "--partition",
            "account": "--account", "time": "--time"}
# what `hpcai submit` writes on its own #SBATCH lines (submit.sbatch_script)
SBATCH_OWN = {**{k: v for k, v in SRUN_OWN.items() if k not in ("mpi", "kill-on-bad-exit", "gpus-per-task")},
              "output": "the record's slurm-%j.out", "error": "the record's slurm-%j.out",
              "job-name": "hpcai-PAYLOAD"}
# Other srun/sbatch long options (Slurm 23-24), so that an exact name such as --gpus (which
# begins --gpus-per-node) is read as itself, as getopt_long reads it. An abbreviation that begins
# an owned name is refused even when it also begins others: Slurm refuses it as ambiguous, or a
# Slurm with fewer options reads it as the owned one.
SLURM_OTHER = frozenset((
    "accel-bind acctg-freq array batch bb bbf begin bcast bcast-exclude chdir clusters comment constraint "
    "container container-id contiguous core-spec cores-per-socket cpu-bind cpu-freq cpus-per-gpu dependency "
    "deadline delay-boot disable-status distribution epilog exact exclude exclusive export export-file "
    "extra extra-node-info get-user-env gid gpu-bind gpu-freq gpus gpus-per-socket gres gres-flags help "
    "het-group hint hold ignore-pbs immediate input jobid kill-command label licenses mail-type mail-user "
    "mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus multi-prog network nice no-allocate nodefile "
    "no-kill no-requeue ntasks-per-core ntasks-per-gpu ntasks-per-socket open-mode overcommit oversubscribe "
    "parsable power prefer priority profile prolog propagate pty qos quiet quit-on-interrupt reboot "
    "relative requeue reservation resv-ports send-libs signal sockets-per-node spread-job switches "
    "task-epilog task-prolog test-only thread-spec threads threads-per-core time-min tmp tres-bind "
    "tres-per-task uid unbuffered usage use-min-nodes verbose version wait wait-all-nodes wckey whole "
    "wrap x11").split())
# short letter -> long name; letters that take a value end a group (`-lN5`: -l, then -N 5)
_SHORT = {"A": "account", "B": "extra-node-info", "C": "constraint", "D": "chdir", "G": "gpus", "J": "job-name",
          "K": "kill-on-bad-exit", "L": "licenses", "M": "clusters", "N": "nodes", "S": "core-spec", "T": "threads",
          "W": "wait", "a": "array", "b": "begin", "c": "cpus-per-task", "d": "dependency", "e": "error",
          "i": "input", "k": "no-kill", "m": "distribution", "n": "ntasks", "o": "output", "p": "partition",
          "q": "qos", "r": "relative", "t": "time", "w": "nodelist", "x": "exclude", "I": "immediate"}
_SHORT_FLAGS = {"E": "preserve-env", "H": "hold", "O": "overcommit", "Q": "quiet", "X": "disable-status",
                "Z": "no-allocate", "h": "help", "l": "label", "s": "oversubscribe", "u": "unbuffered",
                "v": "verbose", "V": "version"}


def _long_names(word: str, owned: dict[str, str]) -> list[str]:
    """The owned long option(s) `--NAME[=V]` may mean, as getopt_long resolves it."""
    name = word[2:].partition("=")[0]
    if not name or name in SLURM_OTHER:
        return []
    if name in owned:
        return [name]
    return sorted(n for n in owned if n.startswith(name))


def _short_names(word: str, owned: dict[str, str]) -> tuple[str, list[str]]:
    """(`-N`, [its owned long name]) for the owned option a group of short letters `-lN5` holds,
    else ("", []): letters after one that takes a value are that value."""
    for letter in word[1:]:
        long = _SHORT.get(letter) or _SHORT_FLAGS.get(letter)
        if long in owned:
            return f"-{letter}", [long]
        if letter in _SHORT:
            return "", []
        # a flag, or a letter Slurm may know and we do not: read on, so an owned one after it counts
    return "", []


def owned_option(token: str, owned: dict[str, str]) -> str | None:
    """Why TOKEN (one srun/sbatch argument, or a site's option line) sets an option hpcai sets
    itself, else None: `hpcai sets --output itself (the record's logs/)`."""
    for word in token.split():
        if not word.startswith("-") or word in ("-", "--"):
            continue  # a separate value, as in ["--constraint", "gpu"]
        if word.startswith("--"):
            typed, names = word.partition("=")[0], _long_names(word, owned)
        else:
            typed, names = _short_names(word, owned)
        if not names:
            continue
        who = "; ".join(dict.fromkeys(owned[n] for n in names))
        if typed == f"--{names[0]}" and len(names) == 1:
            return f"hpcai sets {typed} itself ({who})"
        # an abbreviation several options begin (owned or not) is one Slurm refuses or may read as ours
        others = typed.startswith("--") and any(o.startswith(typed[2:]) for o in SLURM_OTHER)
        verb = "may stand for" if len(names) > 1 or others else "stands for"
        return f"hpcai sets {typed} itself ({who}; {typed} {verb} {' or '.join('--' + n for n in names)})"
    return None


def option_name(word: str) -> str:
    """The Slurm long name an option word sets, as getopt_long reads it: `--distribution=*:block`,
    `--distrib=…` (an abbreviation only one option begins) and `-m *:block` are all
    "distribution". A word it cannot name for sure (grouped short letters, an ambiguous or
    unknown abbreviation) is its own name, so only its exact repetition counts as the same."""
    if word.startswith("--"):
        name = word[2:].partition("=")[0]
        known = SLURM_OTHER | SRUN_OWN.keys() | SBATCH_OWN.keys()
        begins = [n for n in known if n.startswith(name)] if name not in known else [name]
        return begins[0] if len(begins) == 1 else word
    if len(word) >= 2 and word[0] == "-" and (word[1] in _SHORT or (len(word) == 2 and word[1] in _SHORT_FLAGS)):
        return _SHORT.get(word[1]) or _SHORT_FLAGS[word[1]]
    return word
