"""Qualification: turn measurements into verdicts against a declarative spec.

    fabricbench qualify --spec builtin:h200-sxm-8 --out q/
    fabricbench qualify --init my-node.toml --from q/results.jsonl --factor 0.9
    fabricbench qualify --fleet node1/ node2/ node3/ --out fleet/

Layers: spec.py (TOML -> Spec, every mistake exit 2), checks/ (one module per kind + CHECKS), context.py
and children.py (measure each unit once, record it), verdict.py, junit.py, report.py, figures.py (the
figures a baseline and a fleet compare), fleet.py, init_spec.py (a spec from results), config.py (QualifyConfig
and FleetConfig: the options, checked when built), api.py (the library entry points, retries, and the
--baseline verdict); codes.py (stable finding codes and actions), plan.py (what a --level runs and how
long: --dry-run), prometheus.py (the node_exporter textfile), inputs.py (results files read back; the
fleet's streamed).
"""

from fabricbench.qualifying import kinds as _kinds  # noqa: F401  (registers qualify's record kinds)
