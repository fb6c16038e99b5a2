"""The project reads nothing outside its repository: a fresh clone in any folder must pass its tests."""

from __future__ import annotations

import re
import subprocess

from tests.paths import ROOT

# A path that climbs out of the repository or names a machine-specific location.
OUTSIDE = re.compile(r"""(\.\./shared|["'/]shared/reference|/work/|parents\[\d\]\.parent|ROOT\.parent|REPO\.parent)""")


def tracked_sources() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.split()
    if not listed:  # not a git checkout (an sdist): every file below the root
        listed = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    return [f for f in listed if f.endswith((".py", ".toml", ".cfg", "Makefile", ".ipynb")) or f.startswith(".ci/")]


def test_no_code_or_test_reads_outside_the_repository() -> None:
    offenders = []
    for name in tracked_sources():
        if name == "tests/test_self_contained.py":
            continue
        for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    assert not offenders, "references outside the repository:\n" + "\n".join(offenders)
