"""The build process's garbage collector (ttbuild.collector) and doit's state DB read in one query (ttbuild.graph.state.PreloadedSqliteDB)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap

import pytest
from doit.dependency import JSONCodec, SqliteDB

from ttbuild import collector
from ttbuild.graph.state import PreloadedSqliteDB


@pytest.fixture(autouse=True)
def _collector_as_it_was():
    assert gc.isenabled() and gc.get_freeze_count() == 0, "a previous test left the collector changed"
    yield
    gc.unfreeze()
    gc.enable()


def test_graph_phase_pauses_collection_and_gives_it_back():
    with collector.graph_phase():
        assert not gc.isenabled()
        with collector.graph_phase():  # nested: nothing changes
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_resume_freezes_the_graph_and_collects_again_until_the_phase_ends():
    with collector.graph_phase():
        graph = [[i] for i in range(1000)]
        collector.resume()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(graph)  # never walked again by this build's collections
        collector.resume()  # idempotent
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # the caller gets its objects back
    assert gc.isenabled()


def test_resume_outside_a_phase_changes_nothing():
    collector.resume()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_phase_leaves_a_disabled_collector_alone():
    gc.disable()
    with collector.graph_phase():
        collector.resume()
        assert not gc.isenabled()
        assert gc.get_freeze_count() == 0
    assert not gc.isenabled()


def test_someone_elses_frozen_objects_stay_frozen():
    gc.freeze()
    before = gc.get_freeze_count()
    with collector.graph_phase():
        collector.resume()  # does not freeze: leaving the phase would unfreeze the caller's too
        assert gc.isenabled()
    assert gc.get_freeze_count() == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_collects_as_usual():
    with collector.graph_phase():
        pid = os.fork()
        if pid == 0:  # doit's -j worker or a stage runner
            os._exit(0 if gc.isenabled() else 1)
        _, status = os.waitpid(pid, 0)
        assert not gc.isenabled()
    assert os.waitstatus_to_exitcode(status) == 0


SCRIPT = textwrap.dedent("""
    import gc, json, sys
    from ttbuild.cli import main
    seen = []
    gc.callbacks.append(lambda phase, info: phase == "start" and seen.append(info["generation"]))
    report = {}
    for run in ("cold", "noop"):
        seen.clear()
        rc = main(["build", "-j", sys.argv[1]], stage_package="fake_stages")
        report[run] = {"rc": rc, "collections": list(seen), "enabled": gc.isenabled(),
                       "frozen": gc.get_freeze_count()}
    print("REPORT " + json.dumps(report))
""")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_no_op_build_never_collects_and_a_build_that_runs_tasks_does(tmp_path, new_project, jobs):
    """Before the pause, every no-op rebuild ran the collector over the graph (13 times on this
    project, hundreds on 3000 variants). With -j 2 the tasks run in workers: the main process
    collects again once it hands out the first (its reporter hook), not only where actions run."""
    proj = new_project(tmp_path / "proj")
    env = proj.run_env()
    env["CI"] = "1"
    env.pop("TTBUILD_LIST_UPTODATE")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, jobs], cwd=proj.root, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT ", 1)[1])
    cold, noop = report["cold"], report["noop"]
    assert cold["rc"] == 0 and noop["rc"] == 0
    # At most the one collection before the pause (argument parsing) and the one its end
    # triggers (what the build allocated, given back to this caller); without the pause: hundreds.
    assert len(noop["collections"]) <= 2, noop["collections"]
    # more than those two: the collector ran while tasks did (without the resume: exactly two)
    assert len(cold["collections"]) > 2, "tasks ran with the collector off: a compile's cycles would pile up"
    for run in (cold, noop):  # the caller's collector as it was
        assert run["enabled"] and run["frozen"] == 0


def test_exit_with_passes_the_status_and_runs_atexit_handlers():
    code = textwrap.dedent("""
        import atexit, sys
        from ttbuild.__main__ import exit_with
        atexit.register(lambda: print("atexit ran"))
        def command():
            print("working", end="; ")
            return 7
        exit_with(command)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 7
    assert proc.stdout == "working; atexit ran\n"


# -- doit's state DB ------------------------------------------------------------------------------

def _fill(path, n):
    db = SqliteDB(str(path), JSONCodec())
    for i in range(n):
        db.set(f"t{i}", "deps:", [f"f{i}"])
        db.set(f"t{i}", "checker:", "XXHashChecker")
    db.dump()


@pytest.mark.parametrize("n", [10, PreloadedSqliteDB.ONE_BY_ONE + 200])
def test_preloaded_db_reads_what_doit_wrote(tmp_path, n):
    path = tmp_path / "dep.db"
    _fill(path, n)
    db = PreloadedSqliteDB(str(path), JSONCodec())
    assert [db.get(f"t{i}", "deps:") for i in range(n)] == [[f"f{i}"] for i in range(n)]
    assert db.get("missing", "deps:") is None
    assert db.in_("t0") and db.in_(f"t{n - 1}") and not db.in_("nope")
    db.dump()


def test_preloaded_db_forgets_removed_tasks_and_doit_reads_what_it_wrote(tmp_path):
    path = tmp_path / "dep.db"
    n = PreloadedSqliteDB.ONE_BY_ONE + 100
    _fill(path, n)
    db = PreloadedSqliteDB(str(path), JSONCodec())
    for i in range(PreloadedSqliteDB.ONE_BY_ONE + 1):  # past the one-by-one lookups: the rest is preloaded
        db.get(f"t{i}", "deps:")
    last = f"t{n - 1}"
    assert db.in_(last)
    db.remove(last)  # before anything asked for it: the preloaded row must go too
    assert not db.in_(last)
    assert db.get(last, "deps:") is None
    db.set("t1", "deps:", ["changed"])
    db.dump()
    plain = SqliteDB(str(path), JSONCodec())
    assert plain.get("t1", "deps:") == ["changed"]
    assert plain.get(f"t{n - 2}", "deps:") == [f"f{n - 2}"]
    assert not plain.in_(last)
    db2 = PreloadedSqliteDB(str(path), JSONCodec())
    db2.remove_all()
    for i in range(PreloadedSqliteDB.ONE_BY_ONE + 2):
        assert db2.get(f"t{i}", "deps:") is None
