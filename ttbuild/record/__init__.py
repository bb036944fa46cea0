"""`ttbuild record`: what a Triton process launches, as variant rows; records in, rows out (stdlib only, never imports triton).

A recorded process (ttbuild.record.hook, loaded by `ttbuild record -- CMD`, by
`TTBUILD_RECORD=DIR` through the startup hook, or by the pytest plugin) appends one JSON line
per event to `DIR/<host>-<pid>.jsonl` (ttbuild.record.store). This package turns those lines,
and the miss log a served process writes (ttbuild.runtime.serve), into variant rows
(ttbuild.record.rows) and tuning tables (ttbuild.record.tuning).
"""

from .rows import RecordError, merge_records, rows_text
from .store import read_records

__all__ = ["RecordError", "merge_records", "rows_text", "read_records"]
