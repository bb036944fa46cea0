"""doit reporter for ttbuild: one line per finished task (ran / from cache / up to date / skipped), then a per-stage summary.

Line marks (one task per line, what CI logs and the tests read):
  `.  task  doc`   the stage ran (its action executed the compiler)
  `C  task  doc`   the action executed but its outputs came from the content-addressed cache
  `-- task  doc`   up to date, nothing executed
  `!! task  (skipped: needs failed X)`   not run because a task it needs failed
  `TaskFailed - taskid:task`             the task failed; its diagnostic is printed once, in the summary
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field

from doit.exceptions import UnmetDependency
from doit.reporter import ConsoleReporter

from ttbuild import collector

COLUMNS = ("ran", "cached", "cutoff", "uptodate", "failed", "skipped")
HEADINGS = {"ran": "ran", "cached": "cached", "cutoff": "cut off", "uptodate": "up to date",
            "failed": "failed", "skipped": "skipped"}


def stage_of(task) -> str:
    """`ttgir` for task `ttgir:<key>`, `meta` for `meta:<variant>`."""
    return task.name.split(":", 1)[0]


@dataclass
class BuildStats:
    """What happened to each stage task in one run, by stage; `seconds` sums the actions' own timings
    (reported by the action itself, so parallel builds count work, not queueing)."""

    counts: dict = field(default_factory=dict)     # stage -> {column: n}
    seconds: dict = field(default_factory=dict)    # stage -> float
    done: set = field(default_factory=set)         # names of tasks that executed (ran or cached)
    failures: list = field(default_factory=list)   # (task, fail) in the order they failed
    total: int = 0                                 # stage/meta tasks this run may touch
    start: float = field(default_factory=time.monotonic)

    def add(self, task, column: str, seconds: float = 0.0) -> None:
        """Count `task` under `column` ("ran", "cached", "uptodate", "cutoff", "failed", "skipped") of its stage and
        add `seconds` (the action's own time) to the stage's total."""
        stage = stage_of(task)
        row = self.counts.setdefault(stage, dict.fromkeys(COLUMNS, 0))
        row[column] += 1
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def total_of(self, column: str) -> int:
        """The number of tasks of every stage counted under `column`."""
        return sum(row[column] for row in self.counts.values())

    def stage_totals(self) -> tuple[dict, float]:
        """(column -> n, seconds) over the compiler stages, the meta tasks (lib/ writes) left out:
        the summary's "total" row and its "N stages ran" sentence."""
        rows = [row for s, row in self.counts.items() if s != "meta"]
        return ({c: sum(r[c] for r in rows) for c in COLUMNS},
                sum(t for s, t in self.seconds.items() if s != "meta"))

    @property
    def finished(self) -> int:
        """Tasks counted under any column so far: the progress numerator."""
        return sum(self.total_of(c) for c in COLUMNS)

    def elapsed(self) -> float:
        """Seconds (monotonic clock) since the build started, after any wait for the build lock."""
        return time.monotonic() - self.start

    def rows(self, order) -> list[tuple[str, dict, float]]:
        """(stage, counts, seconds) in pipeline order, stages that saw no task left out."""
        known = [s for s in order if s in self.counts] + sorted(set(self.counts) - set(order))
        return [(s, self.counts[s], self.seconds.get(s, 0.0)) for s in known]


def _closure(tasks: dict, selected) -> set:
    """Names of every task `selected` reaches through task_dep (doit adds file_dep producers there)."""
    seen, todo = set(), list(selected or ())
    while todo:
        name = todo.pop()
        if name in seen or name not in tasks:
            continue
        seen.add(name)
        todo.extend(tasks[name].task_dep)
    return seen


class BuildReporter(ConsoleReporter):
    """Plain, line-oriented build output (not a terminal, or `CI` set); selected through
    DOIT_CONFIG["reporter"]. Task lines are written when a task finishes (its values say whether
    the cache served it); the closing summary counts, per stage, tasks that ran, were served from
    the cache, were cut off early (up to date although a task they depend on executed in this run:
    its output came out byte-identical), were up to date, failed, or were skipped behind a failure,
    with the seconds spent in the stage's actions. Each failure's diagnostic appears once, there.
    """

    desc = "ttbuild console output"
    STAGE_ORDER = ("parse", "ttir", "ttgir", "llir", "ptx", "cubin", "meta")
    lock_dir: str | None = None  # set by `for_artifacts`: the artifacts/ whose lock a run holds

    def __init__(self, outstream, options):
        super().__init__(outstream, options)
        self.stats = BuildStats()
        self._lock = None
        # An up-to-date task gets a line only when asked (`ttbuild build -v`): a no-op rebuild of
        # 3000 variants printed 15,000 of them; the summary table counts them anyway.
        self.list_uptodate = os.environ.get("TTBUILD_LIST_UPTODATE", "") not in ("", "0")

    # What the build may delete from lib/ when it finishes (see prune_lib).
    prune_unknown = True     # files no variant of the graph produces (a removed or renamed variant)
    prune_failed = True      # a variant whose build failed or was skipped this run
    # What the record of the build (ttbuild.buildrecord, read by `ttbuild package`) names.
    kernels_dir: str | None = None
    shard: str | None = None  # "I/N" for a --shard build

    @classmethod
    def for_artifacts(cls, artifacts_dir, *, prune_unknown: bool = True, prune_failed: bool = True) -> type:
        """This reporter class bound to `artifacts_dir`: each `doit run` with it holds that
        folder's BuildLock from `initialize` (before doit checks any task) to `complete_run`
        (after doit saved its state), and sweeps killed builds' temp files first. The reporter
        is the one hook doit calls exactly there, in the main process only, for `doit` and
        `ttbuild build` alike (`-n` workers never call it)."""
        return type(cls.__name__, (cls,), {"lock_dir": str(artifacts_dir), "__module__": cls.__module__,
                                            "__doc__": cls.__doc__, "prune_unknown": prune_unknown,
                                            "prune_failed": prune_failed})

    @classmethod
    def for_project(cls, kernels_dir, shard: tuple[int, int] | None) -> type:
        """This reporter class, told the kernels folder and shard its build record names."""
        return type(cls.__name__, (cls,), {"__module__": cls.__module__, "__doc__": cls.__doc__,
                                            "kernels_dir": str(kernels_dir),
                                            "shard": None if shard is None else f"{shard[0]}/{shard[1]}"})

    def _take_lock(self):
        if self.lock_dir is None:
            return
        from .state import BuildLock, announce_wait, begin_build

        self._lock = BuildLock(self.lock_dir).acquire(on_wait=announce_wait)
        begin_build(self.lock_dir)
        # A build killed midway records nothing: `ttbuild package` then refuses its lib/.
        from ttbuild.buildrecord import forget_record

        forget_record(self.lock_dir)
        # lib/ is about to change: until the build ends there is no index (the runtime then reads
        # every file); its rows are kept to reuse for the files the build leaves as they are
        from ttbuild.runtime import libindex

        lib = os.path.join(self.lock_dir, "lib")
        self._index_rows = libindex.previous_rows(lib)
        libindex.remove_index(lib)
        self.stats.start = time.monotonic()  # time the build, not the wait

    def _drop_lock(self):
        if self._lock is not None:
            from .state import end_build

            end_build(self.lock_dir, clean=not self.stats.failures and not self.runtime_errors)
            self._lock.release()
            self._lock = None

    # -- doit hooks ------------------------------------------------------------------------------
    def initialize(self, tasks, selected_tasks):
        """doit's hook before the run: takes the build lock and counts the stage and meta tasks the run may reach
        (`selected_tasks` and their dependencies), the progress denominator."""
        self._take_lock()
        self._tasks = tasks
        try:
            reach = _closure(tasks, selected_tasks)
            # Stage and meta tasks are `<group>:<name>`; the groups themselves have no actions.
            # (Reading `task.actions` builds doit's action objects: a fifth of a no-op rebuild.)
            self.stats.total = sum(1 for n in reach if ":" in n and not n.startswith("_"))
        except (AttributeError, TypeError, KeyError):
            self.stats.total = 0

    def execute_task(self, task):
        """doit's hook as a task starts: resumes the collector for a task with actions (its line is written when it
        finishes, once its cache status is known)."""
        # The line is written when the task finishes, once we know whether the cache served it.
        # Work starts: collect again (this process hands it to a -j worker, or runs it). Not
        # for the stage groups, which doit "executes" (no actions) in a no-op too.
        if task.actions:
            collector.resume()

    def add_success(self, task):
        """doit's hook for a finished task: counts it as "cached" or "ran" (its action's returned values say which,
        and its seconds) and writes its line (`C  ` or `.  `)."""
        if not task.actions or task.name.startswith("_"):
            return
        values = task.values if isinstance(task.values, dict) else {}
        cached = bool(values.get("cached"))
        self.stats.done.add(task.name)
        self.stats.add(task, "cached" if cached else "ran", float(values.get("seconds") or 0.0))
        self.task_line("C  " if cached else ".  ", task)
        for text in values.get("warnings") or ():  # Triton's warnings, located (graph/actions.py)
            self.write(f"{text}\n")

    def skip_uptodate(self, task):
        """doit's hook for a task it does not run: "cutoff" when a dependency ran this run and produced the same
        outputs, "uptodate" otherwise; its line only with -v."""
        if not task.actions or task.name.startswith("_"):
            return
        cut = any(dep in self.stats.done for dep in task.task_dep)
        self.stats.add(task, "cutoff" if cut else "uptodate")
        if self.list_uptodate:
            self.task_line("-- ", task)

    def add_failure(self, task, fail):
        """doit's hook for a failed task: a task behind a failure counts as skipped (`!!` line naming what it
        needed); a real failure is counted, kept for the failure texts, and its line is written with doit's failure name."""
        if isinstance(fail, UnmetDependency):
            if task.actions and not task.name.startswith("_"):
                self.stats.add(task, "skipped")
                self._skipped = getattr(self, "_skipped", set()) | {task.name}
                needs = " ".join(sorted(fail.message.split()))
                self.write(f"!! {task.name}  (skipped: needs failed {needs})\n")
            return
        self.stats.add(task, "failed")
        self.stats.failures.append((task, fail))
        if fail.report:
            self.failures.append({"task": task, "exception": fail})
        self.task_line(".  ", task)
        self.write(f"{fail.get_name()} - taskid:{task.name}\n")

    def complete_run(self):
        """doit's hook after the run: writes lib/ (finish_lib), releases the build lock, then prints the summary
        table and the failures."""
        try:
            self.finish_lib()
        finally:
            self._drop_lock()  # doit has saved its state by now (Runner.finish)
        self.write_summary()
        self.write_failures()
        if self.runtime_errors:
            self.write("#" * 40 + "\nExecution aborted.\n" + "\n".join(self.runtime_errors) + "\n")

    def finish_lib(self) -> None:
        """What a build does to lib/ when it ends, under the lock: prune_lib, write_index, then record_build."""
        self.prune_lib()
        self.write_index()
        self.record_build()

    def write_index(self) -> None:
        """Write lib/ttbuild.index for lib/ as the build leaves it (ttbuild.runtime.libindex): the
        runtime reads a kernel's metadata only when that kernel is first used."""
        from ttbuild.runtime import libindex

        if self.lock_dir is None:
            return
        try:
            libindex.write_index(os.path.join(self.lock_dir, "lib"), getattr(self, "_index_rows", None))
        except OSError as exc:  # the library still loads, reading every file
            self.write(f"ttbuild: warning: cannot write lib/{libindex.INDEX}: {exc}\n")

    def prune_lib(self) -> list[str]:
        """The build owns `<artifacts>/lib`: under the lock, after the run, delete what the
        runtime must not load: files no meta task of the graph writes (a variant removed from or
        renamed in variants.toml; not with --shard, whose graph holds only its share) and the
        files of a variant whose build failed or was skipped this run (a previous good build
        stays only with --keep-previous). Returns the deleted paths (also printed)."""
        import os

        tasks = getattr(self, "_tasks", None)
        if self.lock_dir is None or tasks is None:  # no graph loaded: nothing to judge lib/ by
            return []
        lib = os.path.join(self.lock_dir, "lib")
        if not os.path.isdir(lib):
            return []
        metas = {n: t for n, t in tasks.items() if n.startswith("meta:")}
        folder = functools.lru_cache(maxsize=None)(os.path.abspath)  # the targets share one or two folders

        def absolute(path: str) -> str:  # os.path.abspath(path), its folder resolved once
            """os.path.abspath(path) with the folder's resolution cached (one realpath per folder, not per file)."""
            return os.path.join(folder(os.path.dirname(path)), os.path.basename(path))

        produced = {absolute(p) for t in metas.values() for p in t.targets}
        doomed = set()
        if self.prune_unknown:  # an empty variant list owns no file: the whole old library goes
            lib_abs = os.path.abspath(lib)
            for name in os.listdir(lib):
                path = os.path.join(lib_abs, name)
                if name.endswith((".json", ".cubin", ".ptx")) and path not in produced:
                    doomed.add(path)
        if self.prune_failed:
            for name in self.broken_variants(metas):
                doomed.update(absolute(p) for p in metas[name].targets)
        out = []
        for path in sorted(doomed):
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:  # a read-only lib/ (ENAMETOOLONG is refused by the variant list)
                self.write(f"ttbuild: error: could not remove {path} from lib/: {exc.strerror or exc}\n")
                continue
            out.append(path)
        if out:
            self.write(f"ttbuild: removed {len(out)} file(s) from lib/ that no successful variant build wrote: "
                       + ", ".join(os.path.basename(p) for p in out[:8]) + (" ..." if len(out) > 8 else "") + "\n")
        return out

    def record_build(self) -> None:
        """Write artifacts/.ttbuild-build.json (ttbuild.buildrecord): what this build wrote to
        lib/, what failed, and whether it reached every variant, for `ttbuild package`."""
        from ttbuild.buildrecord import write_record

        tasks = getattr(self, "_tasks", None)
        if self.lock_dir is None or tasks is None:
            return
        metas = {n: t for n, t in tasks.items() if n.startswith("meta:")}
        variants = [os.path.basename(p)[:-5] for t in metas.values() for p in t.targets if p.endswith(".json")]
        failed = [n.split(":", 1)[1] for n in self.broken_variants(metas)]
        row = self.stats.counts.get("meta", {})
        reached = sum(row.get(c, 0) for c in ("ran", "cached", "cutoff", "uptodate"))
        complete = not self.stats.failures and not self.runtime_errors and reached == len(metas)
        try:
            write_record(self.lock_dir, self.kernels_dir, variants=variants, failed=failed,
                         shard=self.shard, complete=complete)
        except OSError as exc:  # the build's result stands; packaging will say there is no record
            self.write(f"ttbuild: warning: cannot write the build record: {exc}\n")

    def broken_variants(self, metas: dict) -> set[str]:
        """Names of the meta tasks that failed, were skipped, or need a task that failed: a build
        without --continue stops at the first failure and never reports the meta tasks behind it
        as skipped, yet their previous lib/ files no longer describe the source."""
        failed = {t.name for t, _ in self.stats.failures}
        bad = (failed | getattr(self, "_skipped", set())) & set(metas)
        if failed:
            bad |= {name for name in metas if name not in bad and _closure(self._tasks, [name]) & failed}
        return bad

    # -- output ----------------------------------------------------------------------------------
    def task_line(self, mark: str, task) -> None:
        """Write one progress line: `mark` (".  ", "C  ", "-- "...) and the task's title."""
        self.write(f"{mark}{task.title()}\n")

    @property
    def n_failed(self) -> int:
        """Stage and meta tasks that failed this run."""
        return self.stats.total_of("failed")

    @property
    def n_skipped(self) -> int:
        """Tasks skipped because a task they need failed."""
        return self.stats.total_of("skipped")

    def summary_lines(self) -> list[str]:
        """The summary table: a row per stage in pipeline order (counts per column, seconds), a total row and the
        one-line sentence; [] when no task was counted."""
        st = self.stats
        if not st.counts:
            return []
        width = max(len(s) for s, _, _ in st.rows(self.STAGE_ORDER))
        head = f"{'stage':<{max(width, 5)}}" + "".join(f"{HEADINGS[c]:>11}" for c in COLUMNS) + f"{'time':>10}"
        lines = [head]

        def line(stage, row, secs):
            """One table row: the stage name padded, the counts right-aligned in 11 columns, the seconds to 0.01 s."""
            return f"{stage:<{max(width, 5)}}" + "".join(f"{row[c]:>11}" for c in COLUMNS) + f"{secs:>9.2f}s"

        # The total row sums the compiler stages alone, the figures of the sentence below it
        # ("N stages ran"); the meta row (lib/ writes) follows it, counted on its own.
        for stage, row, secs in st.rows(self.STAGE_ORDER):
            if stage != "meta":
                lines.append(line(stage, row, secs))
        stage, stage_secs = st.stage_totals()
        lines.append(line("total", stage, stage_secs))
        meta = st.counts.get("meta", dict.fromkeys(COLUMNS, 0))
        if "meta" in st.counts:
            lines.append(line("meta", meta, st.seconds.get("meta", 0.0)))
        lines.append(f"ttbuild: {stage['ran']} stages ran, {stage['cached']} from cache, {stage['cutoff']} cut off "
                     f"early, {stage['uptodate']} up to date, {stage['failed']} failed, "
                     f"{stage['skipped']} skipped; {meta['ran']} variants written to lib/ in {st.elapsed():.2f}s")
        return lines

    def write_summary(self) -> None:
        """Write summary_lines and, when tasks failed or were skipped, the count sentence."""
        for line in self.summary_lines():
            self.write(line + "\n")
        if self.n_failed or self.n_skipped:
            self.write(f"ttbuild: {self.n_failed} task(s) failed, {self.n_skipped} skipped behind them\n")

    def failure_texts(self) -> list[tuple[str, str]]:
        """(heading, text) per failed task: the diagnostic (which names the kernel and its variants)
        plus anything the action printed."""
        out = []
        for task, fail in self.stats.failures:
            text = fail.get_msg().rstrip("\n")
            printed = "".join(a.out or "" for a in task.actions) + "".join(a.err or "" for a in task.actions)
            if printed.strip():
                text += "\n" + printed.rstrip("\n")
            out.append((f"FAILED {task.name}  {task.doc or ''}".rstrip(), text))
        return out

    def write_failures(self) -> None:
        """Write each failure's heading and text (the located diagnostic or traceback) under a rule of #."""
        for heading, text in self.failure_texts():
            self.write("#" * 40 + "\n" + heading + "\n" + text + "\n")
