"""Where the shared reference data lives (../shared next to the project root)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "topologies"
SAMPLES = ROOT / "sample_topologies"
