"""Where the tests find their data: only inside the repository (see tests/fixtures/README.md)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_topologies"
FIXTURES = ROOT / "tests" / "fixtures"
REFERENCE = FIXTURES / "reference_topologies"
REFERENCE_FILES = sorted(REFERENCE.glob("*.json"))
