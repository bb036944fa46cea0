"""doit's runner, made to keep the saved state of tasks it skips behind a failure (make's semantics); installed explicitly by ttbuild.graph.namespace."""

from __future__ import annotations

_ORIGINAL = None


def keep_skipped_state() -> None:
    """Keep the saved state of tasks doit skips because a task they depend on failed.

    doit's Runner._handle_task_error removes the success entry of every such task, so fixing a
    broken kernel reran its whole chain even when the fixed stage's output came out as it was
    before the break (issue 14, "incremental edges"). Kept, the skipped task's own check decides
    after the fix: the content checksums of its inputs and the presence of its targets, as make
    would. Failed tasks still lose theirs. Idempotent; affects every doit Runner in the process
    (MRunner, the `-j` one, inherits the method)."""
    global _ORIGINAL
    if _ORIGINAL is not None:
        return
    from doit import runner
    from doit.exceptions import UnmetDependency

    original = runner.Runner._handle_task_error

    def _handle_task_error(self, node, base_fail):
        if not isinstance(base_fail, UnmetDependency):
            return original(self, node, base_fail)
        self.dep_manager.remove_success = _keep  # this call only; the class method comes back below
        try:
            return original(self, node, base_fail)
        finally:
            del self.dep_manager.remove_success

    runner.Runner._handle_task_error = _handle_task_error
    _ORIGINAL = original


def _keep(task) -> None:
    """Stands in for Dependency.remove_success while a skipped task is reported."""
