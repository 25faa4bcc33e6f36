"""The run history: every run record indexed into one SQLite file, so a payload's series over
weeks and image rebuilds is one query (issue 30).

The database is an index, never the truth: the records are. It is made on first use
(`$HPCAI_RESULTS_DB`, else `${XDG_DATA_HOME:-~/.local/share}/hpcai/history.sqlite`), filled by
`index()` (every launch indexes its own record; `hpcai results index DIR…` the folders it is
given) and can always be rebuilt from the records: a file that is not a database, or a damaged
one, is moved aside and made again, with one warning; nothing that launches ever fails on it.

Indexing is idempotent: a record is keyed by its folder's real path and re-read only when one of
its files changed (their newest mtime_ns is kept). Writers run in WAL mode with a busy timeout,
each record in its own transaction, so concurrent launches and an `index` of the same folder
never lose or duplicate a row. The schema is versioned by SQLite's `user_version`: each
migration in MIGRATIONS runs once, in order; a database from a newer hpcai is refused (one line)
rather than rewritten.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcai import record
from hpcai.errors import HpcaiError, UsageError
from hpcai.labels import COMPONENT, PREFIX

DB_ENV = "HPCAI_RESULTS_DB"
BUSY_MS = 30_000
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: runs and their metrics
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            run_dir TEXT NOT NULL UNIQUE,   -- the record folder's real path
            name TEXT NOT NULL, payload TEXT NOT NULL, site TEXT NOT NULL, partition TEXT NOT NULL,
            state TEXT NOT NULL, started TEXT NOT NULL, ended TEXT NOT NULL,
            nodes INTEGER NOT NULL, ranks INTEGER NOT NULL, runtime TEXT NOT NULL, backend TEXT NOT NULL,
            image TEXT NOT NULL, image_digest TEXT NOT NULL,
            labels TEXT NOT NULL,           -- JSON: the image's hpcai.* labels
            components TEXT NOT NULL,       -- JSON: component -> version (hpcai.component.* labels)
            env TEXT NOT NULL,              -- JSON: the container environment of the plan (redacted)
            payload_vars TEXT NOT NULL,     -- JSON: var=value as given
            job_id TEXT NOT NULL, hpcai_version TEXT NOT NULL, git_sha TEXT NOT NULL,
            error TEXT NOT NULL,            -- why the record has no metrics, or ''
            mtime_ns INTEGER NOT NULL       -- the newest of its files when read: re-read when newer
        )""",
        """CREATE TABLE metrics (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            name TEXT NOT NULL, value REAL, unit TEXT NOT NULL, better TEXT NOT NULL,
            headline INTEGER NOT NULL,
            PRIMARY KEY (run_id, name)
        )""",
        "CREATE INDEX runs_by_payload ON runs (payload, site, started)",
    ),
    (  # 2: the Slurm cluster a job ran on (multi-cluster sites, `submit --clusters`); '' outside one
        "ALTER TABLE runs ADD COLUMN cluster TEXT NOT NULL DEFAULT ''",
    ),
)
VERSION = len(MIGRATIONS)


def default_path() -> Path:
    """$HPCAI_RESULTS_DB, else under XDG_DATA_HOME. `off` (launches index nothing) names no file."""
    if os.environ.get(DB_ENV, "").lower() == "off":
        raise UsageError(f"{DB_ENV}=off: the run history is switched off; give --db FILE, or unset {DB_ENV}")
    if os.environ.get(DB_ENV):
        return Path(os.environ[DB_ENV])
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "hpcai" / "history.sqlite"


def connect(path: Path | None = None) -> sqlite3.Connection:
    """The database at PATH, made or migrated to VERSION. A damaged one is moved aside (kept, for a
    look) and made again: the records rebuild it."""
    path = path or default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _open(path)
    except sqlite3.OperationalError as exc:  # locked past the timeout, or a file it cannot open: not damage
        raise HpcaiError(f"{path}: the history database cannot be used: {exc}") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", a malformed image: damage
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d%H%M%S')}-{os.getpid()}")
        os.replace(path, aside)
        for suffix in ("-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        from hpcai.output import warn

        warn(f"{path} was damaged ({exc}); moved to {aside.name} and made again: `hpcai results index` "
             "refills it from the records")
        return _open(path)


def _open(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    version = db.execute("PRAGMA user_version").fetchone()[0]  # reading it checks the file is a database
    if version > VERSION:
        db.close()
        raise HpcaiError(f"{path}: a history database of a newer hpcai (schema {version}, this one reads up to "
                         f"{VERSION}); use that hpcai, or set {DB_ENV} to another file")
    if version < VERSION:
        _use_wal(db)
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]  # another writer may have migrated
            for step in MIGRATIONS[version:]:
                for statement in step:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return db


def _use_wal(db: sqlite3.Connection) -> None:
    """WAL, so concurrent launches write while others read. Switching a new file to it takes an
    exclusive lock, and SQLite answers "database is locked" at once, without waiting out the busy
    timeout, to the second of two processes switching together (it holds a shared lock the first
    one waits on): tried again until that timeout. Six processes opening one new file saw it in a
    round of three."""
    deadline = time.monotonic() + BUSY_MS / 1000
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _newest_mtime(run_dir: Path) -> int:
    newest = 0
    for name in (record.PLAN, record.STATUS, record.METRICS):
        try:
            newest = max(newest, (run_dir / name).stat().st_mtime_ns)
        except OSError:
            pass
    return newest


def _row(rec, mtime_ns: int) -> dict[str, Any]:
    plan, status = rec.plan, rec.status
    labels = {k: str(v) for k, v in (plan.get("image_labels") or {}).items() if str(k).startswith(PREFIX)}
    return {
        "run_dir": os.path.realpath(rec.path), "name": rec.path.name, "payload": rec.payload,
        "site": str(plan.get("site") or "local"), "partition": str(plan.get("partition") or ""),
        "cluster": str(plan.get("cluster") or ""), "state": rec.state, "started": str(status.get("started") or ""), "ended": str(status.get("ended") or ""),
        "nodes": rec.nodes, "ranks": rec.ranks, "runtime": str(plan.get("runtime") or ""),
        "backend": str(plan.get("backend") or ""), "image": str(plan.get("image") or ""),
        "image_digest": str(plan.get("image_digest") or ""), "labels": json.dumps(labels, sort_keys=True),
        "components": json.dumps({k[len(COMPONENT):]: v for k, v in labels.items() if k.startswith(COMPONENT)},
                                 sort_keys=True),
        "env": json.dumps(plan.get("env") or {}, sort_keys=True),
        "payload_vars": json.dumps(plan.get("payload_vars") or {}, sort_keys=True),
        "job_id": str(plan.get("job_id") or ""), "hpcai_version": str(plan.get("hpcai_version") or ""),
        "git_sha": str(plan.get("git_sha") or ""), "error": rec.error or "", "mtime_ns": mtime_ns,
    }


@dataclass
class Indexed:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: tuple[str, ...] = ()


def index(paths: Iterable[Path], db: sqlite3.Connection) -> Indexed:
    """Index the records in PATHS (folders of records, or records); each in its own transaction."""
    from hpcai.results.loading import CorruptRecord, discover, load

    done = Indexed()
    skipped = []
    for run_dir in discover(list(paths)):
        mtime_ns = _newest_mtime(run_dir)
        have = db.execute("SELECT id, mtime_ns FROM runs WHERE run_dir = ?",
                          (os.path.realpath(run_dir),)).fetchone()
        if have and have[1] == mtime_ns:
            done.unchanged += 1
            continue
        try:
            rec = load(run_dir)
        except CorruptRecord as exc:
            skipped.append(f"skipped {run_dir}: {exc}")
            continue
        _store(db, _row(rec, mtime_ns), rec)
        done.updated += bool(have)
        done.added += not have
    done.skipped = tuple(skipped)
    return done


def _store(db: sqlite3.Connection, row: dict[str, Any], rec) -> None:
    columns = ", ".join(row)
    updates = ", ".join(f"{k} = excluded.{k}" for k in row if k != "run_dir")
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(f"INSERT INTO runs ({columns}) VALUES ({', '.join('?' * len(row))}) "  # noqa: S608 - fixed names
                   f"ON CONFLICT(run_dir) DO UPDATE SET {updates}", tuple(row.values()))
        run_id = db.execute("SELECT id FROM runs WHERE run_dir = ?", (row["run_dir"],)).fetchone()[0]
        db.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
        for m in rec.result.metrics if rec.result else ():
            db.execute("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?)",
                       (run_id, m.name, m.value if m.measured else None, m.unit, m.better, int(m.headline)))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def index_quietly(run_dir: Path) -> str:
    """A launch's own record into the history; never raises (the record is what counts): the
    reason it was not indexed, or ""."""
    try:
        db = connect()
        try:
            index([run_dir], db)
        finally:
            db.close()
    except Exception as exc:  # noqa: BLE001 - the history is an index, rebuilt from the records
        return f"the run history was not updated ({' '.join(str(exc).split())[:200]}); `hpcai results index` adds it"
    return ""


@dataclass(frozen=True)
class Point:
    started: str
    name: str
    site: str
    nodes: int
    ranks: int
    image_digest: str
    state: str
    values: dict[str, float | None]
    units: dict[str, str]
    cluster: str = ""  # the Slurm cluster of a multi-cluster site ('' outside one)

    @property
    def where(self) -> str:
        """The site, and the cluster where there is one: `jedi on beta`."""
        return f"{self.site} on {self.cluster}" if self.cluster else self.site


def point_of(rec) -> Point:
    """A record as one point of its payload's series (what `series` reads back from the database)."""
    metrics = [m for m in (rec.result.metrics if rec.result else ()) if m.measured]
    return Point(str(rec.status.get("started") or ""), rec.path.name, str(rec.plan.get("site") or "local"), rec.nodes,
                 rec.ranks, str(rec.plan.get("image_digest") or ""), rec.state,
                 {m.name: m.value for m in metrics}, {m.name: m.unit for m in metrics}, str(rec.plan.get("cluster") or ""))


QUERY_PREFIX = "history:"
QUERY_KEYS = {"site": "site = ?", "cluster": "cluster = ?", "image": "image_digest LIKE ? || '%'",
              "since": "started >= ?", "until": "started < ?", "state": "state = ?"}
QUERY_SHAPE = "history:PAYLOAD[,site=S][,cluster=C][,image=DIGEST-PREFIX][,since=DATE][,until=DATE][,state=S]"


def query_dirs(db: sqlite3.Connection, spec: str) -> list[Path]:
    """The record folders a history query names, oldest first: QUERY_SHAPE, e.g.
    `history:ddp-bench,site=jedi,image=sha256:ab12` (dates as the records write them, 2026-11-27)."""
    payload, *filters = spec[len(QUERY_PREFIX):].split(",")
    where, args = ["payload = ?"], [payload]
    for item in filters:
        key, sep, value = item.partition("=")
        if not sep or key not in QUERY_KEYS or not value:
            raise UsageError(f"query {spec!r}: {item!r} is not one of {', '.join(f'{k}=…' for k in QUERY_KEYS)} "
                             f"({QUERY_SHAPE})")
        where.append(QUERY_KEYS[key])
        args.append(value)
    if not payload:
        raise UsageError(f"query {spec!r}: no payload ({QUERY_SHAPE})")
    rows = db.execute(f"SELECT run_dir FROM runs WHERE {' AND '.join(where)} ORDER BY started, name", args)  # noqa: S608
    return [Path(r[0]) for r in rows]


def run_dirs(db: sqlite3.Connection, payload: str, site: str | None = None) -> list[Path]:
    """The record folders the history holds for PAYLOAD (on SITE), oldest first."""
    query, args = "SELECT run_dir FROM runs WHERE payload = ?", [payload]
    if site:
        query, args = query + " AND site = ?", [payload, site]
    return [Path(r[0]) for r in db.execute(query + " ORDER BY started, name", args)]


def series(db: sqlite3.Connection, payload: str, site: str | None = None,
           metrics: list[str] | None = None) -> list[Point]:
    """PAYLOAD's runs (on SITE), oldest first, with their metrics (only METRICS where named)."""
    query = "SELECT id, started, name, site, nodes, ranks, image_digest, state, cluster FROM runs WHERE payload = ?"
    args: list[Any] = [payload]
    if site:
        query += " AND site = ?"
        args.append(site)
    points = []
    for run_id, started, name, run_site, nodes, ranks, digest, state, cluster in db.execute(
            query + " ORDER BY started, name", args):
        rows = db.execute("SELECT name, value, unit FROM metrics WHERE run_id = ? ORDER BY headline DESC, name",
                          (run_id,)).fetchall()
        chosen = [r for r in rows if not metrics or r[0] in metrics]
        points.append(Point(started, name, run_site, nodes, ranks, digest, state,
                            {r[0]: r[1] for r in chosen}, {r[0]: r[2] for r in chosen}, cluster))
    return points


def metric_names(db: sqlite3.Connection, payload: str) -> list[str]:
    return [r[0] for r in db.execute("SELECT DISTINCT m.name FROM metrics m JOIN runs r ON r.id = m.run_id "
                                     "WHERE r.payload = ? ORDER BY m.name", (payload,))]
