"""``ccviz advise``: the command line of the fabric advisor (kept apart so ``ccviz.cli`` stays light)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ccviz.errors import CcvizError

MAX_CANDIDATE_FILE_BYTES = 5_000_000


def add_parser(sub) -> None:
    """Register ``advise`` on the ``ccviz`` subcommand parser."""
    a = sub.add_parser("advise", help="which cable, bandwidth or switch to buy for a workload mix (exact limits)")
    a.add_argument("topology", help="a JSON/YAML file or a builder spec such as dgx1")
    a.add_argument("--mix", required=True, help="collective:size:weight items whose weights sum to 1, e.g. "
                                                "allreduce:1GB:0.5,alltoall:256MB:0.3,allgather:64MB:0.2")
    a.add_argument("--budget", type=float, default=None, help="the most to spend (currency of the cost table); "
                                                               "without it: the best value at each step")
    a.add_argument("--max-steps", type=int, default=3, help="at most this many upgrades (1-10, default 3)")
    a.add_argument("--costs", default=None, help="a YAML cost table (keys: cable_per_GBps, bandwidth_per_GBps, "
                                                 "nic, reduce_switch, currency, source)")
    a.add_argument("--candidates", default=None, help="a JSON list of upgrades to choose from (the `candidates` of "
                                                      "an earlier --json) instead of the generated ones")
    a.add_argument("--max-candidates", type=int, default=100, help="how many upgrades to generate (default 100)")
    a.add_argument("--time-limit", type=float, default=None, help="seconds for the search (the best so far is kept)")
    a.add_argument("--confirm", action="store_true", help="synthesize the mix on each step's fabric (forestcoll, "
                                                          "mcf, inc) and show the gain realized beside the promised")
    a.add_argument("--json", action="store_true", help="one JSON object: candidates, plan, weighted_time_s, curve")
    a.set_defaults(func=cmd_advise)


def cmd_advise(args: argparse.Namespace) -> int:
    from ccviz.advise.advisor import advise
    from ccviz.advise.costs import load_costs
    from ccviz.advise.mix import parse_mix
    from ccviz.advise.upgrades import upgrades_from_list
    from ccviz.builders.loading import load_topology

    mix = parse_mix(args.mix)
    if not 1 <= args.max_candidates <= 2_000:
        raise CcvizError(f"--max-candidates: a whole number from 1 to 2000, got {args.max_candidates}",
                         "max-candidates")
    if args.time_limit is not None and not args.time_limit > 0:
        raise CcvizError(f"--time-limit: must be a positive number of seconds, got {args.time_limit}", "time-limit")
    costs = load_costs(args.costs)
    topology = load_topology(args.topology)
    candidates = None
    if args.candidates is not None:
        candidates = upgrades_from_list(_read_json(args.candidates), topology)
    advice = advise(topology, mix, budget=args.budget, max_steps=args.max_steps, costs=costs, candidates=candidates,
                    max_candidates=args.max_candidates, time_limit=args.time_limit)
    out = advice.to_dict()
    lines = advice.summary_lines()
    if args.confirm:
        from ccviz.advise.confirm import confirm

        realized = confirm(topology, advice)
        out["confirmed"] = [r.to_dict() for r in realized]
        for r in realized:
            lines.append(f"  step {r.step}: limits {r.promised_s * 1e3:.4g} ms, verified schedules "
                         f"{r.realized_s * 1e3:.4g} ms ({r.ratio:.3f} x)")
    if args.json:
        from ccviz.model.strict_json import dumps

        print(dumps(out))
    else:
        print("\n".join(lines))
    return 0


def _read_json(path: str):
    p = Path(path)
    if not p.is_file():
        raise CcvizError(f"--candidates: {path!r} is not a file; give a JSON list of upgrades", "candidates")
    if p.stat().st_size > MAX_CANDIDATE_FILE_BYTES:
        raise CcvizError(f"--candidates: {path!r} is over {MAX_CANDIDATE_FILE_BYTES // 1_000_000} MB", "candidates")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CcvizError(f"--candidates: {path!r} is not JSON ({exc})", "candidates") from None


