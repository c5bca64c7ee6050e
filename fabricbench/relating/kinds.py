"""The record kind relate writes, declared to the shared reader (results/fields.py).

    fabricbench study ... --out run/      (the study keeps relate's rows in run/results.jsonl)

Registered when fabricbench.relating is imported (its __init__ imports this module).
"""

from fabricbench.results.fields import register_kind

register_kind("relate", {"rows": [dict]})
