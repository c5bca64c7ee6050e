"""The library decides what the command decides: machine defaults, and a config that checks itself.

    import fabricbench; fabricbench.sweep(fabricbench.SweepConfig(engine="torch", gpus=[0, 1]))   (as the command does)
"""

from __future__ import annotations

import math

import pytest

from fabricbench.errors import UsageError
from fabricbench.measuring.api import resolve_devices
from fabricbench.measuring.config import SweepConfig
from fabricbench.sizes import SizeSweep


@pytest.mark.parametrize("fields,msg", [
    ({"iters": 0}, "--iters 0"),
    ({"timeout_s": math.nan}, "--timeout nan"),
    ({"timeout_s": math.inf}, "--timeout inf"),
    ({"adaptive": 0.02, "max_iters": 0}, "--max-iters 0"),
    ({"ops": ("allreduce",)}, "unknown op"),
    ({"dtype": "float8"}, "unknown dtype"),
    ({"sizes": 1.5}, "give a SizeSweep, a size text"),  # text, a size or a list are taken (SweepConfig._friendly)
    ({"engine": "torch", "backend": "mpi"}, "choose nccl or gloo"),
    ({"gpus": (0, 0)}, "name each GPU once"),
    ({"nprocs": 4000, "engine": "torch", "backend": "gloo"}, "per CPU core"),  # inside 1-4096, above 4 per core
        ({"nprocs": 10**6, "engine": "torch", "backend": "gloo"}, "--nprocs 1000000: outside 1 to 4,096"),
])
def test_sweep_config_checks_itself(fields, msg):
    """No path (make_config, a caller's dataclass, dataclasses.replace) can hold an unchecked config."""
    import dataclasses

    with pytest.raises(UsageError, match=msg.replace("(", r"\(")):
        SweepConfig(**fields)
    with pytest.raises(UsageError, match=msg.replace("(", r"\(")):
        dataclasses.replace(SweepConfig(sizes=SizeSweep.parse("1K")), **fields)


def test_machine_defaults_live_in_the_library():
    torch_two = SweepConfig(engine="torch", gpus=(0, 1), sizes=SizeSweep.parse("1K"))
    cfg, notes = resolve_devices(torch_two, visible=2)
    assert (cfg.backend, cfg.gpus, cfg.nprocs, notes) == ("nccl", (0, 1), 2, [])
    cfg, notes = resolve_devices(SweepConfig(engine="torch", sizes=SizeSweep.parse("1K")), visible=0)
    assert (cfg.backend, cfg.gpus, cfg.nprocs) == ("gloo", None, None)
    cfg, _ = resolve_devices(SweepConfig(sizes=SizeSweep.parse("1K")), visible=4)
    assert cfg.gpus == (0, 1, 2, 3) and cfg.nprocs is None  # native: one process drives them all
    with pytest.raises(UsageError, match=r"names 2 GPU\(s\) up to 1 but 1 are visible"):
        resolve_devices(torch_two, visible=1)
    _, notes = resolve_devices(SweepConfig(engine="torch", backend="gloo", gpus=(0,), sizes=SizeSweep.parse("1K")),
                               visible=0)
    assert notes == ["--gpus is ignored by --backend gloo (CPU ranks)"]


def test_fabricbench_sweep_takes_the_same_defaults(monkeypatch):
    import fabricbench.gpus
    import fabricbench.measuring.runner as runner

    seen = []
    monkeypatch.setattr(fabricbench.gpus, "visible_gpu_count", lambda: 2)
    monkeypatch.setattr(runner, "run_sweep", lambda config, **kw: seen.append(config) or [])
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert fabricbench.sweep(fabricbench.SweepConfig(engine="torch", gpus=[0, 1], sizes="1K")).records == []
    assert (seen[0].backend, seen[0].gpus, seen[0].nprocs) == ("nccl", (0, 1), 2)
