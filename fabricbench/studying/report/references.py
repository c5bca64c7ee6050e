"""The study report's "Is this normal?" section: the study's sweep beside the published figures of the same
platform (fabricbench/references decides what matches; this only lays it out).

    fabricbench study ... && fabricbench report study/
"""

from __future__ import annotations

from fabricbench import references
from fabricbench.reporting.document import Document
from fabricbench.results.schema import CollectiveResult


def add(doc: Document, sweep: list[CollectiveResult]) -> None:
    # a report's bullets wrap themselves; a study of unnamed GPUs (gloo ranks) has no platform to compare with
    lines = references.summary([r.to_dict() for r in sweep], width=10**6, unnamed_line=False)
    if lines:
        doc.section("Is this normal?", intro="Each measured group at its largest size, beside the published "
                                             "figures of the same GPUs, count and collective (docs/references.md "
                                             "lists the sources).").bullets(lines)
