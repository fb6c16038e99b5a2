"""`nvidia-smi topo -m` -> a ccviz fabric: the matrix a user pastes from a real box becomes GPUs and NVLink.

The matrix names, for every pair of devices, how they connect: ``NV#`` (a bonded set of # NVLinks), or a
PCIe path (``PIX`` one bridge, ``PXB`` several bridges, ``PHB`` through the host bridge, ``NODE`` across host
bridges of one NUMA node, ``SYS`` across the CPU interconnect; ``SOC`` is the old name of ``SYS``). NICs
appear as extra rows and columns (``NIC0`` or ``mlx5_0``), followed by CPU and NUMA affinity columns.

What the fabric keeps and what it assumes (every assumption is written into ``meta["assumptions"]``):
- NVLink only: GPU pairs joined by ``NV#`` get a cable of ``# x`` the per-link rate of the GPU generation;
  PCIe paths are recorded as locality, not wired (NCCL routes GPU traffic over NVLink where it exists).
- A box where every GPU pair reads the same ``NV#`` with more links than one GPU could give each of its
  peers directly (NV6 on a 16-GPU DGX-2, NV12 on A100, NV18 on H100/B200) is an NVSwitch box: each GPU gets
  one cable of ``# x rate`` to a single NVSwitch node standing for the box's NVSwitch chips.
- NICs are recorded with their nearest GPUs (the best PCIe locality in their row), not wired: one box
  has no scale-out network to reach. Each GPU's CPU affinity is kept as printed, its NUMA node
  (``meta.numa``) where the NUMA Affinity column can be told apart from its neighbours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ccviz.builders.fabric import Fabric
from ccviz.builders.layout import circle_positions, hub_positions
from ccviz.builders.modern import NVLINK4_GBPS, NVLINK5_GBPS, NVLINK_ALPHA
from ccviz.builders.presets import SPECS, hardware_model, nvls_engine_GBps
from ccviz.errors import CcvizError
from ccviz.model.topology import Topology

FIELD = "nvidia-smi"
PCIE_WORDS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")  # nearest first
CELL = re.compile(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC")
DEVICE = re.compile(r"GPU\d+|NIC\d+|mlx\d+_[A-Za-z0-9]+?(?=mlx\d|NIC\d|GPU\d|$)|mlx\d+_[A-Za-z0-9_]+")
NUMA_CELL = re.compile(r"N/A|\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*")
MAX_DEVICES = 512  # a topo matrix of one box lists tens of devices; more is not one pasted from nvidia-smi

# GB/s per NVLink per direction and links per GPU of each generation (NVIDIA's architecture whitepapers:
# V100 6 x NVLink 2 = 300 GB/s both directions; A100 12 x NVLink 3 = 600 GB/s; H100 18 x NVLink 4 = 900
# GB/s; B200 18 x NVLink 5 = 1.8 TB/s), and whether its NVSwitch sums and multicasts in the network
# (NVLink SHARP arrived with the third-generation NVSwitch of H100 systems).
GENERATIONS: dict[str, dict] = {
    "v100": {"link_GBps": 25.0, "links": 6, "nvls": False, "alpha_us": 0.7},
    "a100": {"link_GBps": 25.0, "links": 12, "nvls": False, "alpha_us": NVLINK_ALPHA},
    "h100": {"link_GBps": NVLINK4_GBPS, "links": 18, "nvls": True, "alpha_us": NVLINK_ALPHA},
    "b200": {"link_GBps": NVLINK5_GBPS, "links": 18, "nvls": True, "alpha_us": NVLINK_ALPHA},
}
SWITCHED_GUESS = {6: "v100", 12: "a100", 18: "h100"}  # uniform NV# of an NVSwitch box -> its GPU generation
# The system preset whose hardware link model (ccviz.model.link_model) a box of each generation is judged with,
# so that a real box and the preset of the same box agree; V100 has no such preset (dgx1 is the textbook rule).
MODEL_PRESETS = {"a100": "dgxa100", "h100": "dgxh100", "b200": "hgxb200"}
MODELS = ("hardware", "alphabeta")


@dataclass
class TopoMatrix:
    """The parsed matrix: device names in header order, each row's cells, and each GPU's affinity text."""

    devices: list[str]
    cells: dict[str, list[str]]
    affinity: dict[str, str] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)
    numa: dict[str, str] = field(default_factory=dict)  # GPU -> its NUMA Affinity column ("0", "0-7", "N/A")

    @property
    def gpus(self) -> list[str]:
        return [d for d in self.devices if d.startswith("GPU")]

    @property
    def nics(self) -> list[str]:
        return [d for d in self.devices if not d.startswith("GPU")]

    def entry(self, row: str, col: str) -> str:
        return self.cells[row][self.devices.index(col)]


def _fail(message: str) -> CcvizError:
    return CcvizError(f"{FIELD}: {message}", FIELD)


def _split_cells(tokens: list[str], row: str, n: int) -> tuple[list[str], list[str]]:
    """The row's first ``n`` cells (merged ones such as 'NODENODE', which issue trackers make of tabs,
    split apart) and the tokens after them (the affinity columns)."""
    cells: list[str] = []
    for i, token in enumerate(tokens):
        if len(cells) >= n:
            return cells, tokens[i:]
        parts = CELL.findall(token)
        if not parts or "".join(parts) != token:
            raise _fail(f"row {row}: {token!r} is not a topo -m entry (X, NV#, PIX, PXB, PHB, NODE, SYS) and the "
                        f"row has only {len(cells)} of its {n} entries; paste the whole matrix")
        cells.extend(parts)
    if len(cells) < n:
        raise _fail(f"row {row} has {len(cells)} entries but the header names {n} devices; paste the whole row")
    return cells[:n], []


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Read the text of ``nvidia-smi topo -m`` (tabs or spaces; the Legend below it is ignored)."""
    if not isinstance(text, str) or not text.strip():
        raise _fail("the matrix is empty; paste the output of `nvidia-smi topo -m`")
    lines = [line.rstrip() for line in text.replace("\r", "").split("\n")]
    header_at = next((i for i, line in enumerate(lines)
                      if line.split() and line.split()[0].startswith("GPU0") and "X" not in line.split()[:3]), None)
    if header_at is None:
        raise _fail("no header line starting with GPU0 (the first line of `nvidia-smi topo -m`); paste the "
                    "whole output")
    head = lines[header_at].split("CPU Affinity")[0]
    columns = [c for c in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if c in lines[header_at]]
    devices = [d for token in head.split() for d in DEVICE.findall(token)]
    if not devices or devices[0] != "GPU0":
        raise _fail(f"the header line does not list devices GPU0, GPU1, ...: {head.strip()[:60]!r}")
    if len(devices) > MAX_DEVICES:
        raise _fail(f"the header names {len(devices)} devices; one box's matrix has at most {MAX_DEVICES}")
    if len(set(devices)) != len(devices):
        raise _fail("the header names a device twice; paste the matrix as nvidia-smi printed it")
    n = len(devices)
    cells: dict[str, list[str]] = {}
    affinity: dict[str, str] = {}
    nic_names: dict[str, str] = {}
    numa: dict[str, str] = {}
    for line in lines[header_at + 1:]:
        tokens = line.split()
        if not tokens:
            continue
        legend = re.match(r"\s*(NIC\d+):\s*(\S+)", line)
        if legend:
            nic_names[legend.group(1)] = legend.group(2)
            continue
        label = next((d for d in sorted(devices, key=len, reverse=True) if tokens[0].startswith(d)), None)
        if label is None:
            continue  # the Legend, prompts, blank lines
        rest = [tokens[0][len(label):]] + tokens[1:] if tokens[0] != label else tokens[1:]
        rest = [t for t in rest if t]
        if label in cells:
            raise _fail(f"row {label} appears twice; paste one matrix")
        row, tail = _split_cells(rest, label, n)
        if row[devices.index(label)] != "X":
            raise _fail(f"row {label}: its own column reads {row[devices.index(label)]!r}, expected X; the rows "
                        "are shifted (a missing entry?)")
        cells[label] = row
        if label.startswith("GPU") and tail:
            affinity[label] = " ".join(tail)
            if columns[1:2] == ["NUMA Affinity"] and len(tail) == len(columns) and NUMA_CELL.fullmatch(tail[1]):
                numa[label] = tail[1]  # only when each column has its own cell (trackers run some together)
    matrix = TopoMatrix(devices, cells, affinity, nic_names, numa)
    missing = [g for g in matrix.gpus if g not in cells]
    if missing:
        raise _fail(f"the header names {', '.join(missing)} but their rows are missing; paste the whole matrix")
    for a in matrix.gpus:
        for b in matrix.gpus:
            x, y = matrix.entry(a, b), matrix.entry(b, a)
            if a != b and (x.startswith("NV") or y.startswith("NV")) and x != y:
                raise _fail(f"{a}->{b} reads {x} but {b}->{a} reads {y}; NVLink counts are symmetric, check the "
                            "paste")
    return matrix


def nvlink_counts(matrix: TopoMatrix) -> dict[tuple[int, int], int]:
    """``(i, j) -> links`` for every GPU pair i < j joined by NVLink."""
    gpus = matrix.gpus
    out = {}
    for i, a in enumerate(gpus):
        for j in range(i + 1, len(gpus)):
            cell = matrix.entry(a, gpus[j])
            if cell.startswith("NV"):
                out[(i, j)] = int(cell[2:])
    return out


def _is_switched(counts: dict[tuple[int, int], int], n: int) -> bool:
    """Every pair joined by the same NV# that no GPU could wire to all peers directly: an NVSwitch box."""
    values = set(counts.values())
    if n < 3 or len(counts) != n * (n - 1) // 2 or len(values) != 1:
        return False
    k = values.pop()
    return k * (n - 1) > max(g["links"] for g in GENERATIONS.values()) or k in SWITCHED_GUESS and n >= 4


def topo_to_fabric(text: str, gpu: str | None = None, name: str = "nvidia_smi", model: str = "hardware") -> Topology:
    """The fabric a ``nvidia-smi topo -m`` matrix describes; ``gpu`` (v100|a100|h100|b200) sets link rates,
    otherwise they are inferred from the NVLink counts (and the inference is written down). ``model``
    hardware (the default) declares the hardware link model of the system preset of the same generation
    (``MODEL_PRESETS``), as the presets do; alphabeta keeps the textbook rule at spec rates."""
    if model not in MODELS:
        raise CcvizError(f"model: {model!r} is not one of {', '.join(MODELS)}", "model")
    matrix = parse_topo_matrix(text)
    n = len(matrix.gpus)
    counts = nvlink_counts(matrix)
    if not counts:
        raise _fail("no GPU pair is joined by NVLink (no NV# entry); ccviz builds the fabric from NVLink, and a "
                    "PCIe-only box is not modelled: build it in the designer")
    switched = _is_switched(counts, n)
    per_gpu = next(iter(counts.values())) if switched else \
        max(sum(k for (i, j), k in counts.items() if g in (i, j)) for g in range(n))
    assumptions: list[str] = []
    if gpu is not None:
        gen = str(gpu).strip().lower()
        if gen not in GENERATIONS:
            raise CcvizError(f"gpu: unknown GPU generation {gpu!r}; choose one of {', '.join(GENERATIONS)}", "gpu")
        assumptions.append(f"GPU generation {gen} as given")
    else:
        k = next(iter(counts.values()))
        if switched and k in SWITCHED_GUESS:
            gen = SWITCHED_GUESS[k]
        else:
            gen = next((g for g, spec in GENERATIONS.items() if per_gpu <= spec["links"]), "h100")
        how = f"NV{k} between every GPU pair" if switched else f"up to {per_gpu} NVLinks per GPU"
        assumptions.append(f"GPU generation inferred as {gen} from the NVLink counts ({how}); name the GPU "
                           "generation (--gpu) to change it"
                           + (" (B200 boxes also read NV18)" if gen == "h100" else ""))
    spec = GENERATIONS[gen]
    if per_gpu > spec["links"] and not switched:
        raise _fail(f"a GPU has {per_gpu} NVLinks but a {gen} has {spec['links']}; give the right --gpu")
    rate, alpha = spec["link_GBps"], spec["alpha_us"]
    assumptions.append(f"{rate:g} GB/s per NVLink per direction ({gen}), link latency {alpha:g} us (model value)")
    fabric = Fabric()
    ids = [fabric.add_gpu(group="box0") for _ in range(n)]
    if switched:
        k = next(iter(counts.values()))
        hub = fabric.add_switch(group="box0", label="NVSwitch", copy=spec["nvls"], reduce=spec["nvls"])
        if spec["nvls"] and model == "hardware" and gen in MODEL_PRESETS:  # the preset's NVLS sum rate
            fabric.nodes[hub] = replace(fabric.nodes[hub], reduce_GBps=nvls_engine_GBps(SPECS[MODEL_PRESETS[gen]], k))
        for g in ids:
            fabric.cable(g, hub, k * rate, alpha)
        fabric.place(hub_positions(hub, ids))
        assumptions.append(f"every GPU pair reads NV{k}: an NVSwitch box; the box's NVSwitch chips are one switch "
                           f"node, each GPU cabled to it at {k} x {rate:g} = {k * rate:g} GB/s")
        assumptions.append("the NVSwitch sums and multicasts in the network (NVLink SHARP)" if spec["nvls"] else
                           f"the NVSwitch neither sums nor multicasts ({gen} systems have no NVLink SHARP)")
    else:
        for (i, j), k in sorted(counts.items()):
            fabric.cable(ids[i], ids[j], k * rate, alpha)
        fabric.place(dict(zip(ids, circle_positions(n), strict=True)))
        assumptions.append("NV# pairs are direct NVLink cables of # x the per-link rate")
    pcie = sorted({matrix.entry(a, b) for a in matrix.gpus for b in matrix.gpus
                   if a != b and not matrix.entry(a, b).startswith("NV")})
    if pcie:
        assumptions.append(f"GPU pairs without NVLink ({'/'.join(pcie)}) reach each other over PCIe; those paths "
                           "are not wired (NCCL routes over NVLink where it exists)")
    nics = _nic_locality(matrix)
    if nics:
        assumptions.append(f"{len(nics)} NIC(s) recorded with their nearest GPUs (meta.nics), not wired: one box "
                           "has no scale-out network to reach")
    meta = {"source": "nvidia-smi topo -m", "gpu": gen, "assumptions": assumptions, "nics": nics,
            "affinity": {g: matrix.affinity[g] for g in matrix.gpus if g in matrix.affinity}}
    if model == "hardware" and gen in MODEL_PRESETS:
        preset = SPECS[MODEL_PRESETS[gen]]
        meta["link_model"] = hardware_model(preset).to_dict()
        assumptions.append(f"judged with the {preset.name} preset's hardware link model: links at {preset.efficiency:.3g} "
                           "of their rate, NCCL's protocol overheads and per-operation latency, cut-through "
                           "switches (model alphabeta: the textbook rule at spec rates)")
    elif model == "hardware":
        assumptions.append(f"no system preset declares a hardware link model for {gen}: judged with the textbook "
                           "alpha-beta rule at spec rates")
    if matrix.numa:
        meta["numa"] = {g: matrix.numa[g] for g in matrix.gpus if g in matrix.numa}
        nodes = sorted(set(meta["numa"].values()))
        assumptions.append(f"NUMA affinity read per GPU (meta.numa: {len(nodes)} node set(s), "
                           f"{', '.join(nodes[:4])}); it places host threads, not GPU traffic, so it is not wired")
    kind = f"NVSwitch, NV{next(iter(counts.values()))}" if switched else "direct NVLink"
    try:
        topology = fabric.topology(name, f"{n} x {gen.upper()} from nvidia-smi topo -m ({kind})", "chassis", meta)
    except CcvizError as exc:
        raise _fail(f"the NVLink graph is not a usable fabric ({exc})") from None
    return topology


def _nic_locality(matrix: TopoMatrix) -> list[dict]:
    """Each NIC with the GPUs at its best PCIe locality (from the NIC's column of the GPU rows)."""
    out = []
    for nic in matrix.nics:
        rank = {g: matrix.entry(g, nic) for g in matrix.gpus}
        known = [w for w in rank.values() if w in PCIE_WORDS]
        if not known:
            continue
        best = min(known, key=PCIE_WORDS.index)
        out.append({"nic": nic, "name": matrix.nic_names.get(nic, nic), "locality": best,
                    "gpus": [int(g[3:]) for g, w in rank.items() if w == best]})
    return out
