"""Which of ``ccviz cost``'s options each formula reads: an option given to a formula that does not read it is
refused in one line naming it (``--mesh`` on a ring, ``--tiers`` on pat, ``--outer tree`` on a hierarchical
AllToAll were silently ignored, so the number printed was not the one asked for)."""

from __future__ import annotations

import math

from ccviz.errors import CcvizError

DIMDECOMP_ONLY = ("dims", "mesh", "per-dim")
HIERARCHICAL_ONLY = ("tiers", "oversub", "inner", "outer")
PHASED = ("allreduce", "allgather", "reducescatter")  # hierarchical collectives whose phases take --inner/--outer


def check_cost_options(collective: str, algorithm: str, *, n: int | None = None, dims: str | None = None,
                       mesh: bool = False, per_dim: str = "ring", tiers: str | None = None,
                       oversub: float | str = 1.0,
                       inner: str = "ring", outer: str = "ring", eta: str | None = None,
                       ports: int | None = None) -> None:
    """Refuse an option the chosen formula would ignore, and values no formula takes."""
    try:  # one oversubscription or one per tier, '2/3' (their own words name a value that is not a number)
        tiers_oversub = [float(part) for part in str(oversub).split("/")]
    except ValueError:
        tiers_oversub = [math.nan]
    given = {"dims": dims is not None, "mesh": bool(mesh), "per-dim": per_dim != "ring", "tiers": tiers is not None,
             "oversub": tiers_oversub != [1.0], "inner": inner != "ring", "outer": outer != "ring"}
    for owner, names in (("dimdecomp", DIMDECOMP_ONLY), ("hierarchical", HIERARCHICAL_ONLY)):
        for name in names:
            if given[name] and algorithm != owner:
                raise CcvizError(f"{name}: --{name} applies to -a {owner} only; {algorithm} does not read it "
                                 f"(drop it, or choose -a {owner})", name.replace("-", "_"))
    if algorithm == "hierarchical" and collective not in PHASED:
        for name in ("inner", "outer"):
            if given[name]:
                raise CcvizError(f"{name}: hierarchical {collective} has one closed form; --{name} chooses the phases' "
                                 f"algorithm of {', '.join(PHASED)} only", name)
    if n is not None and algorithm in ("dimdecomp", "hierarchical"):
        raise CcvizError(f"n: {algorithm} takes the number of ranks from --{'dims' if algorithm == 'dimdecomp' else 'tiers'}; "
                         "drop --n", "n")
    if any(v == math.inf for v in tiers_oversub):  # inf made the outer tier's BW 0, refused as 'bw'
        raise CcvizError(f"oversub: the oversubscription s must be a finite number >= 1, got {oversub}", "oversub")
    if eta is not None and not str(eta).strip():
        raise CcvizError("eta: empty; give crossbar, nvls, torus or clos:S (or leave --eta out: ideal links)", "eta")
    if ports is not None and ports < 1:
        raise CcvizError(f"ports: the links a rank drives at once, a whole number >= 1, got {ports}", "ports")
