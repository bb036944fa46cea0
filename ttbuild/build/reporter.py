"""doit reporter for ttbuild: doit's console lines, one line per task skipped behind a failure, and a summary."""

from __future__ import annotations

from doit.exceptions import UnmetDependency
from doit.reporter import ConsoleReporter


class BuildReporter(ConsoleReporter):
    """Like doit's console reporter (`.  task` ran, `-- task` up to date, `TaskFailed -
    taskid:task` + diagnostic), with two changes for builds with many variants: a task not
    run because its parent failed prints one `!! task  (skipped: needs failed X)` line
    instead of doit's UnmetDependency block (group tasks print nothing), and the run ends
    with a one-line count of failed and skipped tasks. Selected with DOIT_CONFIG["reporter"].
    """

    desc = "ttbuild console output"

    def __init__(self, outstream, options):
        super().__init__(outstream, options)
        self.n_failed = 0
        self.n_skipped = 0

    def add_failure(self, task, fail):
        if isinstance(fail, UnmetDependency):
            if task.actions and not task.name.startswith("_"):
                self.n_skipped += 1
                needs = " ".join(sorted(fail.message.split()))
                self.write(f"!! {task.name}  (skipped: needs failed {needs})\n")
            return
        self.n_failed += 1
        super().add_failure(task, fail)

    def complete_run(self):
        # doit repeats a failed task's captured output; ours is empty unless a stage prints.
        self.failures = [f for f in self.failures
                         if any(a.out or a.err for a in f["task"].actions)]
        super().complete_run()
        if self.n_failed or self.n_skipped:
            self.write(f"ttbuild: {self.n_failed} task(s) failed, {self.n_skipped} skipped behind them\n")
