"""Typed per-algorithm options: one declaration checks input, feeds the synthesizer and is listed."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass

import pytest

import ccviz
from ccviz.cli import main
from ccviz.errors import CcvizError
from ccviz.synth.catalog import ForestcollOptions, TacosOptions, TecclAstarOptions
from ccviz.synth.options import AlgorithmOptions, option
from ccviz.synth.registry import REGISTRY, Algorithm, LazyFunction, SynthOptions, register, synthesize


def refusal(algorithm: str, **extra) -> str:
    """The one-line message a bad ``extra`` gets from the registry (before any work)."""
    topology = ccviz.load_topology("ring:n=4")
    with pytest.raises(CcvizError) as caught:
        synthesize(topology, ccviz.make_collective("allgather", topology, 1e6), algorithm, SynthOptions(extra=extra))
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("algorithm, extra, words", [
    ("tacos", {"pick": "best"}, ["pick", "'best'", "one of spread, random"]),  # bad choice
    ("tacos", {"workers": "many"}, ["workers", "'many'", "a whole number >= 1"]),  # bad type
    ("tacos", {"workers": 2.5}, ["workers", "2.5", "a whole number"]),  # not whole
    ("tacos", {"workers": True}, ["workers", "True"]),  # a yes/no is no number
    ("tacos", {"workers": 0}, ["workers", ">= 1"]),  # out of range
    ("forestcoll", {"trees": 0}, ["trees", ">= 1", "or auto to let the algorithm choose"]),
    ("forestcoll", {"switch_queue": "maybe"}, ["switch_queue", "true or false"]),
    ("teccl", {"replay": "later"}, ["replay", "one of asap, epoch"]),
    ("teccl-astar", {"astar_greedy": 3}, ["astar_greedy", "true or false"]),
    ("tacos", {"bogus": 1}, ["tacos has no option 'bogus'", "link_hold, pick, patience, workers"]),  # unknown key
    ("teccl", {"astar_round": 2}, ["teccl has no option 'astar_round'"]),  # another algorithm's option
    ("ring", {"pick": "random"}, ["ring has no option 'pick'", "it takes none"]),
])
def test_a_bad_option_is_refused_in_one_line_naming_the_key_and_the_allowed_values(algorithm, extra, words):
    message = refusal(algorithm, **extra)
    assert all(word in message for word in words), message


def test_values_are_converted_to_the_declared_types():
    assert TacosOptions.parse({"pick": "RANDOM", "workers": "3"}) == TacosOptions(pick="random", workers=3)
    assert ForestcollOptions.parse({"trees": 4.0, "switch_queue": "false", "pieces": "auto"}) == \
        ForestcollOptions(trees=4, pieces=None, switch_queue=False)
    assert TecclAstarOptions.parse({}) == TecclAstarOptions()  # every key defaults
    assert TecclAstarOptions.parse({"astar_greedy": "no"}).astar_greedy is False
    with pytest.raises(CcvizError, match="workers"):
        TacosOptions.parse({"workers": None})  # only options that may be automatic take null


def test_an_options_dataclass_must_use_types_users_can_type():
    @dataclass(frozen=True)
    class Odd(AlgorithmOptions):
        shape: list = option(None, "not a scalar")

    with pytest.raises(TypeError, match="bool, int, float or str"):
        Odd.specs()


def test_the_cli_refuses_a_bad_option_with_exit_2_and_one_line(capsys):
    assert main(["synth", "ring:n=4", "--algorithm", "tacos", "--opt", "pick=best"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "pick" in err and "spread, random" in err


def test_ccviz_list_prints_every_algorithms_options(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for alg in REGISTRY.values():
        for spec in alg.options.specs():
            assert f"--opt {spec.name}=" in text, (alg.name, spec.name)
    assert "--opt pick=spread|random (default spread)" in text
    assert "--opt trees=int 1..256|auto (default auto)" in text
    assert main(["list", "--json"]) == 0
    listing = {a["name"]: a for a in json.loads(capsys.readouterr().out)["algorithms"]}
    assert {"name", "kind", "collectives", "description"} <= set(listing["tacos"])  # the keys it always had
    pick = next(o for o in listing["tacos"]["options"] if o["name"] == "pick")
    assert pick == {"name": "pick", "type": "str", "default": "spread", "choices": ["spread", "random"],
                    "minimum": None, "maximum": None, "automatic": False, "meaning": TacosOptions.specs()[1].meaning}
    assert listing["ring"]["options"] == [] and "seed" in listing["tacos"]["options_used"]


def test_a_non_default_option_changes_what_the_synthesizer_does_and_is_recorded():
    topology = ccviz.load_topology("torus2d:dims=4x4")
    coll = ccviz.make_collective("allgather", topology, 1e6)
    spread = synthesize(topology, coll, "tacos", SynthOptions(seed=1))
    random_pick = synthesize(topology, coll, "tacos", SynthOptions(seed=1, extra={"pick": "random"}))
    assert spread.options["pick"] == "spread" and random_pick.options["pick"] == "random"
    assert spread.transfers != random_pick.transfers
    assert ccviz.simulate(random_pick).verified
    two = synthesize(topology, coll, "forestcoll", SynthOptions(extra={"trees": "2", "pieces": 1}))
    assert two.options["trees"] == 2 and two.options["pieces"] == 1  # recorded typed, under the same keys
    assert any(note.startswith("2 tree(s) per root") for note in two.notes)


def test_allreduce_halves_share_forestcolls_tree_count():
    topology = ccviz.load_topology("ring:n=4")
    coll = ccviz.make_collective("allreduce", topology, 1e6)
    schedule = synthesize(topology, coll, "forestcoll", SynthOptions(extra={"trees": 3}))
    assert schedule.options["trees"] == 3 and ccviz.simulate(schedule).verified


def test_listed_algorithms_load_their_code_on_first_use_and_third_party_callables_still_register(monkeypatch):
    assert isinstance(REGISTRY["tacos"].synthesize, LazyFunction)
    assert REGISTRY["tacos"].synthesize.resolve() is importlib.import_module("ccviz.synth.tacos").synthesize_tacos
    calls = []

    def mine(topology, collective, options):
        calls.append(options.settings(Mine).width)
        return REGISTRY["ring"].synthesize(topology, collective, options)

    @dataclass(frozen=True)
    class Mine(AlgorithmOptions):
        width: int = option(1, "how wide", minimum=1, maximum=4)

    monkeypatch.setitem(REGISTRY, "mine", None)
    register(Algorithm("mine", mine, frozenset({"allgather"}), "a test algorithm", options=Mine))
    topology = ccviz.load_topology("ring:n=4")
    coll = ccviz.make_collective("allgather", topology, 1e6)
    assert ccviz.synthesize(topology, coll, "mine", SynthOptions(extra={"width": 3})).algorithm == "mine"
    assert calls == [3]
    with pytest.raises(CcvizError, match="width: 5 is not a whole number >= 1 and <= 4"):
        ccviz.synthesize(topology, coll, "mine", SynthOptions(extra={"width": 5}))
    with pytest.raises(ValueError, match="module:function"):
        LazyFunction("no_colon")
