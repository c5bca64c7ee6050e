"""A node_exporter textfile of a qualification (or a fleet), for fleets watched through Prometheus.

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/ --prometheus /var/lib/node_exporter/fabricbench.prom
    fabricbench qualify --fleet all-hosts.jsonl --prometheus fleet.prom

Series (every one labelled with `host`; a fleet file holds every host):
    fabricbench_busbw_gbps{op, size_bytes, gpus, fabric, dtype}       bus bandwidth measured (nccl-tests' busbw)
    fabricbench_check_status{check, kind, severity, code}              the check's severity as a number:
                                                                       0 pass, 1 info, 2 warning, 3 unknown,
                                                                       4 critical (alert on > 1)
    fabricbench_qualify_timestamp_seconds{spec}                        when the run was judged (Unix time)
    fabricbench_qualify_worst_severity{spec}                           the worst check's number, as above
Fleet files add fabricbench_fleet_outliers{host} (figures on which a host is an outlier).

prometheus_client renders the text (its registry and generate_latest); outputs.write_atomic writes it (a
temp file renamed into place, so the collector never reads half a file, and never through a link).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any, Iterable

from fabricbench.errors import UsageError
from fabricbench.files import refuse_link, write_atomic
from fabricbench.qualifying.verdict import RANK, Verdict
from fabricbench.results.status import TIMED_COLLECTIVE, Severity

try:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily
except ImportError:  # a declared dependency; a machine without it can still qualify, without --prometheus
    CollectorRegistry = generate_latest = GaugeMetricFamily = None

BUSBW_LABELS = ("host", "op", "size_bytes", "gpus", "fabric", "dtype")
STATUS_LABELS = ("host", "check", "kind", "severity", "code")
# name -> (help, label names); every series fabricbench writes
METRICS = {
    "fabricbench_busbw_gbps": ("Bus bandwidth measured, GB/s (nccl-tests busbw)", BUSBW_LABELS),
    "fabricbench_check_status": ("Check severity: 0 pass, 1 info, 2 warning, 3 unknown, 4 critical", STATUS_LABELS),
    "fabricbench_qualify_timestamp_seconds": ("When the qualification was judged (Unix time)", ("host", "spec")),
    "fabricbench_qualify_worst_severity": ("The worst check severity: 0 pass, 1 info, 2 warning, 3 unknown, "
                                           "4 critical", ("host", "spec")),
    "fabricbench_fleet_outliers": ("Figures on which the host is a fleet outlier", ("host",)),
}


def busbw_labels(r: dict[str, Any], host: str | None = None) -> dict[str, str] | None:
    """The labels of one collective record's busbw series, or None when it has no busbw to show."""
    if r.get("kind") != "collective" or r.get("inplace") or r.get("busbw_gbps") is None \
            or r.get("status") not in TIMED_COLLECTIVE:
        return None
    return {"host": str(host or r.get("host") or ""), "op": str(r.get("op")),
            "size_bytes": str(r.get("requested_bytes")), "gpus": ",".join(map(str, r.get("gpus") or [])),
            "fabric": str(r.get("fabric") or "default"), "dtype": str(r.get("dtype"))}


def check_path(path: str | os.PathLike) -> None:
    """Refuse, before anything runs, a --prometheus path that names something other than a regular file:
    the textfile is renamed into place, which would replace a device (/dev/full) or a FIFO with a file."""
    p = Path(path)
    refuse_link(p, what="--prometheus")
    try:
        st = p.stat()
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(f"--prometheus {p}: cannot use it ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"--prometheus {p}: exists and is not a regular file (a device, FIFO or folder); "
                         f"give a file path such as /var/lib/node_exporter/textfile/fabricbench.prom")


class TextFile:
    """The samples of one textfile; add a node (or 12,500), then write once.

    The samples are kept as plain tuples and handed to prometheus_client as metric families by a
    collector registered in a CollectorRegistry (its documented custom-collector path): a Gauge child per
    label set costs ~100 µs, too slow for a fleet's 75,000 series."""

    def __init__(self) -> None:
        if CollectorRegistry is None:
            raise UsageError("--prometheus needs the prometheus-client package: pip install prometheus-client")
        self.samples: dict[str, dict[tuple[str, ...], float]] = {name: {} for name in METRICS}
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def collect(self):  # the prometheus_client Collector protocol
        for name, (doc, labels) in METRICS.items():
            if not self.samples[name]:
                continue
            fam = GaugeMetricFamily(name, doc, labels=labels)
            for values, v in self.samples[name].items():
                fam.add_metric(values, v)
            yield fam

    def _set(self, name: str, labels: dict[str, str], value: float) -> None:
        self.samples[name][tuple(labels[k] for k in METRICS[name][1])] = float(value)

    def add_records(self, records: Iterable[dict[str, Any]], host: str | None = None) -> None:
        for rec in records:
            labels = busbw_labels(rec, host)
            if labels is not None:
                self._set("fabricbench_busbw_gbps", labels, rec["busbw_gbps"])

    def add_busbw(self, labels: dict[str, str], value: float) -> None:
        self._set("fabricbench_busbw_gbps", labels, value)

    def add_status(self, host: str, check: str, kind: str, severity: Severity, code: str) -> None:
        self._set("fabricbench_check_status", {"host": host, "check": check, "kind": kind, "severity": severity,
                                                "code": code}, RANK[severity])

    def add_verdicts(self, host: str, spec: str, verdicts: list[Verdict], when: float | None = None) -> None:
        for v in verdicts:
            self.add_status(host, v.check, v.kind, v.severity, v.code)
        self.add_summary(host, spec, max((RANK[v.severity] for v in verdicts), default=0), when)

    def add_summary(self, host: str, spec: str, worst: int, when: float | None = None) -> None:
        self._set("fabricbench_qualify_timestamp_seconds", {"host": host, "spec": spec},
                  time.time() if when is None else when)
        self._set("fabricbench_qualify_worst_severity", {"host": host, "spec": spec}, worst)

    def add_outliers(self, host: str, count: int) -> None:
        self._set("fabricbench_fleet_outliers", {"host": host}, count)

    def add_node(self, host: str, *, busbw: list[dict[str, str]], values: list[float],
                 checks: dict[str, tuple[Severity, str]], worst: int, outliers: int) -> None:
        """One node of a fleet: its busbw figures (labels and values), its checks (severity, code), its
        worst severity's number and the figures on which it is an outlier."""
        for labels, value in zip(busbw, values):
            self.add_busbw({**labels, "host": host}, value)
        for check, (sev, code) in checks.items():
            self.add_status(host, check, "", sev, code)
        self.add_summary(host, "fleet", worst)
        self.add_outliers(host, outliers)

    def write(self, path: str) -> str:
        check_path(path)
        # the exposition text rendered here and written by outputs.write_atomic: write_to_textfile opens
        # a temporary file of a guessable name beside `path`, and would write through a link planted there
        write_atomic(path, generate_latest(self.registry), what="--prometheus")
        return str(path)
