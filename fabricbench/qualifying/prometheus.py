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

prometheus_client writes the file (its registry and write_to_textfile: a temp file renamed into place, so
the collector never reads half a file).
"""

from __future__ import annotations

import time
from typing import Any, Iterable

from fabricbench.errors import UsageError
from fabricbench.files import OutputError
from fabricbench.qualifying.verdict import RANK, Verdict

try:
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile
except ImportError:  # a declared dependency; a machine without it can still qualify, without --prometheus
    CollectorRegistry = Gauge = write_to_textfile = None

BUSBW_LABELS = ("host", "op", "size_bytes", "gpus", "fabric", "dtype")


def busbw_labels(r: dict[str, Any], host: str | None = None) -> dict[str, str] | None:
    """The labels of one collective record's busbw series, or None when it has no busbw to show."""
    if r.get("kind") != "collective" or r.get("inplace") or r.get("busbw_gbps") is None \
            or r.get("status") not in ("ok", "wrong"):
        return None
    return {"host": str(host or r.get("host") or ""), "op": str(r.get("op")),
            "size_bytes": str(r.get("requested_bytes")), "gpus": ",".join(map(str, r.get("gpus") or [])),
            "fabric": str(r.get("fabric") or "default"), "dtype": str(r.get("dtype"))}


class TextFile:
    """The registry and its gauges; add a node (or many), then write once."""

    def __init__(self) -> None:
        if CollectorRegistry is None:
            raise UsageError("--prometheus needs the prometheus-client package: pip install prometheus-client")
        self.registry = CollectorRegistry()
        r = self.registry
        self.busbw = Gauge("fabricbench_busbw_gbps", "Bus bandwidth measured, GB/s (nccl-tests busbw)",
                           BUSBW_LABELS, registry=r)
        self.status = Gauge("fabricbench_check_status", "Check severity: 0 pass, 1 info, 2 warning, 3 unknown, "
                            "4 critical", ("host", "check", "kind", "severity", "code"), registry=r)
        self.stamp = Gauge("fabricbench_qualify_timestamp_seconds", "When the qualification was judged (Unix "
                           "time)", ("host", "spec"), registry=r)
        self.worst = Gauge("fabricbench_qualify_worst_severity", "The worst check severity: 0 pass, 1 info, "
                           "2 warning, 3 unknown, 4 critical", ("host", "spec"), registry=r)
        self.outliers: Any = None

    def add_records(self, records: Iterable[dict[str, Any]], host: str | None = None) -> None:
        for rec in records:
            labels = busbw_labels(rec, host)
            if labels is not None:
                self.busbw.labels(**labels).set(rec["busbw_gbps"])

    def add_busbw(self, labels: dict[str, str], value: float) -> None:
        self.busbw.labels(**labels).set(value)

    def add_verdicts(self, host: str, spec: str, verdicts: list[Verdict], when: float | None = None) -> None:
        for v in verdicts:
            self.status.labels(host=host, check=v.check, kind=v.kind, severity=v.severity,
                               code=v.code).set(RANK[v.severity])
        self.add_summary(host, spec, max((RANK[v.severity] for v in verdicts), default=0), when)

    def add_summary(self, host: str, spec: str, worst: int, when: float | None = None) -> None:
        self.stamp.labels(host=host, spec=spec).set(time.time() if when is None else when)
        self.worst.labels(host=host, spec=spec).set(worst)

    def add_outliers(self, host: str, count: int) -> None:
        if self.outliers is None:
            self.outliers = Gauge("fabricbench_fleet_outliers", "Figures on which the host is a fleet outlier",
                                  ("host",), registry=self.registry)
        self.outliers.labels(host=host).set(count)

    def write(self, path: str) -> str:
        try:
            write_to_textfile(str(path), self.registry)
        except OSError as e:
            raise OutputError(f"--prometheus {path}: cannot write it ({e.strerror}); choose a writable "
                              f"path") from None
        return str(path)
