"""hpcai's sanity payload (payloads/sanity/sanity.py): `hpcai-sanity: rank=N key=value …` lines.

Every rank prints four lines (identity and rendezvous, GPU, libfabric, MPI). Metrics:
`ranks_reporting` (distinct ranks seen, headline) and `ranks_missing` (world_size minus those,
lower is better). Details keep every rank's fields, e.g. which libfabric file each rank mapped.
"""

from __future__ import annotations

import re

from hpcai.results.metrics import HIGHER, LOWER, Metric, ParseResult
from hpcai.results.parsers.common import nothing_found, strip_prefixes

_LINE = re.compile(r"hpcai-sanity: rank=(\d+) (.*)$")
# values may hold spaces (a GPU name); a key starts a new field
_FIELD = re.compile(r"(\w+)=(.*?)(?=\s+\w+=|$)")


def parse(text: str) -> ParseResult:
    ranks: dict[int, dict[str, str]] = {}
    for line in strip_prefixes(text):
        if (m := _LINE.search(line)):
            fields = ranks.setdefault(int(m.group(1)), {})
            rest = m.group(2)
            if rest.startswith("gpu="):  # the GPU description is free text and may hold '='
                fields["gpu"] = rest[4:].strip()
            else:
                fields.update({k: v.strip() for k, v in _FIELD.findall(rest)})
    if not ranks:
        raise nothing_found("sanity", "'hpcai-sanity: rank=N …' lines", text)
    world = max((int(f["world_size"]) for f in ranks.values() if re.fullmatch(r"[0-9]+", f.get("world_size", ""))),
                default=len(ranks))
    missing = max(world - len(ranks), 0)
    metrics = [Metric("ranks_reporting", len(ranks), "ranks", HIGHER, headline=True),
               Metric("ranks_missing", missing, "ranks", LOWER)]
    warnings = [f"{missing} of {world} ranks printed nothing"] if missing else []
    hosts = sorted({f.get("host", "?") for f in ranks.values()})
    return ParseResult("sanity", metrics, {"world_size": world, "hosts": hosts,
                                           "ranks": {str(k): v for k, v in sorted(ranks.items())}}, warnings)
