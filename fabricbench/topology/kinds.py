"""The record kind of a topology snapshot, declared to the shared reader (results/fields.py).

    fabricbench sweep --gpus 0-7 --out r.jsonl      (on GPUs, the file's first record is the snapshot)

Registered when fabricbench.topology is imported (its __init__ imports this module).
"""

from fabricbench.results.fields import register_kind

register_kind("topology", {"gpus": list, "links": list, "islands": list})
