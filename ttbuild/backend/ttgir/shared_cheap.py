"""Layout assignment helper: a value computed for nothing (a range, a splat, a mask of them) shared by unrelated ops does not tie their layouts; each gets it rebuilt in its own.

Triton's Coalesce gives every memory op its own layout, and RemoveLayoutConversions then rebuilds such
values in each layout their users need (backward rematerialization). ttbuild's layout assignment
(ttbuild.backend.ttgir.coalesce) ties every operand of an elementwise or memory op into one group, so
one mask `offs < n` shared by loads used along different dimensions (a recurrence that reads q and k
along a state's columns and v along its rows) put every one of those loads, their loop-carried pointers
included, in the layout the first one needed: pointers replicated 32 times per thread, and a
conversion through shared memory per load and iteration. Here such an operand is left out of its
user's group while the groups form (`Loose.defer`); afterwards a value whose users all landed in one
group joins it as before (no change for the usual kernel), and one shared by several groups joins those
whose layout nothing decides, and is rebuilt in the layout of each group that its own memory ops or a
use (a reduction's result, an expand_dims operand) decide (`Loose.rebuild`, through
remove_layout_conversions.Remat).
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.ops import ARITH, SCF, TT
from ttbuild.backend.ir.optraits import erase_dead, is_elementwise, is_pure

_DEPTH = 8  # as Remat's rebuild depth: what is cheap here is what it rebuilds
_MEMORY_OPS = (TT.LOAD, TT.STORE, TT.ATOMIC_RMW, TT.ATOMIC_CAS)


def _vector(v) -> bool:
    return sum(1 for d in mu.shape_of(v.type) if d > 1) <= 1


def _in_loop(v) -> bool:
    """Whether `v` is computed inside a loop (a copy per layout there would be recomputed, and live, every
    iteration)."""
    op = v.owner.owner if isinstance(v, mu.ir.BlockArgument) else v.owner.operation.parent
    while op is not None and op.name != TT.FUNC:
        if op.name in (SCF.FOR, SCF.WHILE):
            return True
        op = op.operation.parent
    return False


def _height(v, budget: int) -> int:
    """Ops between `v` and the constants, splats and ranges it is computed from, looked at `budget` ops
    deep at most (budget + 1: farther, or not computed from those)."""
    if isinstance(v, mu.ir.BlockArgument) or budget < 0:
        return budget + 1 if budget >= 0 else 1
    op = v.owner
    name = op.name
    if name == ARITH.CONSTANT:
        attr = op.attributes["value"]
        return 0 if isinstance(attr, mu.ir.DenseElementsAttr) and attr.is_splat else budget + 1
    if name in (TT.SPLAT, TT.MAKE_RANGE):
        return 0
    if name in (TT.EXPAND_DIMS, TT.BROADCAST) or (
            is_elementwise(name) and len(op.results) == 1 and (_vector(v) or len(list(v.uses)) == 1)):
        return 1 + max((_height(w, budget - 1) for w in op.operands if mu.is_tensor(w)), default=0)
    return budget + 1


class Loose:
    """The cheap operands of one function's union ops, deferred until the groups are known."""

    def __init__(self):
        self.memo: dict = {}
        self.edges: list = []   # (op, operand index, anchor value: the op's own group)
        self.split: list = []   # the edges whose operand is shared by several groups

    def cheap(self, v) -> bool:
        """Whether `v` is recomputed for nothing: a splat constant, tt.splat, tt.make_range, or a view or
        elementwise op (a vector's, or used once) over such values, at most _DEPTH ops above them (what
        Remat rebuilds); never a loop-carried value or a load."""
        if v not in self.memo:
            self.memo[v] = _height(v, _DEPTH) <= _DEPTH
        return self.memo[v]

    def defer(self, op, tens: list) -> list:
        """The values of union op `op` (its tensors `tens`) that form its group; its cheap operands are
        recorded instead (a memory op's pointer always stays: its group is coalesced on it)."""
        operands = list(op.operands)
        loose = [i for i, w in enumerate(operands) if mu.is_tensor(w) and self.cheap(w) and not _in_loop(w)
                 and not (i == 0 and op.name in _MEMORY_OPS)]
        anchors = [v for v in tens if not any(v == operands[i] for i in loose)]
        if not anchors or not loose:
            return tens
        self.edges.extend((op, i, anchors[0]) for i in loose)
        return anchors

    def settle(self, uf, order: dict, sources: list) -> None:
        """Join each deferred value to its users' group when they all share one (later values first, so a
        mask's decision is made before the range it compares). Otherwise it joins the users' groups whose
        layout nothing decides (arithmetic between the value and a store: it follows the value), and stays
        split from those whose layout their own memory ops or a use decide (`sources`: pointers of memory ops,
        reductions' results, expand_dims operands...), where it is rebuilt in their layout."""
        by_value: dict = {}
        for op, i, anchor in self.edges:
            by_value.setdefault(op.operands[i], []).append((op, i, anchor))
        for w in sorted(by_value, key=lambda v: order.get(v, -1), reverse=True):
            edges = by_value[w]
            if len({uf.find(a) for _, _, a in edges}) == 1:
                uf.union(edges[0][2], w)
                continue
            held = {uf.find(v) for v in sources}
            for edge in edges:
                if uf.find(edge[2]) in held:
                    self.split.append(edge)
                else:
                    uf.union(edge[2], w)

    def rebuild(self, func, layout_of, remat) -> None:
        """Give each split operand its user's layout (`layout_of(anchor)`), rebuilt where it is defined; the
        copies nobody uses any more are erased."""
        from ttbuild.backend.ir.types import with_encoding

        for op, i, anchor in self.split:
            w = op.operands[i]
            need = layout_of(anchor)
            if need is not None and with_encoding(w.type, need) != w.type:
                op.operands[i] = remat.get(w, need)
        if self.split:
            erase_dead(func, removable=lambda o: is_pure(o.name) and any(r in self.memo for r in o.results))
