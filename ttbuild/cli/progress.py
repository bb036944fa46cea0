"""The terminal display of `ttbuild build`: a rich live progress line while it runs, a summary table and the failures at the end."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ttbuild.graph.reporter import COLUMNS, HEADINGS, BuildReporter


class RichBuildReporter(BuildReporter):
    """Same counting as BuildReporter (whose docstring defines the columns), shown as a live
    bar `stages done/total, cached, failed, current kernel, elapsed` instead of one line per
    task; failures are printed once, after the summary table. Chosen by the CLI on a TTY
    when `CI` is not set."""

    desc = "ttbuild rich terminal display"

    def __init__(self, outstream, options):
        super().__init__(outstream, options)
        self.console = Console(file=outstream, highlight=False)
        self.progress = Progress(
            TextColumn("[bold]building"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"), TimeElapsedColumn(),
            TextColumn("{task.fields[current]}", style="dim"),
            console=self.console, transient=True)
        self.bar = None

    def _refresh(self, current: str | None = None):
        if self.bar is None:
            return
        st = self.stats
        counts = (f"[green]{st.total_of('ran')} ran[/] [cyan]{st.total_of('cached')} cached[/] "
                  f"{st.total_of('uptodate') + st.total_of('cutoff')} up to date"
                  + (f" [red]{st.total_of('failed')} failed[/]" if st.total_of("failed") else ""))
        fields = {"counts": counts}
        if current is not None:
            fields["current"] = current
        self.progress.update(self.bar, completed=st.finished, total=max(st.total, st.finished), **fields)

    def initialize(self, tasks, selected_tasks):
        """The reporter's initialize, then the live bar started with the run's task count."""
        super().initialize(tasks, selected_tasks)
        self.progress.start()
        self.bar = self.progress.add_task("build", total=self.stats.total or None, counts="", current="")

    def execute_task(self, task):
        """The reporter's execute_task, then the bar shows the stage and kernel now running."""
        super().execute_task(task)
        if task.actions and not task.name.startswith("_"):
            self._refresh(current=f"{task.name.split(':')[0]} {(task.doc or task.name).split(' ->')[0]}")

    def task_line(self, mark, task):
        """No per-task line under the bar: the bar's counts advance instead."""
        self._refresh()

    def write(self, text):
        """Write `text` above the live bar (or plainly when it is not running); skip lines behind a failure are
        dropped (the table counts them)."""
        # Skips behind a failure are counted in the table; one line each would bury the bar.
        if text.startswith("!! "):
            return
        # Other lines (a task's failure as it happens) go above the live bar.
        if self.bar is not None and self.progress.live.is_started:
            self.progress.console.print(Text(text.rstrip("\n")))
        else:
            self.console.print(Text(text.rstrip("\n")))

    def add_failure(self, task, fail):
        """The reporter's add_failure, then the bar's counts refreshed."""
        super().add_failure(task, fail)
        self._refresh()

    def complete_run(self):
        """Finish lib/, release the build lock, stop the bar, then print the summary as a rich table and the failures
        as the plain reporter does."""
        try:
            self.finish_lib()
        finally:
            self._drop_lock()
        if self.bar is not None:
            self.progress.stop()
            self.bar = None
        st = self.stats
        if st.counts:
            table = Table(title=f"ttbuild: {st.finished} tasks in {st.elapsed():.2f}s", title_justify="left")
            table.add_column("stage")
            for c in COLUMNS:
                table.add_column(HEADINGS[c], justify="right")
            table.add_column("time", justify="right")
            rows = st.rows(self.STAGE_ORDER)
            for stage, row, secs in rows:
                if stage != "meta":
                    table.add_row(stage, *(str(row[c]) if row[c] else "-" for c in COLUMNS), f"{secs:.2f}s")
            totals, secs = st.stage_totals()  # the stages alone, as the plain summary's total
            table.add_row("total", *(str(totals[c]) for c in COLUMNS), f"{secs:.2f}s", style="bold")
            for stage, row, secs in rows:
                if stage == "meta":
                    table.add_row(stage, *(str(row[c]) if row[c] else "-" for c in COLUMNS), f"{secs:.2f}s")
            self.console.print(table)
        for heading, text in self.failure_texts():
            self.console.rule(Text(heading, style="bold red"), align="left")
            self.console.print(Text(text))
        if self.runtime_errors:
            self.console.print(Text("Execution aborted.\n" + "\n".join(self.runtime_errors), style="red"))
