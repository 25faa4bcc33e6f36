"""hpcai's sanity payload (payloads/sanity/sanity.py): `hpcai-sanity: rank=N key=value …` lines.

Every rank prints four lines (identity and rendezvous, GPU, libfabric, MPI). Metrics:
`ranks_reporting` (distinct ranks seen, headline) and `ranks_missing` (world_size minus those,
lower is better). Details keep every rank's fields, e.g. which libfabric file each rank mapped.
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import LogLines, nothing_found

ROWS = ("ranks",)
MAX_RANKS = 1 << 16  # ranks kept: more than any machine runs, memory still bounded
MAX_FIELDS = 64  # fields kept per rank (it prints about a dozen)
_LINE = re.compile(r"hpcai-sanity: rank=(\d+) (.*)$")
# values may hold spaces (a GPU name); a key starts a new field
_FIELD = re.compile(r"(\w+)=(.*?)(?=\s+\w+=|$)")


def parse(log: LogLines) -> ParseResult:
    ranks: dict[int, dict[str, str]] = {}
    left_out = 0
    for line in log:
        if (m := _LINE.search(line)):
            rank = int(m.group(1))
            if rank not in ranks and len(ranks) >= MAX_RANKS:
                left_out += 1
                continue
            fields = ranks.setdefault(rank, {})
            rest = m.group(2)
            if rest.startswith("gpu="):  # the GPU description is free text and may hold '='
                fields["gpu"] = rest[4:].strip()
            else:
                for key, value in _FIELD.findall(rest):
                    if key in fields or len(fields) < MAX_FIELDS:  # more names than a rank prints: noise
                        fields[key] = value.strip()
    if not ranks:
        raise nothing_found("sanity", "'hpcai-sanity: rank=N …' lines", log)
    world = max((int(f["world_size"]) for f in ranks.values() if re.fullmatch(r"[0-9]+", f.get("world_size", ""))),
                default=len(ranks))
    missing = max(world - len(ranks), 0)
    metrics = [Metric("ranks_reporting", len(ranks), "ranks", HIGHER, headline=True),
               Metric("ranks_missing", missing, "ranks", LOWER)]
    warnings = [f"{missing} of {world} ranks printed nothing"] if missing else []
    if left_out:
        warnings.append(f"{left_out} lines of ranks beyond the first {MAX_RANKS} ranks are left out")
    hosts = sorted({f.get("host", "?") for f in ranks.values()})
    return ParseResult("sanity", metrics, {"world_size": world, "hosts": hosts,
                                           "ranks": {str(k): v for k, v in sorted(ranks.items())}}, warnings)
