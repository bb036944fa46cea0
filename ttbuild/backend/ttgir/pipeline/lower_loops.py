"""Pipeliner, stage 2 (Triton's LowerLoops.cpp): one `scf.for` rewritten so its loads become async copies into shared-memory rings.

The copies run S-1 iterations ahead of their consumers, with the prologue PipelineExpander.cpp
peels.

The rules are in ttbuild.backend.ttgir.pipeline's docstring; the loop surgery is in .expander,
the wgmma groups' waits in .wgmma_waits.
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.builders import (
    SGE,
    SLT,
    ArithBuilder,
    async_commit_group,
    async_copy,
    async_wait,
    barrier_ring,
    create,
    inval_ring,
    local_alloc,
    local_dealloc,
    local_load,
    memdesc_index,
    tma_copy_attrs,
    tma_copy_operands,
    wait_barrier_attrs,
)
from ttbuild.backend.ir.encodings import parse_encoding, shared_encoding
from ttbuild.backend.ir.ops import ARITH, SCF, TTG, TTNG
from ttbuild.backend.ir.optraits import ancestor_in
from ttbuild.backend.ir.types import MemDescType, barrier_type, memdesc_type
from ttbuild.backend.ttgir.pipeline.assign_latencies import Candidate, address, segments, update_ops, yielded
from ttbuild.backend.ttgir.pipeline.expander import clone_ops, const_int, drop_dead_args, grow_loop, unused
from ttbuild.backend.ttgir.pipeline.release import release_slots
from ttbuild.backend.ttgir.pipeline.wgmma_waits import erase_fence_after, keep_in_flight, retarget

ir = mu.ir

# A group of TMA loads gets its own mbarrier when it moves this many bytes per slot, else the loads
# of a slot share one. Measured on the H200 (session 26, attention forward through descriptors):
# K and V tiles of 32 KiB (d128, BLOCK_N 128) on a barrier each ran 5-10 % faster, as Triton 3.6
# builds them; tiles of 8-16 KiB (d64, or BLOCK_N 64) 1-5 % slower than on one barrier (a second
# wait per iteration against a shorter load).
SPLIT_BYTES = 32 * 1024


class Loop:
    """Rewrites one scf.for with S stages and its pipelined loads."""

    def __init__(self, for_op, stages: int, cands: list[Candidate], num_warps: int = 4):
        """`for_op` pipelined at `stages` stages, its loads `cands` (assign_latencies.candidates), in
        a kernel of `num_warps` warps."""
        self.op, self.S, self.cands, self.num_warps = for_op, stages, cands, num_warps
        self.all_tma = all(c.tma for c in cands)
        # A wgmma operand ring holds one more slot: the copy for iteration i + S - 1 lands in
        # the slot iteration i - 1's wgmma read, which may still run until iteration i's
        # warp_group_dot_wait {pendings = 1} (Triton's loadRequiresAdditionalBuffer).
        self.wgmmas = {c.reader.operation: c.reader for c in cands
                       if c.reader is not None and c.reader.name == TTNG.WARP_GROUP_DOT}
        self.wgmmas.update({wg.operation: wg for c in cands for _, wg, _ in c.views})
        self.slots = stages if self.wgmmas else stages - 1
        self.b = ArithBuilder(for_op.location)
        self.lb, self.ub, self.step = list(for_op.operands)[:3]
        self.body = for_op.regions[0].blocks[0]
        self.iv = self.body.arguments[0]

    def _iter_value(self, k: int, base):
        """base + k*step (k a Python int), folded when step is a constant."""
        return base if k == 0 else self.b.addi(base, self._step_times(k))

    def _mapping(self, iv_value, cvals):
        """The renaming of a cloned iteration: iv -> iv_value, iter_arg j -> cvals[j]."""
        m = {self.iv: iv_value}
        args = list(self.body.arguments)
        for j, v in (cvals or {}).items():
            m[args[1 + j]] = v
        return m

    def _update(self, cvals, k: int, base):
        """The carried values of the next iteration: the body's updates cloned with the
        iteration at base + k*step reading `cvals` ({iter_arg index: value}); that iteration's
        induction value is built only when an update reads it."""
        reads_iv = any(x == self.iv for op in self.upd_ops for x in op.operands)
        m = self._mapping(self._iter_value(k, base) if reads_iv else None, cvals)
        clone_ops(self.upd_ops, m)
        ylds = yielded(self.body)
        return {j: m.get(ylds[j], ylds[j]) for j in sorted(cvals)}

    def _clone_slice(self, cand: Candidate, iv_value, cvals=None) -> list:
        """Clones of the slice ops at the current insertion point with iv -> iv_value and the
        carried values -> cvals; returns the load's address operands (address: pointer and
        mask, or descriptor indices) as that iteration computes them."""
        m = self._mapping(iv_value, cvals)
        clone_ops(cand.slice_ops, m)
        return [m.get(x, x) for x in address(cand.load)]

    def _tma_copies(self, iv_value, pred, slot, cvals=None):
        """The TMA copies of the iteration at iv_value into ring slot `slot` (an i32): per group
        of loads (_alloc_barriers), that slot's mbarrier of the group first expects their bytes,
        then each copy completes on it (Triton's LowerLoops: ttng.barrier_expect, then
        ttng.async_tma_copy_global_to_local per load)."""
        b = self.b
        alloc_of = {id(c): a for c, a in zip(self.cands, self.allocs)}
        for ring, group, _ in self.groups:
            bar = memdesc_index(ring, slot, barrier_type(), b.loc)
            nbytes = sum(mu.nbytes(c.load.results[0].type) for c in group)
            b.op(TTNG.BARRIER_EXPECT, [], [bar, pred], {"size": ir.IntegerAttr.get(b.i32, nbytes)})
            for cand in group:
                alloc = alloc_of[id(cand)]
                lb = self.b.at(cand.load.location)
                idx = self._clone_slice(cand, iv_value, cvals)
                view = memdesc_index(alloc, slot, self.views[id(alloc)], lb.loc)
                lb.op(TTNG.ASYNC_TMA_COPY_GLOBAL_TO_LOCAL, [],
                      tma_copy_operands(cand.load.operands[0], idx, view, bar, pred), tma_copy_attrs(len(idx)))

    def _copies(self, iv_value, pred, slots, cvals=None):
        """Async copies of every pipelined pointer load for the iteration at iv_value (carried
        values `cvals`) into `slots` (one memdesc per load), then one commit group; returns the
        group's token (None without pointer loads); the TMA loads' copies go with them."""
        if any(c.tma for c in self.cands):
            self._tma_copies(iv_value, pred, slots[0], cvals)
        if all(c.tma for c in self.cands):
            return None
        toks = []
        for cand, alloc, slot in zip(self.cands, self.allocs, slots):
            if cand.tma:
                continue
            b = self.b.at(cand.load.location)
            ptr, *rest = self._clone_slice(cand, iv_value, cvals)
            mask = rest[0] if rest else None
            view = memdesc_index(alloc, slot, self.views[id(alloc)], b.loc)
            m = b.splat_i1(pred, ptr)
            if mask is not None:
                m = b.andi(m, mask)
            p = mu.props(cand.load)
            attrs = {"cache": p["cache"], "evict": p["evict"], "isVolatile": ir.BoolAttr.get(False),
                     "operandSegmentSizes": ir.Attribute.parse("array<i32: 1, 1, 1, 0>")}
            toks.append(async_copy(ptr, view, m, attrs, b.loc))
        return async_commit_group(toks, self.b.loc)

    def _step_times(self, k: int):
        """k * step as an i32 value (a constant when step is one)."""
        c = const_int(self.step)
        return self.b.const(k * c) if c is not None else self.b.muli(self.step, self.b.const(k))

    def rewrite(self):
        """Rewrite the loop (see ttbuild.backend.ttgir.pipeline): rings and prologue before it,
        the slot wait and the consumers' reads in its body, the next iteration's copies before
        its yield, waits and deallocation after it. Returns the new scf.for."""
        S = self.S
        self.allocs, self.views = [], {}
        carried = frozenset().union(*(c.carried for c in self.cands))
        self.upd_ops = update_ops(self.body, self.iv, carried) if carried else ()
        inits = list(self.op.operands)[3:]
        cvals = {j: inits[j] for j in sorted(carried)}
        with ir.InsertionPoint(self.op):
            self._alloc_rings()
            self._alloc_barriers()
            tokens, cvals = self._prologue(cvals)
            init_insert, init_extract = self.b.const(S - 2), self.b.const(-1)
            # the parity of the slot barriers' phase being waited for (with TMA loads)
            phases = [self.b.const(0)] if self.barriers is not None else []
        nres = len(self.op.results)
        # The loop carries, next to the originals, the carried values S-2 iterations ahead.
        ahead = sorted(cvals)
        new_for = self._grow([init_insert, init_extract] + phases + tokens + [cvals[j] for j in ahead])
        args = list(self.body.arguments)
        insert, extract = args[1 + nres], args[2 + nres]
        phase = args[3 + nres] if phases else None
        first_tok = 3 + nres + len(phases)
        toks = args[first_tok:first_tok + len(tokens)]
        ahead_args = {j: a for j, a in zip(ahead, args[first_tok + len(tokens):])}
        ops = list(self.body.operations)
        first = next(o for o in ops if any(o.operation == c.load.operation for c in self.cands))
        with ir.InsertionPoint(first):
            pred, ext, waited, phase = self._wait_slot(extract, toks, phase)
            if self.groups:  # the first group's slot is waited for where its loads were
                self._wait_group(self.groups[0][0], ext, phase)
        for cand, alloc in zip(self.cands, self.allocs):
            self._consume(cand, alloc, ext, waited)
        for ring, _, user in self.groups[1:]:  # a later group's, just before its first reader
            with ir.InsertionPoint(user):
                self._wait_group(ring, ext, phase)
        self._next_iteration(ops[-1], nres, pred, insert, ext, phase, toks, ahead, ahead_args)
        for cand in self.cands:
            cand.load.erase()
        with ir.InsertionPoint.after(new_for):
            self._epilogue(toks)
        self._drop_address_math()
        if ahead:
            self.op = drop_dead_args(self.op, ahead)
        for wg in self.wgmmas.values():
            keep_in_flight(wg, self.op)
        if self.barriers is not None and self.all_tma:
            self.op = release_slots(self.op, self.read_inc, self.refill_slot, self.slots, self.num_warps)
        return self.op

    def _grow(self, extra_inits):
        """The loop with `extra_inits` appended to its iter_args (expander.grow_loop); the body
        and induction variable are the new loop's from then on."""
        self.op = grow_loop(self.op, self.body, extra_inits)
        self.body = self.op.regions[0].blocks[0]
        self.iv = self.iv_new = self.body.arguments[0]
        return self.op

    def _alloc_rings(self) -> None:
        """One ring of `slots` tiles per candidate (self.allocs), and the memdesc type of one
        slot's view of it (self.views, by id of the ring): a dot operand's in its staging
        alloc's encoding (a TMA slot: the wgmma operand itself), a plain load's unswizzled."""
        b = self.b
        for cand in self.cands:
            res = cand.load.results[0].type
            t = ir.RankedTensorType(res)
            elem = str(t.element_type)
            if cand.alloc is not None:
                enc = cand.ring_enc or shared_encoding(str(cand.alloc.results[0].type))
                ring = memdesc_type((self.slots, *t.shape), elem, None, enc)
                view = memdesc_type(tuple(t.shape), elem, None, enc)
            else:
                order = parse_encoding(str(t.encoding)).order
                ring = memdesc_type((self.slots, *t.shape), elem, order)
                view = memdesc_type(tuple(t.shape), elem, order)
            if cand.tma:  # the slot is the wgmma operand itself (a transposed view for tt.trans)
                shape = MemDescType.shape_of(cand.alloc.results[0].type)
                ring = memdesc_type((self.slots, *shape), elem, None, enc)
                view = memdesc_type(tuple(shape), elem, None, enc)
            alloc = local_alloc(ring, loc=b.loc)
            self.allocs.append(alloc)
            self.views[id(alloc)] = view

    def _alloc_barriers(self) -> None:
        """With TMA loads: the loads grouped by the body op that first reads them when each group
        moves SPLIT_BYTES or more per slot, else one group (Triton's LowerLoops groups a barrier's
        loads by their first use: matmul's A and B, both read by the one wgmma, share one;
        attention's K and V, read by QK^T and by P V, get one each, so QK^T waits for K alone),
        and per group one mbarrier per slot, arrived on by one thread. self.groups: (ring, loads,
        first reader) in body order; self.barriers: the first group's ring."""
        b = self.b
        self.barriers, self.groups = None, []
        pos = {o.operation: k for k, o in enumerate(self.body.operations)}
        by_user: dict = {}
        for cand in self.cands:
            if cand.tma:  # the body op that first reads the tile: its wgmma (the load without one)
                readers = [wg for _, wg, _ in cand.views] or [cand.reader or cand.load]
                first = min((ancestor_in(r, pos) for r in readers), key=pos.__getitem__)
                by_user.setdefault(first, []).append(cand)
        if any(sum(mu.nbytes(c.load.results[0].type) for c in g) < SPLIT_BYTES for g in by_user.values()):
            by_user = {min(by_user, key=pos.__getitem__): [c for g in by_user.values() for c in g]}
        for user in sorted(by_user, key=pos.__getitem__):
            self.groups.append((barrier_ring(b, self.slots, 1), by_user[user], user))
        if self.groups:
            self.barriers = self.groups[0][0]

    def _prologue(self, cvals):
        """The copies of iterations 0..S-2, each into slot k under `iv_k < ub`; returns their
        groups' tokens and the carried values of iteration S-2. Iteration k's copies read the
        carried values of iteration k: those of k-1 advanced by the body's updates (Triton
        peels the address computation alike)."""
        b = self.b
        tokens = []
        for k in range(self.S - 1):
            if k and cvals:
                cvals = self._update(cvals, k - 1, self.lb)
            ivk = self._iter_value(k, self.lb)
            pred = b.cmpi(SLT, ivk, self.ub)
            idx = b.const(k)
            tok = self._copies(ivk, pred, [idx] * len(self.cands), cvals)
            if tok is not None:
                tokens.append(tok)
        return tokens, cvals

    def _wait_slot(self, extract, toks, phase):
        """At the top of the body: the predicate of this iteration's copies (`iv < ub -
        (S-1)*step`), the slot to read (extract + 1, wrapping), the wait for its copies (the
        oldest group's token, S-2 groups left in flight) and, with TMA loads, the phase of the
        slot's mbarriers its next fill completes (flipped at each wrap; rewrite waits on the
        first group's barrier here, on a later group's before that group's first reader)."""
        b, S = self.b, self.S
        lim = b.subi(self.ub, self._step_times(S - 1))
        pred = b.cmpi(SLT, self.iv_new, lim)
        ext = b.addi(extract, b.const(1))
        self.read_inc = ext.owner  # `extract + 1`: its operand stays the slot the previous iteration read
        wrap = b.cmpi(SGE, ext, b.const(self.slots))
        ext = b.select(wrap, b.const(0), ext)
        waited = None
        if toks:
            waited = async_wait([toks[0]], S - 2, b.loc)
        if phase is not None:  # a slot's barriers complete a phase each time the slot fills
            phase = b.select(wrap, b.arith(ARITH.XORI, phase, b.const(1)), phase)
        return pred, ext, waited, phase

    def _wait_group(self, ring, ext, phase) -> None:
        """Wait on slot `ext`'s mbarrier of a group's `ring` for the parity `phase`."""
        bar = memdesc_index(ring, ext, barrier_type(), self.b.loc)
        self.b.op(TTNG.WAIT_BARRIER, [], [bar, phase], wait_barrier_attrs())

    def _consume(self, cand, alloc, ext, waited) -> None:
        """The pipelined load's consumers read slot `ext` of its ring `alloc` instead: a wgmma
        reads the slot (through a transposed view for a tt.trans), a dot operand's local_load
        reads it in place of the register round trip, any other load becomes a local_load
        (with `other` re-applied by a select when it is not +0)."""
        load = cand.load
        lb = self.b.at(load.location)
        slot_view = lambda: memdesc_index(alloc, ext, self.views[id(alloc)], lb.loc)  # noqa: E731
        if cand.tma or (cand.alloc is not None and not cand.views and cand.reader.name == TTNG.WARP_GROUP_DOT):
            # wgmma reads the slot itself (TMA filled: the alloc's view, transposed for tt.trans);
            # the dot and its waits take the slot's view.
            with ir.InsertionPoint(cand.reader):
                view = slot_view()
            retarget(cand.alloc.results[0], view)
            erase_fence_after(cand.alloc)
            cand.alloc.erase()
            if cand.tma and cand.trans is not None:
                cand.trans.erase()
        elif cand.views:
            self._consume_views(cand, lb, slot_view)
        elif cand.alloc is not None:
            # The dot operand's local_load reads the slot itself (no register round trip).
            with ir.InsertionPoint(cand.reader):
                val = local_load(cand.reader.results[0].type, slot_view(), waited, lb.loc)
            cand.reader.results[0].replace_all_uses_with(val)
            cand.reader.erase()
            cand.alloc.erase()
        else:
            with ir.InsertionPoint(load):
                val = local_load(load.results[0].type, slot_view(), waited, lb.loc)
                seg = segments(load)
                if seg[2] and not mu.is_zero_splat(load.operands[1 + seg[1]]):
                    val = lb.select(load.operands[1], val, load.operands[1 + seg[1]])
            load.results[0].replace_all_uses_with(val)

    def _consume_views(self, cand, lb, slot_view) -> None:
        """Each wgmma that reads the load reads the slot, a tt.trans user through a transposed
        view of it (`ttg.memdesc_trans`)."""
        elem = str(ir.RankedTensorType(cand.load.results[0].type).element_type)
        for v_alloc, wg, trans in cand.views:
            with ir.InsertionPoint(wg):
                view = slot_view()
                if trans is not None:
                    shape = MemDescType.shape_of(v_alloc.results[0].type)
                    tview = memdesc_type(shape, elem, None, shared_encoding(str(v_alloc.results[0].type)))
                    view = lb.op(TTG.MEMDESC_TRANS, [tview], [view],
                                 {"order": ir.DenseI32ArrayAttr.get([1, 0])}).results[0]
            retarget(v_alloc.results[0], view)
            erase_fence_after(v_alloc)
            v_alloc.erase()
            if trans is not None:
                trans.erase()

    def _next_iteration(self, yield_op, nres, pred, insert, ext, phase, toks, ahead, ahead_args) -> None:
        """Before the body's yield: the copies of iteration i+S-1 into the next insert slot
        (reading the carried values advanced once more), and a yield that carries the slot
        indices, the phase, the tokens in flight and the values carried ahead."""
        b = self.b
        with ir.InsertionPoint(yield_op):
            ins = b.addi(insert, b.const(1))
            ins = b.select(b.cmpi(SGE, ins, b.const(self.slots)), b.const(0), ins)
            self.refill_slot = ins
            ahead_next = self._update(ahead_args, self.S - 2, self.iv_new) if ahead else {}
            nxt = self._iter_value(self.S - 1, self.iv_new)
            tok = self._copies(nxt, pred, [ins] * len(self.cands), ahead_next)
        create(SCF.YIELD, [], list(yield_op.operands)[:nres]
               + [ins, ext] + ([phase] if phase is not None else [])
               + (list(toks[1:]) + [tok] if toks else []) + [ahead_next[j] for j in ahead],
               loc=yield_op.location, ip=ir.InsertionPoint(yield_op))
        yield_op.erase()

    def _epilogue(self, toks) -> None:
        """After the loop: wait for every copy, invalidate the mbarriers (every TMA copy issued
        has completed: each was waited for) and free the rings."""
        b = self.b
        if toks:
            async_wait([], 0, b.loc)
        for ring, _, _ in self.groups:
            inval_ring(b, ring, self.slots)
        for alloc in self.allocs:
            local_dealloc(alloc, b.loc)

    def _drop_address_math(self) -> None:
        """The address math the loads no longer use (clones feed the copies); other body ops may
        still share part of it, so only what lost every use goes."""
        pending = {op.operation: op for cand in self.cands for op in cand.slice_ops}
        changed = True
        while changed:
            changed = False
            for key, op in list(pending.items()):
                if all(unused(r) for r in op.results):
                    del pending[key]
                    op.operation.erase()
                    changed = True
