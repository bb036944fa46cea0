"""CPU tests of ttbuild.record: compile records -> specialised and fallback rows, merging and deduplicating records of parallel processes, tuning tables, the variant list the build reads."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys

import tomllib

from ttbuild.record import merge_records, read_records, rows_text
from ttbuild.record.hook import compile_event
from ttbuild.record.rows import event_rows, row_identity
from ttbuild.record.store import append
from ttbuild.record.tuning import tables

SRC = '''import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs * stride, tl.load(src + offs * stride, mask=offs < n), mask=offs < n)
'''


def _event(path, div16=("src", "dst", "n"), stride_one=True, warps=4):
    sig = {"src": "*fp16", "dst": "*fp16", "n": "i32", "stride": "constexpr" if stride_one else "i32", "BLOCK": "constexpr"}
    constants = {"BLOCK": 256, **({"stride": 1} if stride_one else {})}
    return {"event": "compile", "module": "proj.ops", "qualname": "copy_kernel", "kernel": "copy_kernel", "path": str(path),
            "sha256": "", "params": ["src", "dst", "n", "stride", "BLOCK"], "annotated": ["BLOCK"], "signature": sig,
            "constants": constants, "div16": list(div16), "num_warps": warps, "num_stages": 3, "num_ctas": 1,
            "maxnreg": None, "capability": [9, 0]}


def _project(tmp_path):
    (tmp_path / "proj").mkdir()
    path = tmp_path / "proj" / "ops.py"
    path.write_text(SRC)
    return path


def test_specialised_row_and_its_fallback(tmp_path):
    path = _project(tmp_path)
    rows, problems = event_rows(_event(path), str(tmp_path))
    assert not problems
    spec, generic = rows
    assert spec["file"] == "proj/ops.py" and spec["target"] == "cuda:90"
    assert spec["signature"] == "*fp16:16,*fp16:16,i32:16" and spec["constexprs"] == {"BLOCK": 256, "stride": 1}
    assert generic["signature"] == "*fp16,*fp16,i32,i32" and generic["constexprs"] == {"BLOCK": 256}
    assert spec["name"] != generic["name"]


def test_rows_without_a_form_are_reported_not_written(tmp_path):
    path = _project(tmp_path)
    ev = _event(path)
    ev["constants"]["BLOCK"] = {"repr": "<object>"}
    assert event_rows(ev, str(tmp_path)) == ([], ['proj.ops.copy_kernel: argument BLOCK={"repr": "<object>"} has no row form yet'])
    assert "outside the project root" in event_rows(_event(path), str(tmp_path / "elsewhere"))[1][0]
    ev = _event(path)
    ev["signature"]["n"] = "tuple"
    assert event_rows(ev, str(tmp_path))[1] == ["proj.ops.copy_kernel: argument n of type tuple has no row form yet"]


class dtype:  # stands in for triton.language.core.dtype (its class name and `name`): not JSON-serialisable
    def __init__(self, name):
        self.name = name


def _none_dtype_event(path, value):
    """copy_kernel called with `dst` None (a constexpr None, Triton's specialization) and BLOCK a dtype."""
    ev = _event(path)
    ev["signature"]["dst"] = "constexpr"
    ev["constants"].update(dst=None, BLOCK=value)
    ev["div16"] = ["src", "n"]
    return ev


def test_none_and_dtype_constexprs_are_constexprs_of_both_rows(tmp_path):
    """A None argument and a dtype constexpr (the hook's {"dtype": name}, or serve's live tl.dtype)
    stay constexprs of the specialised row and of its fallback; variants.toml spells them
    `{ none = true }` and `{ dtype = "bf16" }`, and the build reads them back as None and the dtype."""
    from ttbuild.graph.variants import load_variants

    path = _project(tmp_path)
    for value in ({"dtype": "bf16"}, dtype("bf16")):
        rows, problems = event_rows(_none_dtype_event(path, value), str(tmp_path))
        assert not problems
        spec, generic = rows
        assert spec["signature"] == "*fp16:16,i32:16" and generic["signature"] == "*fp16,i32,i32"
        assert spec["constexprs"] == {"BLOCK": {"dtype": "bf16"}, "dst": None, "stride": 1}
        assert generic["constexprs"] == {"BLOCK": {"dtype": "bf16"}, "dst": None}
    text = rows_text(rows)
    assert 'constexprs = { BLOCK = { dtype = "bf16" }, dst = { none = true }, stride = 1 }' in text
    (tmp_path / "variants.toml").write_text(text)
    built = {v.signature: v.constexprs for v in load_variants(tmp_path)}
    assert built["*fp16:16,i32:16"] == {"BLOCK": {"dtype": "bf16"}, "dst": None, "stride": 1}
    again, _ = merge_records([_none_dtype_event(path, {"dtype": "bf16"})], str(tmp_path),
                             existing=tomllib.loads(text)["variant"])
    # a rewritten list reads its own spelling back: the same rows, no duplicates
    assert sorted(map(row_identity, again)) == sorted(map(row_identity, rows))


def test_a_row_refuses_other_constexpr_tables(tmp_path):
    from ttbuild.graph.variants import VariantError, load_variants

    _project(tmp_path)
    for table, why in (('{ dtype = "float" }', "not a Triton dtype name"), ("{ none = false }", "{ none = true }")):
        (tmp_path / "variants.toml").write_text(f'[[variant]]\nfile = "proj/ops.py"\nkernel = "copy_kernel"\n'
                                                f'signature = "*fp16,*fp16,i32,i32"\nconstexprs = {{ BLOCK = {table} }}\n')
        try:
            load_variants(tmp_path)
        except VariantError as exc:
            assert why in str(exc) and "constexprs" in str(exc)
        else:
            raise AssertionError(f"{table} was accepted")


def _autotune(path, timings, key_dtypes=("fp16", "fp16")):
    cfg = {"kwargs": {"BLOCK": 256}, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
    other = dict(cfg, kwargs={"BLOCK": 64})
    return {"event": "autotune", "module": "proj.ops", "qualname": "copy_kernel", "kernel": "copy_kernel", "path": str(path),
            "key_names": ["n"], "key": [4096, *key_dtypes], "config": other,
            "timings": [[cfg, timings], [other, 0.01]], "capability": [9, 0]}


def test_compiles_of_configs_triton_could_not_run_are_dropped(tmp_path):
    """Triton's autotuner times a config that raised OutOfResources as inf: its compile is no row."""
    path = _project(tmp_path)
    compiled = [_event(path), dict(_event(path), constants={"BLOCK": 64, "stride": 1})]
    kept = {json.dumps(r["constexprs"]) for r in merge_records(compiled, str(tmp_path))[0]}
    assert kept == {'{"BLOCK": 256, "stride": 1}', '{"BLOCK": 256}', '{"BLOCK": 64, "stride": 1}', '{"BLOCK": 64}'}
    for bad in (float("inf"), float("nan"), None):
        rows, problems = merge_records(compiled + [_autotune(path, bad)], str(tmp_path))
        assert {r["constexprs"]["BLOCK"] for r in rows} == {64} and not problems
    existing, _ = merge_records(compiled, str(tmp_path))
    rows, _ = merge_records(compiled + [_autotune(path, float("inf"))], str(tmp_path), existing=existing)
    assert {r["constexprs"]["BLOCK"] for r in rows} == {64}  # also gone from the list it rewrites
    # timed finite for some key of the same dtypes, or failing only for other dtypes: kept
    ran = [_autotune(path, float("inf")), dict(_autotune(path, 0.02), key=[8192, "fp16", "fp16"])]
    assert len(merge_records(compiled + ran, str(tmp_path))[0]) == 4
    assert len(merge_records(compiled + [_autotune(path, float("inf"), ("fp32", "fp32"))], str(tmp_path))[0]) == 4


def _writer(directory, n, warps):
    for i in range(n):
        append(directory, dict(_event(directory + "/../proj/ops.py", warps=warps), seq=i))


def test_parallel_processes_merge_into_sorted_unique_rows(tmp_path):
    path = _project(tmp_path)
    rec = tmp_path / "rec"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(rec), 200, 4 + 4 * (i % 2))) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert len(os.listdir(rec)) == 4
    events = read_records(str(rec))
    assert len(events) == 800
    for ev in events:
        ev["path"] = str(path)
    rows, problems = merge_records(events, str(tmp_path))
    assert not problems and len(rows) == 4  # (specialised, fallback) x (4, 8 warps)
    again, _ = merge_records(events[::-1], str(tmp_path), existing=rows)
    assert again == rows
    text = rows_text(rows)
    assert rows_text(tomllib.loads(text)["variant"]) == text


def test_rows_are_a_variant_list_the_build_reads(tmp_path):
    from ttbuild.graph.variants import load_variants

    path = _project(tmp_path)
    rows, _ = merge_records([_event(path), _event(path, div16=(), stride_one=False)], str(tmp_path))
    (tmp_path / "variants.toml").write_text(rows_text(rows))
    variants = load_variants(tmp_path)
    assert sorted(v.signature for v in variants) == ["*fp16,*fp16,i32,i32", "*fp16:16,*fp16:16,i32:16"]


def test_torn_last_line_is_skipped(tmp_path):
    log = tmp_path / "x.jsonl"
    append(str(log), _event("p"))
    with open(log, "a") as f:
        f.write('{"event": "compile", "trunc')
    assert len(read_records(str(log))) == 1


class _P:
    def __init__(self, name, constexpr=False):
        self.name, self.is_constexpr = name, constexpr


class _Opts:
    num_warps, num_stages, num_ctas, maxnreg = 8, 2, 1, None


def test_hook_event_from_tritons_hook_arguments(tmp_path):
    """compile_event reads what Triton 3.6's _call_hook passes: constants and attrs keyed by (index,)."""
    path = _project(tmp_path)
    ns = {}
    exec(compile("def copy_kernel(src, dst, n, stride, BLOCK): pass", str(path), "exec"), ns)
    jit = type("J", (), {"fn": ns["copy_kernel"], "params": [_P(n) for n in ("src", "dst", "n", "stride")] + [_P("BLOCK", True)]})
    sig = {"src": "*fp16", "dst": "*fp16", "n": "i32", "stride": "constexpr", "BLOCK": "constexpr"}
    ev = compile_event(jit, sig, {(3,): 1, (4,): 256}, {(0,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]},
                       _Opts, [9, 0])
    assert ev["constants"] == {"stride": 1, "BLOCK": 256} and ev["div16"] == ["n", "src"] and ev["annotated"] == ["BLOCK"]
    rows, _ = event_rows(json.loads(json.dumps(ev)), str(tmp_path))
    assert rows[0]["signature"] == "*fp16:16,*fp16,i32:16" and rows[0]["num_warps"] == 8


def test_autotune_choices_become_a_tuning_table(tmp_path):
    path = _project(tmp_path)
    cfg = [{"kwargs": {"BLOCK": b}, "num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None} for b in (64, 128)]
    evs = [{"event": "autotune", "kernel": "copy_kernel", "path": str(path), "key_names": ["n"], "key": [n, "fp16"],
            "config": cfg[i], "timings": [[cfg[0], 0.2 if i else 0.1], [cfg[1], 0.1 if i else 0.2]]}
           for i, n in enumerate((1024, 4096))]
    (doc,) = tables(evs + evs, str(tmp_path)).values()
    assert doc["schema"] == "ttbuild.tuning/1" and doc["file"] == "proj/ops.py"
    assert [(e["key"], e["config"]) for e in doc["entries"]] == [([1024, "fp16"], 0), ([4096, "fp16"], 1)]
    assert doc["entries"][1]["times_ms"] == {"0": 0.2, "1": 0.1}


def test_record_command_runs_and_merges(tmp_path):
    """`ttbuild record -- CMD` hands the command TTBUILD_RECORD and its startup hook, then merges
    the lines the command wrote (a stand-in for the Triton hook)."""
    import subprocess

    path = _project(tmp_path)
    code = ("import os, sys; from ttbuild.record.store import append; "
            f"append(os.environ['TTBUILD_RECORD'], {_event(path)!r}); "
            "print('startup' if any(p.endswith('startup') for p in sys.path) else 'no hook')")
    out = subprocess.run([sys.executable, "-m", "ttbuild", "record", "--root", str(tmp_path), "--", sys.executable, "-c", code],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "startup"
    rows = tomllib.loads((tmp_path / "variants.toml").read_text())["variant"]
    assert len(rows) == 2 and "1 compiles recorded, 2 rows" in out.stderr


def test_rows_for_each_listed_target(tmp_path):
    path = _project(tmp_path)
    rows, _ = merge_records([_event(path)], str(tmp_path), targets=["cuda:80", "cuda:90"])
    assert sorted((r["target"], r["signature"]) for r in rows) == [
        ("cuda:80", "*fp16,*fp16,i32,i32"), ("cuda:80", "*fp16:16,*fp16:16,i32:16"),
        ("cuda:90", "*fp16,*fp16,i32,i32"), ("cuda:90", "*fp16:16,*fp16:16,i32:16")]


def test_merging_keeps_the_lists_other_tables_and_module_rows(tmp_path):
    """Rows written by hand (a `module` row) and `[project]`/`[package]` survive a record; --source-root adds a root once."""
    import subprocess

    path = _project(tmp_path)
    (tmp_path / "variants.toml").write_text('[package]\nname = "proj-kernels"\n\n[project]\nsource_roots = ["proj"]\n\n'
                                            '[[variant]]\nmodule = "ops"\nkernel = "copy_kernel"\nsignature = "*fp16,*fp16,i32,i32"\n'
                                            'constexprs = { BLOCK = 64 }\n')
    log = tmp_path / "log.jsonl"
    append(str(log), _event(path))
    for _ in range(2):
        out = subprocess.run([sys.executable, "-m", "ttbuild", "record", "--root", str(tmp_path), "--source-root", "proj",
                              "--source-root", "lib", "--from", str(log)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    doc = tomllib.loads((tmp_path / "variants.toml").read_text())
    assert doc["package"] == {"name": "proj-kernels"} and doc["project"] == {"source_roots": ["proj", "lib"]}
    assert len(doc["variant"]) == 3 and sum("module" in r for r in doc["variant"]) == 1


def test_record_reports_the_compiles_it_dropped(tmp_path):
    """`ttbuild record --from DIR`: the summary line counts the compiles of configs Triton could not run."""
    import subprocess

    path = _project(tmp_path)
    rec = tmp_path / "rec"
    for ev in (_event(path), dict(_event(path), constants={"BLOCK": 64, "stride": 1}), _autotune(path, float("inf"))):
        append(str(rec), ev)
    out = subprocess.run([sys.executable, "-m", "ttbuild", "record", "--from", str(rec), "--root", str(tmp_path),
                          "-o", str(tmp_path / "v.toml"), "--tuning", str(tmp_path / "tuning")],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert out.returncode == 0, out.stderr
    assert "2 compiles recorded, 2 rows in" in out.stderr and "1 compiles of autotune configs Triton could not run dropped" in out.stderr
    assert "BLOCK = 256" not in (tmp_path / "v.toml").read_text()
