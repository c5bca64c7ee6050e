"""topology: the wiring as NVML or `nvidia-smi topo -m` reports it — GPU count and name, the link of every
pair, the NVLink islands, uniformity, PCIe generation and width.

    [[check]]
    name = "nvswitch"
    kind = "topology"
    gpu_count = 8
    link = "NV18"            # every pair exactly this (an NVL quad's NV6 or a PCIe SYS pair fails, named)
    uniform = true

PCIe generation and width are judged on the link's maximum for this GPU in this slot (NVML's
MaxPcieLink*: a riser or slot that trains lower shows here), because the current values drop while the
GPU idles to save power.
"""

from __future__ import annotations

from fabricbench.qualifying.checks.base import Check, CheckKind
from fabricbench.qualifying.fields import Field
from fabricbench.qualifying.verdict import Item, at_least, equal, error, waived
from fabricbench.topology.links import link_rank

FIELDS = {
    "gpu_count": Field("int", "GPUs the node must have", at_least=1),
    "gpu_name": Field("str", "text every GPU's name must contain, e.g. \"H200\""),
    "link": Field("link", "the link every pair must have, e.g. \"NV18\""),
    "min_nvlinks": Field("int", "bonded NVLinks every pair must have at least", at_least=1),
    "islands": Field("islands", "the NVLink islands exactly, e.g. [[0,1,2,3],[4,5,6,7]]"),
    "island_count": Field("int", "how many NVLink islands", at_least=1),
    "island_link": Field("link", "the link every pair inside each island must have, e.g. \"NV6\""),
    "uniform": Field("bool", "every pair has the same link (NVSwitch) or not"),
    "pcie_gen": Field("int", "minimum PCIe generation of every GPU's link", at_least=1),
    "pcie_width": Field("int", "minimum PCIe lanes of every GPU's link", at_least=1),
}


def judge(check: Check, ctx) -> list[Item]:
    topo = ctx.topology()
    if topo is None:
        return [error("topology", "no topology here: NVML and `nvidia-smi topo -m` did not answer "
                                  "(on a saved output use --topo-file)")]
    p = check.params
    items: list[Item] = []
    n = len(topo.gpus)
    if p.get("gpu_count") is not None:
        items.append(equal("gpu_count", n, p["gpu_count"], subject="node"))
    items += _gpu_name(p, topo)
    pairs = topo.pairs()
    for key in ("link", "min_nvlinks", "uniform"):
        if p.get(key) is not None and not pairs:
            items.append(waived(key, f"{n} GPU: a pair check needs at least 2 GPUs"))
    if p.get("link") and pairs:
        want = p["link"]
        # worst link first: the headline names the pair that hurts most (an NVL quad's SYS pair)
        bad = sorted(((a, b) for a, b in pairs if topo.link(a, b) != want),
                     key=lambda ab: (-link_rank(topo.link(*ab))[0], -link_rank(topo.link(*ab))[1], ab))
        for a, b in bad:
            items.append(equal("link", topo.link(a, b), want, subject=f"GPU{a}-GPU{b}"))
        if not bad:
            items.append(equal("link", want, want, subject=f"all {len(pairs)} pairs"))
    if p.get("min_nvlinks") and pairs:
        want = p["min_nvlinks"]
        worst = max(pairs, key=lambda ab: (-topo.nvlinks(*ab), ab))
        bad = [(a, b) for a, b in pairs if topo.nvlinks(a, b) < want]
        for a, b in bad:
            items.append(at_least("min_nvlinks", float(topo.nvlinks(a, b)), float(want), unit="links",
                                  subject=f"GPU{a}-GPU{b} ({topo.link(a, b)})"))
        if not bad:
            items.append(at_least("min_nvlinks", float(topo.nvlinks(*worst)), float(want), unit="links",
                                  subject=f"weakest pair GPU{worst[0]}-GPU{worst[1]}"))
    if p.get("islands") is not None:
        got = tuple(tuple(i) for i in topo.islands())
        items.append(equal("islands", _islands(got), _islands(p["islands"]), subject="node",
                           ok=tuple(sorted(got)) == p["islands"]))
    if p.get("island_link"):
        want = p["island_link"]
        inside = sorted({(a, b) for isl in topo.islands() for i, a in enumerate(isl) for b in isl[i + 1:]})
        if not inside:
            items.append(waived("island_link", "no NVLink island of 2 or more GPUs"))
        bad = [(a, b) for a, b in inside if topo.link(a, b) != want]
        for a, b in bad:
            items.append(equal("island_link", topo.link(a, b), want, subject=f"GPU{a}-GPU{b}"))
        if inside and not bad:
            items.append(equal("island_link", want, want, subject=f"all {len(inside)} pairs inside islands"))
    if p.get("island_count") is not None:
        items.append(equal("island_count", len(topo.islands()), p["island_count"], subject="node"))
    if p.get("uniform") is not None and pairs:
        got = topo.uniform
        why = None
        if got != p["uniform"] and not got:
            worst = max(pairs, key=lambda ab: link_rank(topo.link(*ab)))
            why = f"GPU{worst[0]}-GPU{worst[1]} is {topo.link(*worst)}"
        items.append(equal("uniform", got, p["uniform"], subject="node", reason=why))
    items += _pcie(p, topo)
    return items


def _gpu_name(p, topo) -> list[Item]:
    """Every GPU's name contains gpu_name (each that does not is named); waived when the source names none."""
    items: list[Item] = []
    n = len(topo.gpus)
    if p.get("gpu_name"):
        want = p["gpu_name"]
        names = [(g.index, g.name) for g in topo.gpus]
        if all(name is None for _, name in names):
            items.append(waived("gpu_name", f"the topology source ({topo.source}) does not name the GPUs"))
        else:
            bad = [(i, name) for i, name in names if name is None or want.lower() not in name.lower()]
            for i, name in bad:
                items.append(equal("gpu_name", name, f"*{want}*", subject=f"GPU{i}", ok=False))
            if not bad:
                items.append(equal("gpu_name", names[0][1], f"*{want}*", subject=f"all {n} GPUs", ok=True))
    return items


def _pcie(p, topo) -> list[Item]:
    """pcie_gen and pcie_width: every GPU's link maximum at least the spec's (see the module docstring)."""
    items: list[Item] = []
    for key, attr in (("pcie_gen", "gen"), ("pcie_width", "width")):
        if p.get(key) is None:
            continue
        vals = [(g.index, getattr(g, f"pcie_{attr}_max") or getattr(g, f"pcie_{attr}")) for g in topo.gpus]
        if all(v is None for _, v in vals):
            items.append(waived(key, f"the topology source ({topo.source}) has no PCIe link facts"))
            continue
        bad = [(i, v) for i, v in vals if v is None or v < p[key]]
        for i, v in bad:
            items.append(at_least(key, float(v or 0), float(p[key]), subject=f"GPU{i}"))
        if not bad:
            i, v = min(vals, key=lambda iv: iv[1])
            items.append(at_least(key, float(v), float(p[key]), subject=f"lowest GPU{i}"))
    return items


def _islands(isl) -> str:
    return " ".join("[" + ",".join(map(str, i)) + "]" for i in isl)


TOPOLOGY = CheckKind(name="topology", description="GPU count and name, links per pair, islands, PCIe",
                     fields=FIELDS, judge=judge, threshold_keys=tuple(FIELDS), measures=False)
