"""The dialect model (ttbuild.backend.ir): op-name constants are the only spelling of an op name in the backend, encodings and memdesc types print what they parse, builders make the ops they name."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir import builders, ops
from ttbuild.backend.ir.encodings import (
    Blocked,
    DotOperand,
    FmaOperand,
    NvidiaMma,
    NvmmaShared,
    Slice,
    SwizzledShared,
    parse_encoding,
    shared_encoding,
)
from ttbuild.backend.ir.types import MemDescType, barrier_type, memdesc_type, unswizzled, with_encoding

BACKEND = Path(ops.__file__).resolve().parents[1]
OP_NAME = re.compile(r"^(tt|ttg|ttng|scf|arith|math|gpu)\.[a-z_][a-z_0-9.]*$")
NAMESPACES = (ops.TT, ops.TTG, ops.TTNG, ops.SCF, ops.ARITH, ops.MATH, ops.GPU)


def test_op_constants_spell_their_dialect_and_name():
    seen = set()
    for ns in NAMESPACES:
        for key, value in vars(ns).items():
            if key.isupper():
                dialect, name = value.split(".", 1)
                assert dialect == ns.__name__.lower() and key == name.upper().replace(".", "_"), (key, value)
                assert value not in seen
                seen.add(value)
    assert ops.TTG.CONVERT_LAYOUT == "ttg.convert_layout"


def test_no_backend_module_spells_an_op_name():
    """Every op name the backend compares, creates or registers a rule for is a constant of ir.ops."""
    names = {v for ns in NAMESPACES for k, v in vars(ns).items() if k.isupper()}
    found = []
    for path in BACKEND.rglob("*.py"):
        if path == Path(ops.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.append(f"{path.relative_to(BACKEND)}:{node.lineno}: {node.value}")
    assert not found, found


MMA2 = NvidiaMma((2, 2), (16, 8), (2, 0))
MMA3 = NvidiaMma((4, 1), (16, 64, 16), (3, 0))
BLOCKED = Blocked((1, 4), (4, 8), (4, 1), (1, 0))
ENCODINGS = [BLOCKED, Slice(1, BLOCKED), Slice(0, Slice(1, Blocked((1, 1, 4), (1, 4, 8), (4, 1, 1), (2, 1, 0)))),
             MMA2, MMA3, Slice(0, MMA3), DotOperand(0, MMA2, 2), DotOperand(1, MMA2, 4), FmaOperand(1, BLOCKED),
             SwizzledShared(8, 1, 8, (1, 0)), NvmmaShared(128, False, 16), NvmmaShared(64, True, 8)]


@pytest.mark.parametrize("enc", ENCODINGS, ids=lambda e: type(e).__name__)
def test_parse_encoding_inverts_attr(enc):
    assert parse_encoding(enc.attr()) == enc
    assert parse_encoding("  " + enc.attr() + "\n") == enc


@pytest.mark.parametrize("text", ["#ttg.amd_mfma<{}>", "#ttg.slice<{dim = x}>", "#ttg.dot_op<{opIdx = 0}>", "i32"])
def test_parse_encoding_rejects_other_text(text):
    with pytest.raises(ValueError):
        parse_encoding(text)


@pytest.mark.parametrize("md", [
    MemDescType((2, 64, 32), "f16", SwizzledShared(8, 1, 8, (1, 0)).attr(), mutable=True),
    MemDescType((64, 64), "f8E4M3FN", NvmmaShared(64, True, 8).attr()),
    MemDescType((3, 1), "i64", unswizzled([0]), mutable=True),
])
def test_memdesc_prints_what_it_parses_and_mlir_keeps_it(md):
    with mu.context():
        t = md.ir()
        assert MemDescType.parse(t) == md
        assert str(t) == str(md)
    assert md.order == md.layout().order
    assert shared_encoding(str(md)) == md.encoding


def test_barrier_and_ring_types():
    with mu.context():
        assert MemDescType.parse(barrier_type()).is_mbarrier()
        ring = MemDescType.parse(barrier_type(4))
        assert ring.shape == (4, 1) and ring.is_mbarrier() and ring.mutable
        tile = MemDescType.parse(memdesc_type((2, 16, 16), "f32", (0, 1)))
        assert tile.layout() == SwizzledShared(1, 1, 1, (0, 1)) and not tile.is_mbarrier()
    with pytest.raises(ValueError):
        MemDescType.parse("tensor<4xf32>")


MODULE = """
#b = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
"builtin.module"() ({
  "tt.func"() <{function_type = (tensor<128xf32, #b>) -> (), sym_name = "k"}> ({
  ^bb0(%x: tensor<128xf32, #b>):
    %y = "math.exp"(%x) : (tensor<128xf32, #b>) -> tensor<128xf32, #b>
    "tt.store_like"(%y) : (tensor<128xf32, #b>) -> ()
    "tt.return"() : () -> ()
  }) : () -> ()
}) : () -> ()
"""


def test_retype_result_keeps_users_on_the_old_layout():
    """retype_result moves one op's result to another layout; its users read a conversion back."""
    other = Blocked((4,), (32,), (1,), (0,))
    with mu.context() as ctx, mu.ir.Location.unknown():
        module = mu.parse_module(MODULE, ctx, "test")
        func = module.body.operations[0]
        exp = next(op for op in func.regions[0].blocks[0].operations if op.name == ops.MATH.EXP)
        r = exp.results[0]
        old_type = r.type
        back = builders.retype_result(exp, r, with_encoding(r.type, other))
        store = next(op for op in func.regions[0].blocks[0].operations if op.name == "tt.store_like")
        assert store.operands[0] == back and back.type == old_type
        assert parse_encoding(str(mu.ir.RankedTensorType(r.type).encoding)) == other
        assert [u.owner.name for u in r.uses] == [ops.TTG.CONVERT_LAYOUT]
        text = mu.print_module(module).decode()
        assert text.count('"ttg.convert_layout"') == 1

