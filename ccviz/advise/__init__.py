"""The fabric advisor: which cable, bandwidth or switch to buy for a workload mix (``ccviz advise``)."""

from ccviz.advise.advisor import Advice, advise
from ccviz.advise.costs import CostTable, load_costs
from ccviz.advise.mix import MixItem, parse_mix
from ccviz.advise.upgrades import Upgrade, apply_upgrades, upgrades_from_list

__all__ = ["Advice", "CostTable", "MixItem", "Upgrade", "advise", "apply_upgrades", "load_costs", "parse_mix",
           "upgrades_from_list"]
