"""A study directory read back: its plan, the latest attempt of every unit and that attempt's records.

    fabricbench report run/        (builds the report from this, measuring nothing)

results.jsonl holds, in order: a "plan" record per start (the config and the units), then for each unit
attempt its records (each tagged `study: {unit, attempt}`) followed by one "study_unit" record (name,
kind, fabric, status, duration, commands). A unit run again by --resume appends a new attempt; only the
latest attempt of each unit counts, so nothing is ever rewritten or lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fabricbench.errors import UsageError
from fabricbench.results import records as result_records
from fabricbench.results.status import Status, parse
from fabricbench.importing.beside import is_imported

RESULTS = "results.jsonl"
T = TypeVar("T")


@dataclass(kw_only=True)
class StudyRecords:
    out_dir: Path
    plans: list[dict[str, Any]] = field(default_factory=list)  # every start, oldest first
    units: dict[str, dict[str, Any]] = field(default_factory=dict)  # unit name -> its latest study_unit record
    records: list[dict[str, Any]] = field(default_factory=list)  # the latest attempt's records of each unit
    warnings: list[str] = field(default_factory=list)  # lines of results.jsonl that could not be read

    @property
    def plan(self) -> dict[str, Any] | None:
        return self.plans[-1] if self.plans else None

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def typed(self, cls: type[T]) -> list[T]:
        """The records of cls.KIND (CollectiveResult, TrainResult) as cls, as results/records.py types a
        file's: what the report reads fields from, instead of a dict it checks again."""
        return result_records.Records(path=str(self.out_dir / RESULTS), records=self.records).typed(cls)

    def status(self, unit: str) -> Status | None:
        """The status of a unit's latest attempt (the reader checked it is one a study unit can have)."""
        u = self.units.get(unit)
        return parse(u.get("status"), "study_unit") if u else None


def load(out_dir: str | Path, *, must_exist: bool = True) -> StudyRecords:
    """The study in out_dir. must_exist: a folder without results.jsonl, or without a readable plan (the
    reader skipped it: results/fields.py checks it against studying/kinds.py), is a one-line UsageError."""
    out = Path(out_dir)
    path = out / RESULTS
    sr = StudyRecords(out_dir=out)
    if not path.exists():
        if must_exist:
            raise UsageError(f"{out}: no {RESULTS} here; run `fabricbench study --out {out}` first")
        return sr
    pending: dict[tuple[str, str], list[dict[str, Any]]] = {}
    got = result_records.read(path, what="study results")  # damaged lines skipped, with warnings
    sr.warnings = got.warnings
    for rec in got.records:
        kind = rec.get("kind")
        if kind == "plan" and rec.get("study"):
            sr.plans.append(rec)
        elif kind == "study_unit":
            sr.units[rec["name"]] = rec
        elif is_imported(rec):  # `fabricbench import --out DIR/results.jsonl`: shown beside the study's own
            sr.records.append(rec)
        else:
            tag = rec.get("study") or {}
            if tag.get("unit"):
                pending.setdefault((tag["unit"], tag.get("attempt", "")), []).append(rec)
    for name, u in sr.units.items():
        sr.records.extend(pending.get((name, u.get("attempt", "")), []))
    if must_exist and sr.plan is None:  # report, advise --results: a folder they cannot read is one line
        why = next((w.split(": ", 1)[-1] for w in sr.warnings if "plan record" in w), None)
        raise UsageError(f"{out}: its {RESULTS} holds no readable study plan record{f' ({why})' if why else ''}; "
                         f"is it a `fabricbench study --out DIR` folder?")
    return sr
