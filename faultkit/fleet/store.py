"""The registry's store: DuckDB (one file, the embedded default) or PostgreSQL (many agents writing at
once), behind one interface. The schema and every query are written once, in SQL both accept; only
the bulk path differs (DuckDB reads an Arrow table in place, PostgreSQL takes COPY into a staging
table), and adding an incident twice keeps one (its id is derived from the report)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..private_files import PrivateFile, private_dir
from .record import IncidentRecord

TABLE = "incidents"
_TYPES = {"seen_at": "FLOAT8", "pid": "BIGINT"}
SCHEMA = (f"CREATE TABLE IF NOT EXISTS {TABLE} ("
          + ", ".join(f"{c} {_TYPES.get(c, 'TEXT')}" + (" PRIMARY KEY" if c == "incident_id" else "")
                      for c in IncidentRecord.COLUMNS) + ")")
INDEXES = (f"CREATE INDEX IF NOT EXISTS {TABLE}_signature ON {TABLE} (signature)",
           f"CREATE INDEX IF NOT EXISTS {TABLE}_gpu ON {TABLE} (node, gpu)")
_COLS = ", ".join(IncidentRecord.COLUMNS)
_MARKS = ", ".join(["%s"] * len(IncidentRecord.COLUMNS))
INSERT = f"INSERT INTO {TABLE} ({_COLS}) VALUES ({_MARKS}) ON CONFLICT (incident_id) DO NOTHING"

# One row per signature: what it is, how often, where, when.
TOP = f"""SELECT signature, min(kernel_key), min(fault_kind), min(code), min(engine), count(*) AS incidents,
       count(DISTINCT node) AS nodes, count(DISTINCT node || '/' || coalesce(gpu, '?')) AS gpus,
       min(seen_at), max(seen_at)
FROM {TABLE} GROUP BY signature ORDER BY incidents DESC, nodes DESC, signature LIMIT %s"""
ONE = TOP.replace("GROUP BY", "WHERE signature = %s GROUP BY")
# For each GPU a signature touched: how many signatures that GPU saw, and its hardware signs.
GPU_HISTORY = f"""SELECT i.node, coalesce(i.gpu, '?'), count(DISTINCT i.signature),
       string_agg(DISTINCT nullif(i.hardware, ''), ',')
FROM {TABLE} i JOIN (SELECT DISTINCT node, coalesce(gpu, '?') AS g FROM {TABLE} WHERE signature = %s) s
  ON i.node = s.node AND coalesce(i.gpu, '?') = s.g
GROUP BY i.node, coalesce(i.gpu, '?') ORDER BY 1, 2"""
VERSIONS = f"""SELECT DISTINCT coalesce(runtime, ''), coalesce(driver, ''), coalesce(framework, ''),
       coalesce(model, '') FROM {TABLE} WHERE signature = %s ORDER BY 1, 2, 3, 4"""
CHAINS = f"""SELECT chain, count(*) FROM {TABLE} WHERE signature = %s GROUP BY chain ORDER BY 2 DESC, 1"""
BY_SIGNATURE = f"SELECT {_COLS} FROM {TABLE} WHERE signature = %s ORDER BY seen_at, incident_id"
SAME_KERNEL = f"""SELECT signature, min(fault_kind), min(code), count(*) FROM {TABLE}
WHERE kernel_key = %s AND signature <> %s GROUP BY signature ORDER BY 4 DESC, 1"""
SAME_GPU = f"""SELECT signature, min(kernel_key), min(fault_kind), count(*) FROM {TABLE}
WHERE node = %s AND coalesce(gpu, '?') = %s AND signature <> %s GROUP BY signature ORDER BY 4 DESC, 1"""
COUNT = f"SELECT count(*) FROM {TABLE}"
ALL = f"SELECT {_COLS} FROM {TABLE} ORDER BY seen_at, incident_id"


@dataclass(frozen=True)
class SignatureRow:
    signature: str
    kernel_key: str | None
    fault_kind: str | None
    code: str | None
    engine: str | None
    incidents: int
    nodes: int
    gpus: int
    first_seen: float | None
    last_seen: float | None


class RegistryError(RuntimeError):
    """The registry cannot be opened or written: a one-line reason for the user."""


def default_location() -> str:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(base) / "faultkit" / "registry.duckdb")


def open_store(db: str | None, read_only: bool = False):
    """`postgresql://...` (or `postgres://`) opens PostgreSQL; anything else is a DuckDB file.
    `read_only`: a reader (top, show, similar, export) that several may run at once."""
    db = db or os.environ.get("FAULTKIT_REGISTRY") or default_location()
    if db.startswith(("postgresql://", "postgres://")) or db.startswith("host="):
        return PostgresStore(db)
    return DuckDBStore(db, read_only=read_only)


# DuckDB takes one writing process at a time (its file lock): a second `registry add` or a reader
# while `watch --db` adds waits for the lock this long, retrying, then says so. Many writers at
# once belong in PostgreSQL.
LOCK_WAIT_S = 30.0
# Never fetch code: a --db naming another kind of file (SQLite) made DuckDB try to download an extension.
DUCKDB_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def _not_duckdb(path: str) -> str | None:
    """What an existing file is where it is not a DuckDB database (its header says `DUCK` at byte 8)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return None
    if not head or head[8:12] == b"DUCK":
        return None
    return "a SQLite database" if head.startswith(b"SQLite format 3") else "its header is not DuckDB's"


def _empty_or_absent(path: str) -> bool:
    """No registry there yet. An empty file is what a creation on a full disk left (DuckDB then
    refused it as "not a valid DuckDB database" for ever): it holds nothing, and goes."""
    try:
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            os.unlink(path)
    except OSError:
        pass
    return not os.path.exists(path)


def _drop_made(path: str, made: bool) -> None:
    """A registry this open was creating and could not finish (a full disk, a read-only folder):
    nothing of it is left behind to be refused the next time."""
    if not made:
        return
    for p in (path, path + ".wal"):
        try:
            os.unlink(p)
        except OSError:
            pass


def _duckdb_connect(path: str, read_only: bool, wait_s: float = LOCK_WAIT_S):
    import time

    import duckdb
    delay, end = 0.05, time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(path, read_only=read_only, config=DUCKDB_CONFIG)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() >= end:
                if "lock" in str(exc).lower():
                    raise RegistryError(f"the registry {path} is in use by another process (a DuckDB file takes one "
                                        f"writer at a time; waited {wait_s:.0f} s). Try again, or give many writers "
                                        f"a PostgreSQL registry (--db postgresql://...)") from None
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


class Store:
    """Shared by both stores: every query in SQL that both accept, with %s marks."""

    def _rows(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """Every query's rows, read whole: a result left unread blocks the next statement (DuckDB 2)."""
        return [tuple(r) for r in self._execute(sql, params).fetchall()]

    def add(self, records: Iterable[IncidentRecord]) -> int:
        before = self.count()
        rows = [r.row() for r in records]
        if rows:
            self._insert_rows(rows)
        return self.count() - before

    def count(self) -> int:
        return int(self._rows(COUNT)[0][0])

    def top(self, limit: int = 20) -> list[SignatureRow]:
        return [SignatureRow(*r) for r in self._rows(TOP, (limit,))]

    def signature(self, sig: str) -> SignatureRow | None:
        rows = self._rows(ONE, (sig, 1))
        return SignatureRow(*rows[0]) if rows else None

    def gpu_histories(self, sig: str) -> list[tuple[str, str, int, set]]:
        return [(n, g, int(k), set(filter(None, (hw or "").split(","))))
                for n, g, k, hw in self._rows(GPU_HISTORY, (sig,))]

    def versions(self, sig: str) -> list[tuple[str, str, str, str]]:
        return self._rows(VERSIONS, (sig,))

    def chains(self, sig: str) -> list[tuple[str, int]]:
        return [(c, int(n)) for c, n in self._rows(CHAINS, (sig,))]

    def incidents(self, sig: str) -> list[IncidentRecord]:
        return [IncidentRecord.from_row(r) for r in self._rows(BY_SIGNATURE, (sig,))]

    def same_kernel(self, key: str, sig: str) -> list[tuple]:
        return self._rows(SAME_KERNEL, (key, sig))

    def same_gpu(self, node: str, gpu: str, sig: str) -> list[tuple]:
        return self._rows(SAME_GPU, (node, gpu, sig))

    def all_rows(self) -> list[tuple]:
        return self._rows(ALL)

    def resolve(self, prefix: str) -> str | None:
        """A signature from its first characters, as `git` takes a short hash."""
        rows = self._rows(f"SELECT DISTINCT signature FROM {TABLE} WHERE substr(signature, 1, %s) = %s",
                          (len(prefix), prefix))
        return rows[0][0] if len(rows) == 1 else None


class DuckDBStore(Store):
    def __init__(self, path: str, read_only: bool = False):
        import duckdb
        if read_only and path != ":memory:" and not os.path.isfile(path):
            # a reader never makes one: `top --db typo.duckdb` made an empty registry and said 0 incidents
            raise RegistryError(f"{path}: no registry there (nothing was created); `faultkit registry add` or "
                                f"`faultkit watch --db` makes one")
        read_only = read_only and path != ":memory:"
        kind = _not_duckdb(path)
        if kind:
            raise RegistryError(f"{path}: not a DuckDB registry ({kind}); give a new file's path, a DuckDB file "
                                f"faultkit made, or a postgresql:// URL")
        made = path != ":memory:" and not read_only and _empty_or_absent(path)
        try:
            if path != ":memory:" and not read_only:
                private_dir(Path(path).parent) if not Path(path).parent.is_dir() else None
                # DuckDB creates the file and its .wal with the umask's mode: incidents name processes
                # and kernels, so the owner's alone (this process writes nothing for others to read)
                os.umask(0o077)
            self.con = _duckdb_connect(path, read_only)
        except (OSError, duckdb.Error) as exc:
            _drop_made(path, made)
            raise RegistryError(f"cannot open the registry {path}: {str(exc).splitlines()[0][:300]}") from None
        self.location = path
        if read_only:
            return
        try:
            self.con.execute(SCHEMA)
            for ix in INDEXES:
                self.con.execute(ix)
        except duckdb.Error as exc:
            self.con.close()
            _drop_made(path, made)
            raise RegistryError(f"cannot use the registry {path}: {str(exc).splitlines()[0][:300]}") from None
        if path != ":memory:":
            os.chmod(path, 0o600)

    def _execute(self, sql, params=()):
        return self.con.execute(sql.replace("%s", "?"), list(params))

    def _insert_rows(self, rows):
        self._insert_arrow(_arrow(rows))

    def _insert_arrow(self, table):
        self.con.register("staged_incidents", table)
        try:
            self.con.execute(f"INSERT INTO {TABLE} SELECT * FROM staged_incidents ON CONFLICT (incident_id) DO NOTHING")
        finally:
            self.con.unregister("staged_incidents")

    def close(self):
        self.con.close()


class PostgresStore(Store):
    def __init__(self, dsn: str):
        import psycopg
        try:
            self.con = psycopg.connect(dsn, autocommit=True, connect_timeout=10)
        except psycopg.Error as exc:
            raise RegistryError(f"cannot connect to the registry: {str(exc).strip().splitlines()[0]}") from None
        self.location = _hide_password(dsn)
        with self.con.transaction():
            self.con.execute(SCHEMA)
            for ix in INDEXES:
                self.con.execute(ix)

    def _execute(self, sql, params=()):
        return self.con.execute(sql, list(params))

    def _insert_rows(self, rows):
        # COPY into a staging table, then one INSERT that skips what another agent already added:
        # COPY alone would fail the whole batch on the first duplicate.
        with self.con.transaction():
            self.con.execute(f"CREATE TEMP TABLE IF NOT EXISTS staged_incidents (LIKE {TABLE}) ON COMMIT DELETE ROWS")
            with self.con.cursor().copy(f"COPY staged_incidents ({_COLS}) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)
            self.con.execute(f"INSERT INTO {TABLE} SELECT * FROM staged_incidents ON CONFLICT (incident_id) DO NOTHING")

    def close(self):
        self.con.close()


def _arrow(rows):
    import pyarrow as pa
    cols = list(zip(*rows)) if rows else [[] for _ in IncidentRecord.COLUMNS]
    types = {"seen_at": pa.float64(), "pid": pa.int64()}
    return pa.table({c: pa.array(list(v), type=types.get(c, pa.string()))
                     for c, v in zip(IncidentRecord.COLUMNS, cols)})


def write_parquet(store: Store, path: str) -> int:
    """Every incident, one row each, with the signature beside it: for teams that analyse elsewhere."""
    import pyarrow.parquet as pq
    rows = store.all_rows()
    table = _arrow(rows)
    with PrivateFile(path, binary=True) as f:      # atomic, 0600 even over a 0644 file
        pq.write_table(table, f.fh)
    return len(rows)


def _hide_password(dsn: str) -> str:
    import re
    return re.sub(r"(://[^:/@]+:)[^@]+@", r"\1<redacted>@", re.sub(r"password=\S+", "password=<redacted>", dsn))
