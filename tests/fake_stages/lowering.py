"""The fake lowering stages' shared `run`: output = stage name, input hash, options JSON (ttgir adds module attributes)."""

import hashlib
import json
import os
import time

from ttbuild.errors import CompilationError


def trace(stage: str) -> None:
    """Append `stage` to $TTBUILD_FAKE_RUNLOG and sleep $TTBUILD_FAKE_DELAY seconds, when set."""
    if os.environ.get("TTBUILD_FAKE_RUNLOG"):
        with open(os.environ["TTBUILD_FAKE_RUNLOG"], "a") as fh:
            fh.write(stage + "\n")
    if os.environ.get("TTBUILD_FAKE_DELAY"):
        time.sleep(float(os.environ["TTBUILD_FAKE_DELAY"]))


def lower(stage: str, inputs, options) -> dict:
    """One fake lowering: `{stage: b"<stage> <sha256 of input> <options JSON>[ attrs]"}`."""
    trace(stage)
    (data,) = inputs.values()
    if stage == "ttir":
        withs = json.loads(data).get("with_nodes")
        if withs:
            raise CompilationError("unsupported construct: with", stage="ttir", node_id=withs[0])
    extra = ""
    if stage == "ttgir":
        # the closing line of a generic-form module, whose attributes the metadata task reads
        extra = '\n}) {"ttg.num-warps" = %d : i32, "ttg.shared" = 0 : i32} : () -> ()' % options["num_warps"]
    body = "%s %s %s%s" % (stage, hashlib.sha256(data).hexdigest(), json.dumps(options, sort_keys=True), extra)
    return {stage: body.encode()}
