"""What `fabricbench fabrics` prints: the built-in fabrics and families as one table (library code; the CLI
only maps flags). It sits here, not in fabrics/, because fabrics/ lies below report/ in the layer order.

    fabricbench fabrics
"""

from __future__ import annotations

from typing import Any

from fabricbench.reporting import table as tables


def render(rows: list[dict[str, Any]]) -> None:
    """fabrics.listing()'s rows: name, variables, description (with why a family is waived here), transport."""
    from rich.text import Text

    cols = [tables.Col("name", justify="left", key=True), tables.Col("variables", justify="left", prose=True),
            tables.Col("description", justify="left", prose=True),
            tables.Col("expected transport", "transport", justify="left", prose=True)]
    cells = []
    for r in rows:
        desc = Text(r["description"])
        if r.get("waived_here"):
            desc.append(f" (waived here: {r['waived_here']})", style="yellow")
        cells.append([r["name"], " ".join(f"{k}={v}" for k, v in r["env"].items()) or "(none)", desc,
                      r["expected_transport"]])
    tables.render(tables.console(), "Fabrics (custom: name:VAR=VAL[,VAR=VAL]; NCCL_NVLS_ENABLE is never set)",
                  cols, cells)
