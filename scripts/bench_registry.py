#!/usr/bin/env python3
"""The registry's ingest and `top` beside the databases' own bulk paths, on synthetic incidents made from
real signatures (the bundled sample and the corpus's Xid log, replayed on many nodes and GPUs).

    python scripts/bench_registry.py -n 1000000 [--pg]     # --pg starts a throwaway PostgreSQL

Each figure is the median of --repeat runs. The anchors: DuckDB's `INSERT INTO t SELECT * FROM arrow`
into a table with no key (no duplicate check), and PostgreSQL's plain `COPY` into such a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from faultkit.fleet.intake import intake  # noqa: E402
from faultkit.fleet.record import IncidentRecord  # noqa: E402
from faultkit.fleet.store import COUNT, DuckDBStore, PostgresStore, SCHEMA, _COLS, _arrow  # noqa: E402

BATCH = 200_000


def templates() -> list[IncidentRecord]:
    out = []
    for src in (ROOT / "traces" / "sglang-tp2-mi300x", ROOT.parent / "shared" / "corpus" / "cuda" / "h200_dmesg_xid.txt"):
        if src.exists():
            out += intake(str(src), node="t")[0]
    return out


def batches(n: int, base: list[IncidentRecord]):
    rows = []
    for i in range(n):
        t = base[i % len(base)]
        rows.append(dataclasses.replace(t, incident_id=f"{i:024x}", node=f"node-{i % 997:03d}",
                                        gpu=f"{t.gpu}#{i % 8}", seen_at=1.7e9 + i).row())
        if len(rows) == BATCH:
            yield rows
            rows = []
    if rows:
        yield rows


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def duck(n, base, folder: Path, k: int):
    import duckdb

    def faultkit_add():
        s = DuckDBStore(str(folder / f"fk{k}.duckdb"))
        for rows in batches(n, base):
            s._insert_rows(rows)
        assert s._rows(COUNT)[0][0] == n
        s.close()

    def plain():
        con = duckdb.connect(str(folder / f"plain{k}.duckdb"))
        con.execute(SCHEMA.replace(" PRIMARY KEY", "").replace("incidents", "plain"))
        for rows in batches(n, base):
            tbl = _arrow(rows)   # noqa: F841 - read by name below
            con.execute("INSERT INTO plain SELECT * FROM tbl")
        con.close()
    return timed(faultkit_add), timed(plain)


def pg(n, base, dsn, k):
    import psycopg

    def faultkit_add():
        s = PostgresStore(dsn)
        s.con.execute("DROP TABLE IF EXISTS incidents")
        s = PostgresStore(dsn)
        for rows in batches(n, base):
            s._insert_rows(rows)
        s.close()

    def plain():
        con = psycopg.connect(dsn, autocommit=True)
        con.execute("DROP TABLE IF EXISTS plain")
        con.execute(SCHEMA.replace(" PRIMARY KEY", "").replace("incidents", "plain"))
        for rows in batches(n, base):
            with con.cursor().copy(f"COPY plain ({_COLS}) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)
        con.close()
    return timed(faultkit_add), timed(plain)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pg", action="store_true", help="also PostgreSQL (a throwaway server from Debian's package)")
    a = ap.parse_args()
    base = templates()
    folder = Path(tempfile.mkdtemp(prefix="faultkit-bench-registry-"))
    results = {"duckdb": [duck(a.n, base, folder, k) for k in range(a.repeat)]}
    s = DuckDBStore(str(folder / "fk0.duckdb"))
    results["top"] = [timed(lambda: s.top(20)) for _ in range(a.repeat)]
    s.close()
    server = None
    if a.pg:
        sys.path.insert(0, str(ROOT / "tests"))
        import pg_server
        server = pg_server.Server(Path(tempfile.mkdtemp(prefix="faultkit-pg-")))
        server.start()
        try:
            results["postgresql"] = [pg(a.n, base, server.dsn, k) for k in range(a.repeat)]
            p = PostgresStore(server.dsn)
            results["pg top"] = [timed(lambda: p.top(20)) for _ in range(a.repeat)]
            p.close()
        finally:
            server.stop()
    med = statistics.median
    print(f"{a.n:,} incidents from {len(base)} real signatures, medians of {a.repeat} runs")
    print(f"{'store':<12} {'faultkit add':>13} {'plain bulk':>11} {'ratio':>6}")
    for name in ("duckdb", "postgresql"):
        if name in results:
            fk, plain = med(r[0] for r in results[name]), med(r[1] for r in results[name])
            print(f"{name:<12} {fk:>12.2f}s {plain:>10.2f}s {fk / plain:>5.2f}x")
    print(f"registry top over {a.n:,} (DuckDB): {med(results['top']):.3f} s")
    if "pg top" in results:
        print(f"registry top over {a.n:,} (PostgreSQL): {med(results['pg top']):.3f} s")


if __name__ == "__main__":
    main()
