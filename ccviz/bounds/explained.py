"""The Collectives Explainer's formulas: composed algorithms, in-network rows, port budgets and contention.

``explained_cost`` answers ``ccviz cost`` for every row: the textbook closed forms of ``ccviz.bounds.cost``
plus dimension-decomposed (``dims``), two-tier hierarchical (``tiers``), PAT, in-network (``inc``) and pairwise
AllToAll with a stated per-rank port budget, each optionally under contention coefficients
(``t = eta_a n_a alpha + n_b M / (eta_b BW)``, per tier for hierarchical). Where ccviz's formula deliberately
differs from the reference's (a finite pipeline instead of its asymptote, a ring that relays), the answer
carries the reference's value too and why they differ.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ccviz.errors import CcvizError

# Contention profiles (the reference's calibration table, 00 section 8 / 05 section 4): (eta_alpha, eta_beta).
ETA_PROFILES: dict[str, tuple[float, float, str]] = {
    "ideal": (1.0, 1.0, "no contention"),
    "crossbar": (1.0, 0.80, "NVLink + NVSwitch without SHARP: NCCL-tests H100 AllReduce busbw 360 / 450 GB/s"),
    "nvls": (1.0, 0.52, "NVLink SHARP in-network reduction: NVLS busbw 470 / DBT 360 GB/s, 1.3x lift over framing"),
    "torus": (1.20, 0.60, "torus with off-prefix layouts and concurrent groups: TPU v4 twisted vs untwisted 1.63x"),
}
CLOS_HW_ETA_BETA = 0.80  # a Clos upper tier: min(hardware eta_beta, 1/s)

# In-network rows (04 section 3.3, 00 section 7): (n_alpha, n_beta as a function of N), alpha = the switch's.
INC_ROWS: dict[str, tuple[float, Callable[[int], float], str]] = {
    "allreduce": (2, lambda n: 1.0, "2 a + M/BW (switch ALU reduces, multicast returns: BW_eff = BW)"),
    "reduce": (1, lambda n: 1.0, "a + M/BW (switch ALU)"),
    "broadcast": (1, lambda n: 1.0, "a + M/BW (switch multicast)"),
    "allgather": (2, lambda n: (n - 1) / n, "2 a + (N-1)/N M/BW (switch multicast)"),
    "reducescatter": (2, lambda n: (n - 1) / n, "2 a + (N-1)/N M/BW (switch ALU)"),
    "alltoall": (2, lambda n: (n - 1) / n, "2 a + (N-1)/N M/BW (hardware AllToAll, Tomahawk Ultra; SHARP-class "
                 "INC gives AllToAll nothing)"),
}
PIPELINE_WHY = ("ccviz counts a finite pipeline: S segments cost (d+S-1)(a + M/(S BW)) (best S = {s} here); the "
                "reference takes S to infinity and keeps d a + M/BW, which no schedule of finitely many messages "
                "reaches")


@dataclass(frozen=True)
class Eta:
    """Contention coefficients: alpha inflates by ``alpha`` >= 1, bandwidth is used at ``beta`` in (0, 1]."""

    alpha: float = 1.0
    beta: float = 1.0
    source: str = "ideal"

    def apply(self, n_alpha: float, n_beta: float, alpha_s: float, beta_s: float) -> float:
        return self.alpha * n_alpha * alpha_s + n_beta * beta_s / self.beta


@dataclass
class ExplainedCost:
    """One formula's answer: ``time_s`` (with eta), its counts, the words, phases and the reference's variant."""

    collective: str
    algorithm: str
    time_s: float
    n_alpha: float
    n_beta: float
    formula: str
    n: int
    size_bytes: float
    eta_alpha: float = 1.0
    eta_beta: float = 1.0
    assumptions: str = ""
    phases: list[dict[str, Any]] = field(default_factory=list)
    reference: dict[str, Any] | None = None
    port_budget: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_eta(text: str | None, eta_alpha: float | None = None, eta_beta: float | None = None) -> Eta:
    """A named profile (crossbar, nvls, torus, clos:S, ideal) and/or explicit coefficients (they win)."""
    base = Eta()
    if text:
        key = text.strip().lower()
        if key.startswith("clos"):
            _, _, s = key.partition(":")
            try:
                s_value = float(s)
            except ValueError:
                raise CcvizError(f"eta: clos takes its oversubscription, e.g. clos:2, got {text!r}", "eta") from None
            if not s_value >= 1:
                raise CcvizError(f"eta: the oversubscription s of clos:s must be >= 1, got {s}", "eta")
            base = Eta(1.0, min(CLOS_HW_ETA_BETA, 1 / s_value), f"Clos upper tier at s={s_value:g}: "
                       f"min({CLOS_HW_ETA_BETA:g}, 1/s)")
        elif key in ETA_PROFILES:
            a, b, why = ETA_PROFILES[key]
            base = Eta(a, b, f"{key}: {why}")
        else:
            raise CcvizError(f"eta: unknown profile {text!r}; choose crossbar, nvls, torus, clos:S or ideal", "eta")
    a = base.alpha if eta_alpha is None else eta_alpha
    b = base.beta if eta_beta is None else eta_beta
    if not a >= 1 or math.isinf(a):
        raise CcvizError(f"eta-alpha: must be a finite number >= 1 (alpha inflation), got {a}", "eta-alpha")
    if not 0 < b <= 1:
        raise CcvizError(f"eta-beta: must be in (0, 1] (bandwidth utilization), got {b}", "eta-beta")
    source = base.source if eta_alpha is None and eta_beta is None else f"eta_alpha={a:g}, eta_beta={b:g}"
    return Eta(a, b, source)


def parse_list(text: str | float | None, name: str, count: int, default: float | None = None) -> list[float]:
    """'0.5/2' -> [0.5, 2.0]; one value serves every tier."""
    if text is None:
        if default is None:
            raise CcvizError(f"{name}: required here", name)
        return [default] * count
    parts = [p for p in str(text).split("/")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise CcvizError(f"{name}: numbers separated by '/' (inner/outer), got {text!r}", name) from None
    if len(values) == 1:
        values *= count
    if len(values) != count:
        raise CcvizError(f"{name}: give one value or {count} separated by '/', got {text!r}", name)
    return values


def parse_dims(text: str, field: str = "dims") -> list[int]:
    try:
        dims = [int(p) for p in str(text).lower().split("x")]
    except ValueError:
        raise CcvizError(f"{field}: sizes separated by x, e.g. 8x8x8, got {text!r}", field) from None
    if not dims or any(d < 1 for d in dims) or math.prod(dims) < 2:
        raise CcvizError(f"{field}: positive sizes with at least two ranks in all, got {text!r}", field)
    return dims


def ring_exchange_share(d: int) -> float:
    """M/BW coefficient of ``_ring_exchange`` on a ring of d: the bytes on one directed link over M (d/8, d even;
    (d^2 - 1)/(8 d), d odd), each rank holding M with M/d for each position of the line."""
    return d / 8 if d % 2 == 0 else (d * d - 1) / (8 * d)


def _check(alpha_us: float, bw: float, size: float) -> None:
    if not (0 <= alpha_us < math.inf):
        raise CcvizError(f"alpha: must be a finite number >= 0 microseconds, got {alpha_us}", "alpha")
    if not (0 < bw < math.inf):
        raise CcvizError(f"bw: must be a positive number of GB/s, got {bw}", "bw")
    if not size > 0:
        raise CcvizError(f"size: must be positive, got {size}", "size")


def _best_segments(depth: float, alpha_s: float, beta_s: float) -> int:
    if depth <= 1 or beta_s <= 0:
        return 1
    if alpha_s <= 0:
        return 4096
    return max(1, min(4096, round(math.sqrt((depth - 1) * beta_s / alpha_s))))


# ------------------------------------------------------------------------------------ the reference's variants
def reference_variant(collective: str, algorithm: str, n: int, alpha_s: float, beta_s: float,
                      segments: int | None) -> tuple[float, float, str] | None:
    """(n_alpha, n_beta, why) of the reference's own formula where ccviz's deliberately differs."""
    log = math.ceil(math.log2(n))
    depth = math.floor(math.log2(n))
    if (collective, algorithm) == ("allreduce", "dbt"):
        s = segments or _best_segments(depth, alpha_s, beta_s * 0.5)
        return 2 * log, 2.0, PIPELINE_WHY.format(s=s) + " (two trees, each phase)"
    if collective in ("broadcast", "reduce") and algorithm in ("ring", "dbt", "pipelined-tree"):
        chain = algorithm == "ring"
        d = n - 1 if chain else depth
        s = segments or _best_segments(d, alpha_s, beta_s * (1.0 if chain or algorithm != "dbt" else 0.5))
        return (n - 1 if chain else log), 1.0, PIPELINE_WHY.format(s=s)
    if (collective, algorithm) == ("alltoall", "ring"):
        return n - 1, (n - 1) / n, (
            "the reference puts N-1 chunks on the busiest ring link; a relayed chunk crosses every link up to its "
            "destination, so one direction's links carry (N-1)/2 M/BW in all as ccviz lays it (about N/8 M/BW with "
            "both directions, shortest arc); the reference's count holds at N=4 only")
    return None


# ---------------------------------------------------------------------------------------------- the rows
def _plain(collective: str, algorithm: str, n: int, size: float, alpha_us: float, bw: float,
           segments: int | None, ports: int | None) -> tuple[float, float, str, str]:
    """(n_alpha, n_beta, formula words, assumptions) of a flat formula on n ranks."""
    if algorithm == "inc":
        if collective not in INC_ROWS:
            raise CcvizError(f"algorithm: no in-network row for {collective}; inc covers {', '.join(INC_ROWS)}",
                             "algorithm")
        na, nb_of, words = INC_ROWS[collective]
        return na, nb_of(n), f"inc {collective}: {words}", ("one switch domain with SHARP/NVLS-class engines; "
                                                            "alpha is the switch hop's")
    if collective == "alltoall" and algorithm in ("pairwise", "direct"):
        from ccviz.bounds.ports import check_ports

        p = check_ports(ports, n) or 1
        rounds = math.ceil((n - 1) / p)
        return rounds, rounds / n, (f"pairwise alltoall: ceil((N-1)/P) (a + M/(N BW)), P = {p} port(s) per rank"), (
            f"per-rank port budget P = {p}: each rank sends to {p} partner(s) at once (the reference's model is "
            "P = 1, one partner per round; a fabric whose ranks drive k links at once, e.g. fully_connected with "
            "N-1, runs ceil((N-1)/k) rounds)")
    # the textbook rows, loaded only when asked (dimdecomp, pat and inc rows start without them)
    from ccviz.bounds.cost import formula

    result = formula(collective, algorithm, n, size, alpha_us, bw, segments=segments)
    return result.n_alpha, result.n_beta, result.text, "abstract fully connected fabric"


def _dimdecomp(collective: str, dims: list[int], mesh: bool, per_dim: str, size: float, alpha_s: float,
               beta_s: float, segments: int | None) -> tuple[float, float, str, tuple[float, float, str] | None]:
    n = math.prod(dims)
    if per_dim not in ("ring", "rhd"):
        raise CcvizError(f"per-dim: ring or rhd, got {per_dim!r}", "per-dim")
    if per_dim == "rhd" and any(d & (d - 1) for d in dims):
        raise CcvizError(f"dims: rhd per dimension needs power-of-two sizes, got {'x'.join(map(str, dims))}", "dims")
    steps = sum((d - 1) if per_dim == "ring" else (d.bit_length() - 1) for d in dims)
    per = "sum(d_i - 1)" if per_dim == "ring" else "sum(log2 d_i)"
    shape = f"{'mesh' if mesh else 'torus'} {'x'.join(map(str, dims))}"
    if collective == "allreduce":
        return 2 * steps, 2 * (n - 1) / n, f"dimdecomp allreduce on a {shape}: 2 {per} a + 2(N-1)/N M/BW", None
    if collective in ("allgather", "reducescatter"):
        return steps, (n - 1) / n, f"dimdecomp {collective} on a {shape}: {per} a + (N-1)/N M/BW", None
    if collective in ("broadcast", "reduce"):
        depth = sum((d - 1) if mesh else d // 2 for d in dims)
        s = segments or _best_segments(depth, alpha_s, beta_s)
        words = (f"dimdecomp {collective} on a {shape}: (D+S-1)(a + M/(S BW)), D = "
                 f"{'sum(d_i - 1)' if mesh else 'sum(floor(d_i/2))'} = {depth} (both ways round each ring), S = {s}")
        return depth + s - 1, (depth + s - 1) / s, words, (depth, 1.0, PIPELINE_WHY.format(s=s))
    if collective == "alltoall":
        if mesh:
            depth = sum(d - 1 for d in dims)
            return depth, max(dims) / 4, (f"dimdecomp alltoall on a {shape}: diameter a + (d_max/4) M/BW "
                                          "(the mesh's bisection bound; ccviz's schedule is per-line pairwise)"), None

        depth = sum(d // 2 for d in dims if d > 1)
        share = sum(ring_exchange_share(d) for d in dims if d > 2) + sum(0.5 for d in dims if d == 2)
        flat = (depth, max(dims) / 8, "the reference's flat form diam a + d_max/8 M/BW routes every block the "
                "shorter way over all dimensions at once (its ladder rows print it); dimdecomp runs dimension by "
                "dimension, idling the other dimensions' links in each phase: diam a + sum(d_i)/8 M/BW, the "
                "reference's own decomposed form (02 section 3), which is what ccviz's schedule costs")
        return depth, share, (f"dimdecomp alltoall on a {shape}: sum(floor(d_i/2)) a + sum(d_i/8) M/BW, dimension "
                              "by dimension, every block the shorter way round its ring (d_i odd: "
                              "(d_i^2-1)/(8 d_i))"), flat
    raise CcvizError(f"collective: dimdecomp has no formula for {collective}", "collective")


def _tier_formula(collective: str, algorithm: str, ranks: int, nbytes: float, alpha_us: float, bw: float,
                  segments: int | None) -> Any:
    """One tier's phase: any flat formula, the in-network rows (``inc``: SHARP / NVLS as a tier) included."""
    from ccviz.bounds.cost import CostResult, formula

    if algorithm == "inc":
        if collective not in INC_ROWS:
            raise CcvizError(f"inner/outer: no in-network row for the {collective} phase; inc covers "
                             f"{', '.join(INC_ROWS)}", "algorithm")
        na, nb_of, words = INC_ROWS[collective]
        nb = nb_of(ranks)
        return CostResult(na * alpha_us * 1e-6 + nb * nbytes / (bw * 1e9), na, nb, f"inc {collective}: {words}")
    return formula(collective, algorithm, ranks, nbytes, alpha_us, bw, segments=segments)


def _hierarchical(collective: str, n_inner: int, groups: int, size: float, alphas: list[float], bws: list[float],
                  oversub: float, inner: str, outer: str, etas: list[Eta], segments: int | None,
                  pods_per_leaf: int | None = None) -> tuple[float, float, float, str, list[dict[str, Any]]]:
    """(time_s, n_alpha, n_beta, words, phases): each phase a flat formula at its tier's alpha, BW and eta.

    ``alphas`` may hold three values (inner / leaf / spine, the rail-optimized SuperPOD's latency classes): the
    outer tier then pays alpha_leaf when every group shares a leaf (``pods_per_leaf`` >= groups), else alpha_spine,
    and AllToAll itemizes its peers by class (03 section 2.2)."""
    n = n_inner * groups
    bw_out = bws[1] / oversub
    if len(alphas) == 3 and collective != "alltoall":
        shared = pods_per_leaf is not None and pods_per_leaf >= groups
        alphas = [alphas[0], alphas[1] if shared else alphas[2]]
    tiers = {"inner": (n_inner, alphas[0], bws[0], inner, etas[0]), "outer": (groups, alphas[1], bw_out, outer,
                                                                              etas[1])}
    if collective == "allreduce":
        plan = [("inner", "reducescatter", size), ("outer", "allreduce", size / n_inner), ("inner", "allgather", size)]
    elif collective == "allgather":
        plan = [("inner", "allgather", size / groups), ("outer", "allgather", size)]
    elif collective == "reducescatter":
        plan = [("outer", "reducescatter", size), ("inner", "reducescatter", size / groups)]
    elif collective == "alltoall" and len(alphas) == 3:
        return _alltoall_three_classes(n_inner, groups, size, alphas, bws, oversub, etas, pods_per_leaf)
    elif collective == "alltoall":
        chunk = size / n
        t_a = (n_inner - 1) * alphas[0] * 1e-6 * etas[0].alpha + (n - n_inner) * alphas[1] * 1e-6 * etas[1].alpha
        t_b = ((n_inner - 1) * chunk / (bws[0] * 1e9 * etas[0].beta)
               + (n - n_inner) * chunk / (bw_out * 1e9 * etas[1].beta))
        phases = [{"tier": "inner", "collective": "alltoall", "n_alpha": n_inner - 1, "peers": n_inner - 1},
                  {"tier": "outer", "collective": "alltoall", "n_alpha": n - n_inner, "peers": n - n_inner}]
        return (t_a + t_b, n - 1, (n - 1) / n,
                "hierarchical alltoall: (n-1) a_in + (N-n) a_out + (n-1) M/N/BW_in + (N-n) M/N s/BW_out "
                "(AllToAll cannot telescope: every peer is sent to once, each at its tier's alpha and BW)", phases)
    elif collective in ("broadcast", "reduce"):
        la, li = math.ceil(math.log2(groups)), math.ceil(math.log2(n_inner))
        slow = min(bws[0] * etas[0].beta, bw_out * etas[1].beta)
        t = (la * alphas[1] * etas[1].alpha + li * alphas[0] * etas[0].alpha) * 1e-6 + size / (slow * 1e9)
        return (t, la + li, 1.0, f"hierarchical {collective}: ceil(log2 L) a_out + ceil(log2 n) a_in + M/BW_slowest "
                "(pipelined trees at their asymptote, as the reference)", [])
    else:
        raise CcvizError(f"collective: hierarchical has no formula for {collective}", "collective")
    total = n_alpha = n_beta = 0.0
    phases = []
    for tier, coll, nbytes in plan:
        ranks, a_us, bw, alg, eta = tiers[tier]
        res = _tier_formula(coll, alg, ranks, nbytes, a_us, bw, segments)
        t = eta.apply(res.n_alpha, res.n_beta, a_us * 1e-6, nbytes / (bw * 1e9))
        total += t
        n_alpha += res.n_alpha
        n_beta += res.n_beta * nbytes / size
        phases.append({"tier": tier, "collective": coll, "algorithm": alg, "ranks": ranks, "size_bytes": nbytes,
                       "alpha_us": a_us, "bw_GBps": bw, "time_s": t, "n_alpha": res.n_alpha, "n_beta": res.n_beta,
                       "eta_alpha": eta.alpha, "eta_beta": eta.beta})
    words = " + ".join(f"{p['collective']} {p['tier']} ({p['ranks']} ranks, {p['size_bytes']:g} B)" for p in phases)
    return total, n_alpha, n_beta, f"hierarchical {collective}: {words}", phases


def _alltoall_three_classes(n_inner: int, groups: int, size: float, alphas: list[float], bws: list[float],
                            oversub: float, etas: list[Eta], pods_per_leaf: int | None
                            ) -> tuple[float, float, float, str, list[dict[str, Any]]]:
    """Pairwise AllToAll itemized by destination class: same pod, same leaf (p pods share it), through the spine."""
    if pods_per_leaf is None or not 1 <= pods_per_leaf <= groups:
        raise CcvizError(f"pods-per-leaf: three alphas (inner/leaf/spine) need --pods-per-leaf p, 1 <= p <= L = "
                         f"{groups}", "pods-per-leaf")
    n = n_inner * groups
    chunk = size / n
    classes = [("inner", n_inner - 1, alphas[0], bws[0], etas[0]),
               ("leaf", (pods_per_leaf - 1) * n_inner, alphas[1], bws[1] / oversub, etas[1]),
               ("spine", (groups - pods_per_leaf) * n_inner, alphas[2], bws[1] / oversub, etas[1])]
    total, phases = 0.0, []
    for name, peers, a_us, bw, eta in classes:
        t = peers * (eta.alpha * a_us * 1e-6 + chunk / (eta.beta * bw * 1e9))
        total += t
        phases.append({"tier": name, "collective": "alltoall", "algorithm": "pairwise", "ranks": peers + 1,
                       "size_bytes": peers * chunk, "alpha_us": a_us, "bw_GBps": bw, "time_s": t, "n_alpha": peers,
                       "n_beta": peers / n, "eta_alpha": eta.alpha, "eta_beta": eta.beta})
    return (total, n - 1, (n - 1) / n, "hierarchical alltoall, three latency classes: (n-1)(a_in + M/N/BW_in) + "
            "(p-1) n (a_leaf + M/N s/BW_out) + (L-p) n (a_spine + M/N s/BW_out) (03 section 2.2)", phases)


def _compound_oversub(oversub: float | str) -> tuple[float, str]:
    """One oversubscription, or one per Clos tier ('2/3': leaf->spine 2:1, spine->core 3:1), compounded: traffic
    through every tier sees the product (worst case: every cross-group byte crosses the top tier)."""
    values = parse_list(oversub, "oversub", len(str(oversub).split("/")))
    if any(not v >= 1 for v in values):
        raise CcvizError(f"oversub: every tier's oversubscription must be >= 1, got {oversub}", "oversub")
    total = math.prod(values)
    words = (f"oversubscription s={total:g} on the outer tier's BW" if len(values) == 1 else
             f"oversubscription compounded over {len(values)} tiers: {' x '.join(f'{v:g}' for v in values)} = "
             f"{total:g} on the outer tier's BW (every cross-group byte assumed to cross the top tier)")
    return total, words


def explained_cost(collective: str, algorithm: str, size_bytes: float, alpha: str | float = 0.5,
                   bw: str | float = 50.0, n: int | None = None, dims: str | None = None, mesh: bool = False,
                   per_dim: str = "ring", tiers: str | None = None, oversub: float | str = 1.0,
                   inner: str = "ring", outer: str = "ring", eta: str | None = None,
                   eta_alpha: str | float | None = None, eta_beta: str | float | None = None,
                   ports: int | None = None, segments: int | None = None,
                   pods_per_leaf: int | None = None) -> ExplainedCost:
    """Every formula row of ``ccviz cost`` (see the module docstring); counts are in units of alpha and M/BW."""
    from ccviz.bounds.cost_options import check_cost_options
    from ccviz.model.collectives import normalize_name

    collective = normalize_name(collective)
    algorithm = str(algorithm).strip().lower()
    check_cost_options(collective, algorithm, n=n, dims=dims, mesh=mesh, per_dim=per_dim, tiers=tiers, oversub=oversub,
                       inner=inner, outer=outer, eta=eta, ports=ports)
    if algorithm == "hierarchical":
        if not tiers:
            raise CcvizError("tiers: hierarchical needs --tiers N_INNERxL, e.g. 72x2", "tiers")
        shape = parse_dims(tiers, "tiers")
        if len(shape) != 2 or min(shape) < 2:
            raise CcvizError(f"tiers: two tiers N_INNERxL, both >= 2, e.g. 72x2, got {tiers!r}", "tiers")
        oversub, oversub_words = _compound_oversub(oversub)
        n_alpha_values = len(str(alpha).split("/"))
        alphas = parse_list(alpha, "alpha", 3 if n_alpha_values == 3 else 2)
        bws = parse_list(bw, "bw", 2)
        for k, a_us in enumerate(alphas):
            _check(a_us, bws[min(k, 1)], size_bytes)
        etas = _tier_etas(eta, eta_alpha, eta_beta)
        if oversub > 1 and etas[1].source.startswith("Clos upper tier"):
            raise CcvizError(f"oversub: --eta clos:S already prices the outer tier's oversubscription (eta_beta = "
                             f"min({CLOS_HW_ETA_BETA:g}, 1/S)); with --oversub {oversub:g} too it would count twice. "
                             "Give one of them (or --eta-beta for the hardware's own efficiency)", "oversub")
        n_inner, groups = shape
        t, na, nb, words, phases = _hierarchical(collective, n_inner, groups, size_bytes, alphas, bws, oversub,
                                                 inner, outer, etas, segments, pods_per_leaf)
        return ExplainedCost(collective, algorithm, t, na, nb, words, n_inner * groups, size_bytes,
                             etas[0].alpha, etas[0].beta,
                             f"inner {etas[0].source}; outer {etas[1].source}; {oversub_words}", phases)
    alpha_us, bw_value = _single(alpha, "alpha"), _single(bw, "bw")
    _check(alpha_us, bw_value, size_bytes)
    e = parse_eta(eta, _single(eta_alpha, "eta-alpha") if eta_alpha is not None else None,
                  _single(eta_beta, "eta-beta") if eta_beta is not None else None)
    alpha_s, beta_s = alpha_us * 1e-6, size_bytes / (bw_value * 1e9)
    variant = None
    port_budget = None
    if algorithm == "dimdecomp":
        if not dims:
            raise CcvizError("dims: dimdecomp needs --dims, e.g. 8x8x8", "dims")
        shape = parse_dims(dims)
        n = math.prod(shape)
        na, nb, words, variant = _dimdecomp(collective, shape, mesh, per_dim, size_bytes, alpha_s, beta_s, segments)
        assumptions = (f"{'mesh (no wrap-around)' if mesh else 'torus'}, one link per neighbour each way, "
                       f"{per_dim} in every line")
    else:
        if n is None:
            raise CcvizError("n: the number of ranks is required (--n N)", "n")
        if not isinstance(n, int) or n < 2:
            raise CcvizError(f"n: the number of ranks must be a whole number >= 2, got {n!r}", "n")
        na, nb, words, assumptions = _plain(collective, algorithm, n, size_bytes, alpha_us, bw_value, segments, ports)
        from ccviz.bounds.cost import FORMULAS

        if (collective, algorithm) in FORMULAS:
            variant = reference_variant(collective, algorithm, n, alpha_s, beta_s, segments)
            from ccviz.bounds.ports import apply_ports

            nb, budget = apply_ports(collective, algorithm, n, nb, ports)
            port_budget = budget.to_dict()
            if budget.factor > 1:
                words = f"{words}; M/BW x{budget.factor:.4g} for {budget.ports} port(s) per rank"
            assumptions = f"{assumptions}; {budget.note}"
    reference = None
    if variant is not None:
        ra, rb, why = variant
        reference = {"time_s": e.apply(ra, rb, alpha_s, beta_s), "n_alpha": ra, "n_beta": rb, "why": why}
    return ExplainedCost(collective, algorithm, e.apply(na, nb, alpha_s, beta_s), float(na), float(nb), words, n,
                         size_bytes, e.alpha, e.beta, f"{assumptions}; contention: {e.source}", [], reference,
                         port_budget)


def _single(value: str | float | None, name: str) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise CcvizError(f"{name}: one number here (A/B is for hierarchical tiers), got {value!r}", name) from None


def _tier_etas(eta: str | None, eta_alpha: str | float | None, eta_beta: str | float | None) -> list[Eta]:
    names = (eta or "").split("/") if eta else [None, None]
    if len(names) == 1:
        names *= 2
    if len(names) != 2:
        raise CcvizError(f"eta: one profile or inner/outer, e.g. crossbar/clos:2, got {eta!r}", "eta")
    a = parse_list(eta_alpha, "eta-alpha", 2) if eta_alpha is not None else [None, None]
    b = parse_list(eta_beta, "eta-beta", 2) if eta_beta is not None else [None, None]
    return [parse_eta(names[i], a[i], b[i]) for i in range(2)]


def format_cost(c: ExplainedCost) -> str:
    """The answer in words: the value, the counts, the formula and its assumptions, the reference's variant."""
    from ccviz.model.units import format_size, format_time

    eta = "" if (c.eta_alpha, c.eta_beta) == (1.0, 1.0) else f" with eta_alpha={c.eta_alpha:g}, eta_beta={c.eta_beta:g}"
    lines = [f"{c.algorithm} {c.collective}, N={c.n}, M={format_size(c.size_bytes)}: {format_time(c.time_s)} = "
             f"{c.n_alpha:g} alpha + {c.n_beta:.6g} M/BW{eta}",
             f"  formula      {c.formula}",
             f"  assumes      {c.assumptions}"]
    for p in c.phases:
        if "time_s" in p:
            lines.append(f"  phase        {p['tier']} {p['collective']} ({p['algorithm']}, {p['ranks']} ranks, "
                         f"{format_size(p['size_bytes'])}): {format_time(p['time_s'])}")
    if c.reference:
        r = c.reference
        lines.append(f"  reference    {format_time(r['time_s'])} = {r['n_alpha']:g} alpha + {r['n_beta']:.6g} M/BW")
        lines.append(f"  why differ   {r['why']}")
    return "\n".join(lines)
