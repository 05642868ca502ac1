"""A capture's own records: what it armed, how the run ended, the processes with their real
environment, the system inventory (the bundle's manifest)."""

from __future__ import annotations

from .source import Source

SOURCE = Source("capture", "the capture's records: what was armed, how it ended, the processes",
                json_keys=("capture",), sections=("Capture",))
