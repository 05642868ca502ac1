"""Rows grouped by the values of several integer columns, in O(n): the layout's queues and the
writer's annotation combinations both need it for a million rows, where a sort of the rows' keys
(np.unique(axis=0), a groupby) costs seconds or a large part of a second."""

from __future__ import annotations

import numpy as np
import pandas as pd


def group_rows(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group id (0, 1, ... in the order the groups first appear) and the first row of
    each group. Hash-based (pandas.factorize per column): the columns' codes are the digits of one
    mixed-radix number, renumbered before it could overflow int64."""
    n = len(cols[0])
    key, span = np.zeros(n, dtype=np.int64), 1
    for col in cols:
        if n and col.dtype.kind in "biu" and col.min() == col.max():
            continue                 # one value (grid_y, scratch, ...): no digit, and no hash pass
        codes, uniques = pd.factorize(col)
        if span * (len(uniques) + 1) >= 1 << 62:
            key = pd.factorize(key)[0].astype(np.int64)
            span = int(key.max()) + 1
        key = key * (len(uniques) + 1) + codes
        span *= len(uniques) + 1
    gid = pd.factorize(key)[0].astype(np.int64)
    # ids come in order of first appearance: a group's first row is where the running maximum grows
    first = np.flatnonzero(np.diff(np.maximum.accumulate(gid), prepend=-1) > 0) if n else np.zeros(0, np.int64)
    return gid, first
