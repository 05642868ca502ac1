"""Write docs/schemas/bundle-manifest.schema.json from the typed manifest (faultkit/manifest.py):
    python scripts/gen_manifest_schema.py
tests/test_schemas.py fails while the committed file differs from what this writes."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from faultkit.manifest import schema_text  # noqa: E402

if __name__ == "__main__":
    path = ROOT / "docs" / "schemas" / "bundle-manifest.schema.json"
    path.write_text(schema_text())
    print(f"wrote {path.relative_to(ROOT)}")
