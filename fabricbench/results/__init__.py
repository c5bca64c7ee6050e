"""One result schema for every engine and command: records, the JSONL writer, the run context.

    fabricbench sweep --out results.jsonl     (one JSON object per measurement, flushed as measured)
"""

from fabricbench.results.schema import SCHEMA_VERSION, CollectiveResult, header
from fabricbench.results.writer import ResultWriter, read_results

__all__ = ["SCHEMA_VERSION", "CollectiveResult", "ResultWriter", "header", "read_results"]
