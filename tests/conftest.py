import re
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


# The corpus's own markup (README "Use in tests"): provenance lines are dropped, and an excerpt
# boundary becomes the elision line a poster would write between two stretches of a log.
_MARKUP = re.compile(rb"^# (?:source|notes|Format|Version)\b[^\n]*\n?", re.M)
_EXCERPT = re.compile(rb"^# ---[^\n]*$", re.M)


def corpus_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix in (".csv", ".xz", ".cu", ".py", ".sh"):
        return data
    return _EXCERPT.sub(b"---", _MARKUP.sub(b"", data))


def corpus_copy(path: Path, folder: Path) -> Path:
    """The file as evidence a user would hold (markup stripped), for tests that go through triage."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / path.name
    out.write_bytes(corpus_bytes(path))
    return out
