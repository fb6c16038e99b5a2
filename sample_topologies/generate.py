"""Write the sample topology files from the builders (run: ``python sample_topologies/generate.py``).

The files are the builders' output saved in the project format, so the app and the CLI can open them
without knowing the builder syntax; ``tests/test_builders.py`` checks they stay equal to the builders.
``ndv2_2chassis_teccl_as_run.json`` is the one exception: a verbatim copy of the reference file (in the
reference format) because it records how TE-CCL's published runs mislabelled node 0 as a switch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ccviz.builders import build

HERE = Path(__file__).resolve().parent
REFERENCE_DIR = HERE.parent / "tests" / "fixtures" / "reference_topologies"  # the papers' files, unchanged

# file stem -> builder spec
SAMPLES: dict[str, str] = {
    "dgx1": "dgx1",
    "ndv2_1chassis": "ndv2:chassis=1",
    "ndv2_2chassis": "ndv2:chassis=2",
    "ndv2_4chassis": "ndv2:chassis=4",
    "dgx2_2chassis": "dgx2:chassis=2",
    "amd_1chassis": "amd:chassis=1",
    "amd_2chassis": "amd:chassis=2",
    "ring4": "ring:n=4",
    "ring8": "ring:n=8",
    "torus2x2": "torus2d:dims=2x2",
    "torus4x4": "torus2d:dims=4x4",
    "a100_2x8": "a100:boxes=2",
}
# copied verbatim from the reference directory (reference format, loaded as is)
REFERENCE_COPIES = ("ndv2_2chassis_teccl_as_run",)


def main() -> None:
    for stem, spec in SAMPLES.items():
        build(spec).save(HERE / f"{stem}.json")
    for stem in REFERENCE_COPIES:
        shutil.copyfile(REFERENCE_DIR / f"{stem}.json", HERE / f"{stem}.json")
    print(f"wrote {len(SAMPLES) + len(REFERENCE_COPIES)} files to {HERE}")


if __name__ == "__main__":
    main()
