from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
TRACES = ROOT / "traces"


@pytest.fixture
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"sample corpus not found at {CORPUS}; see shared/corpus/README.md")
    return CORPUS


def corpus_files(sub: str, pattern: str = "*.txt") -> list[Path]:
    d = CORPUS / sub
    return sorted(d.glob(pattern)) if d.is_dir() else []


def corpus_ids(files: list[Path]) -> list[str]:
    return [f.name for f in files]
