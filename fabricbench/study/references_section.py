"""The study report's "Is this normal?" section: the study's sweep beside the published figures of the same
platform (fabricbench/references decides what matches; this only lays it out).

    fabricbench study ... && fabricbench report study/
"""

from __future__ import annotations

from fabricbench import references
from fabricbench.report.document import Document
from fabricbench.results.schema import CollectiveResult


def add(doc: Document, sweep: list[CollectiveResult]) -> None:
    lines = references.summary([r.to_dict() for r in sweep])
    if lines:
        doc.section("Is this normal?", intro="Each measured group at its largest size, beside the published "
                                             "figures of the same GPUs, count and collective (docs/references.md "
                                             "lists the sources).").bullets(lines)
