"""Python's cyclic garbage collector in a build's main process: paused while the task graph is generated and checked, resumed with the graph frozen once a task executes.

A build process holds its task graph (variants, task dicts, doit's Task and node objects, the
state DB's rows: about 500,000 objects for 3000 variants) from start to exit. Every automatic
collection of the oldest generation walks all of it again and frees nothing: 0.8 s of a 3.5 s
no-op rebuild of 3000 variants (`benchmarks/bench_build.py --stages fake --variants 3000
--files 75`), the same in `ttbuild list`. The graph phase therefore runs with automatic
collection off. The first task that executes (`resume`, from the actions and from the
reporter, which a `-j` build's main process calls as it hands a task to a worker) freezes what
exists (`gc.freeze`: never traversed again) and turns collection back on, so compiles in this
process collect their own cycles at the usual cost. Forked processes (doit's `-j` workers, stage
runners) collect as usual from their start. Python docs: `gc.disable`, `gc.freeze`,
`os.register_at_fork`.
"""

from __future__ import annotations

import contextlib
import gc
import os

_paused = False          # this process paused automatic collection in `graph_phase`
_frozen = False          # `resume` froze the graph (undone when the phase ends)
_fork_hook = False       # the after-fork hook is registered (once per process)
_may_freeze = False      # nothing was frozen before the phase (unfreeze would release that too)
_exits_after = False     # the process ends with the phase (`exit_after_phase`)


def _after_fork_in_child() -> None:
    global _paused, _frozen
    if _paused:
        _paused = _frozen = False
        gc.enable()


@contextlib.contextmanager
def graph_phase():
    """Run the body (a build, `list`, `explain`) with automatic cyclic collection paused until
    `resume`; on leaving, objects `resume` froze are unfrozen and collection is as it was. A
    no-op when collection is already off (the caller's choice) or in a nested phase."""
    global _paused, _frozen, _fork_hook, _may_freeze
    if _paused or not gc.isenabled():
        yield
        return
    if not _fork_hook:
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook = True
    _may_freeze = gc.get_freeze_count() == 0
    gc.disable()
    _paused = True
    try:
        yield
    finally:
        if _exits_after:
            gc.freeze()  # see exit_after_phase
        elif _frozen:
            gc.unfreeze()  # the caller (a test, a long-lived process) gets its objects back to collect
        _paused = _frozen = False
        gc.enable()


def exit_after_phase() -> None:
    """Declare that this process exits once its graph phase ends (the `ttbuild` command, see
    ttbuild.__main__.exit_with): the phase then leaves everything frozen instead of collecting
    it. Turned back on, collection would first walk every object the phase allocated (0.25 s for
    3000 variants) and the interpreter's shutdown would walk the graph's cycles again (0.4 s),
    to free memory the OS takes back whole at exit anyway."""
    global _exits_after
    _exits_after = True


def resume() -> None:
    """A task is about to execute in this process: freeze the graph built so far and collect
    again from here (what a compile leaves). Cheap and idempotent; nothing outside a paused
    `graph_phase`."""
    global _frozen
    if _paused and not gc.isenabled():
        if _may_freeze:
            gc.freeze()
            _frozen = True
        gc.enable()
