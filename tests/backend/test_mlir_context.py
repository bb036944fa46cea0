"""The shared MLIR context: one per thread, renewed every CONTEXT_REUSE calls, and a module parsed in a renewed-away context stays usable."""

from __future__ import annotations

import threading

from ttbuild.backend import mlir_util as mu

TEXT = '"tt.func"() <{function_type = () -> (), sym_name = "k"}> ({\n  "tt.return"() : () -> ()\n}) : () -> ()\n'


def test_context_is_reused_then_renewed():
    old = mu.context()
    for _ in range(mu.CONTEXT_REUSE):  # wherever this thread's count stood, a renewal comes
        fresh = mu.context()
        if fresh is not old:
            break
    assert fresh is not old
    # a fresh context serves exactly CONTEXT_REUSE calls (the one that made it included)
    served = [fresh] + [mu.context() for _ in range(mu.CONTEXT_REUSE - 1)]
    assert all(c is fresh for c in served)
    assert mu.context() is not fresh
    assert fresh.allow_unregistered_dialects  # Triton's ops are unregistered upstream


def test_context_per_thread():
    mine = mu.context()
    other = []
    t = threading.Thread(target=lambda: other.append(mu.context()))
    t.start()
    t.join()
    assert other[0] is not mine


def test_module_outlives_renewal():
    ctx = mu.context()
    with ctx:
        module = mu.parse_module(TEXT, ctx, "ttir")
    for _ in range(mu.CONTEXT_REUSE + 1):
        mu.context()
    assert mu.context() is not ctx
    assert b'"tt.return"' in mu.print_module(module)
