"""The unit tests mirror the package: image/, run/, results/ and cli/ test hpcai.image, hpcai.run,
hpcai.results and the commands, payloads/ the payload manifests and their in-image code, and the
files here the project as a whole (docs, import graph, CI rules, benchmarks, labels).

The helpers that tests in several folders share live here (plan_helpers.py: a fake host and the
launch goldens; run_records.py: run records as a launch leaves them; error_checks.py: a one-line
refusal, strict JSON), imported by module name: this folder is put on sys.path for them, as
pytest's default (prepend) import mode puts each test's own folder there. Test files have
different names in every folder, as that mode needs.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
