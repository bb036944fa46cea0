"""LLIR rules for tt.load / tt.store: predicated global accesses, 16 bytes per thread where proven.

Each thread's elements split into chunks of `vec` contiguous elements (vec from the pointer's
axis info and the layout's sizePerThread, as Triton's LoadStoreOpToLLVM). A chunk packs into
words (`b32` for fp32, two fp16 per `b32`) and moves with one PTX `ld/st.global.v4.b32`
emitted as inline asm under the mask's predicate (the form Triton emits, PTX ISA 9.7.9.8 ld).
When the axis analysis cannot prove the mask is uniform over a chunk (e.g. `offsets < n` with n
of unknown divisibility), the chunk branches: all lanes in bounds -> one vector access,
otherwise one predicated scalar access per element; past MAX_BRANCHED_CHUNKS chunks per thread
the access is scalar and predicated throughout, as Triton's. Masked-off loads yield `other` (or 0).
Each access carries its op's cache modifier, eviction policy (an L2 policy from `createpolicy`)
and volatile qualifier as Triton 3.6 writes them (`Access.of`).
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.axis import vector_elems
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.ir.optraits import is_volatile
from ttbuild.backend.llir.context import I1, I32, TensorVal, duplicated_dims, llvm_type
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule

_REG = {16: "h", 32: "r", 64: "l"}


def _plan(ctx, op, ptr_value, elem: str, layout, n_elems: int):
    """(vec elements per access, word bits, words per access) for this op's pointer tensor."""
    bits = mu.elem_bits(elem)
    if layout is None:
        vec = 1
    else:
        order0 = layout.order[0]
        vec = min(vector_elems(ptr_value, ctx.axis, order0), layout.size_per_thread[order0], n_elems)
    total = vec * bits
    word = total if total <= 32 else (64 if bits == 64 else 32)
    return vec, word, total // word


def _word_type(word: int) -> ir.IntType:
    return ir.IntType(max(word, 16))  # 8-bit accesses use 16-bit registers (PTX allows it)


def _pack(b, elems, ety, word):
    """Elements of one word -> the word (iW): bitcast, or a small vector bitcast."""
    wt = _word_type(word)
    if len(elems) == 1:
        e = elems[0]
        if isinstance(ety, ir.IntType):
            return b.zext(e, wt) if ety.width < wt.width else e
        return b.bitcast(e, wt)
    vt = ir.VectorType(ety, len(elems))
    v = ir.Constant(vt, None)
    for i, e in enumerate(elems):
        v = b.insert_element(v, e, ir.Constant(I32, i))
    return b.bitcast(v, wt)


def _unpack(b, w, ety, k):
    if k == 1:
        if isinstance(ety, ir.IntType):
            return [b.trunc(w, ety) if ety.width < w.type.width else w]
        return [b.bitcast(w, ety)]
    v = b.bitcast(w, ir.VectorType(ety, k))
    return [b.extract_element(v, ir.Constant(I32, i)) for i in range(k)]


def _suffix(word, nwords):
    return (f".v{nwords}" if nwords > 1 else "") + f".b{word}"


# triton::CacheModifier / EvictionPolicy values (the `cache` and `evict` attributes of tt.load and
# tt.store) -> PTX qualifiers, as Triton 3.6's LoadStoreOpToLLVM emits them (checked against its
# PTX: a load's `.cv` and a store's default write-back add nothing; PTX ISA 9.7.9.8 ld, 9.7.9.10 st).
_LOAD_CACHE = {2: ".ca", 3: ".cg"}
_STORE_CACHE = {3: ".cg", 4: ".wb", 5: ".cs", 6: ".wt"}
_EVICT = {2: "evict_first", 3: "evict_last"}


class Access:
    """The qualifiers of one global access: `head` (`ld[.volatile].global<cache>[.L1::<evict>
    .L2::cache_hint]` or `st.global...`) and the L2 policy register that `.L2::cache_hint` reads
    (None without one)."""

    def __init__(self, head: str, policy=None):
        self.head, self.policy = head, policy

    @classmethod
    def of(cls, ctx, op, load: bool) -> "Access":
        """A tt.load's or tt.store's qualifiers from its `cache`, `evict` and `isVolatile`
        attributes; an eviction policy makes one `createpolicy.fractional.L2::<evict>.b64
        policy, 1.0` per op, as Triton's."""
        p = mu.props(op)
        cache, evict = _int_attr(p, "cache"), _int_attr(p, "evict")
        volatile = load and is_volatile(op)
        head = ("ld" + (".volatile" if volatile else "") if load else "st") + ".global"
        head += (_LOAD_CACHE if load else _STORE_CACHE).get(cache, "")
        if evict not in _EVICT:
            return cls(head)
        fn = ir.FunctionType(ir.IntType(64), [])
        policy = ctx.builder.asm(fn, f"createpolicy.fractional.L2::{_EVICT[evict]}.b64 $0, 1.0;", "=l", [],
                                 side_effect=False)
        return cls(head + f".L1::{_EVICT[evict]}.L2::cache_hint", policy)


def _int_attr(props: dict, name: str) -> int:
    """An integer attribute of `props` (1, the enums' none, when absent)."""
    return mu.int_attr(props[name]) if name in props else 1


PLAIN_LOAD, PLAIN_STORE = Access("ld.global"), Access("st.global")


def _operands_after_address(acc, pred, args: list, cons: list) -> tuple[str, str]:
    """Append the access's L2 policy and its predicate to the inline asm operands `args` /
    `cons`; returns the `, $policy` text after the address and the `@$pred ` guard ("" when
    there is none)."""
    hint = guard = ""
    if acc.policy is not None:
        hint = f", ${len(cons)}"
        args.append(acc.policy)
        cons.append("l")
    if pred is not None:
        guard = f"@${len(cons)} "
        args.append(pred)
        cons.append("b")
    return hint, guard


def _asm_load(ctx, ptr, pred, word, nwords, other_words, acc=PLAIN_LOAD):
    """`mov` the fallback into the registers, then `@pred ld.global[.vN].bW` over them."""
    wt = _word_type(word)
    r = _REG[wt.width]
    outs = ", ".join(f"${i}" for i in range(nwords))
    movs, args, cons = [], [], [f"={r}"] * nwords
    for i, o in enumerate(other_words):
        movs.append(f"mov.b{wt.width} ${i}, ${nwords + i};")
        args.append(o)
        cons.append(r)
    if not other_words:
        movs = [f"mov.b{wt.width} ${i}, 0;" for i in range(nwords)]
    p = len(cons)
    args.append(ptr)
    cons.append("l")
    hint, guard = _operands_after_address(acc, pred, args, cons)
    text = "\n\t".join(movs) + "\n\t" if pred is not None else ""
    text += f"{guard}{acc.head}{_suffix(word, nwords)} {{ {outs} }}, [ ${p} + 0 ]{hint};"
    ret = wt if nwords == 1 else ir.LiteralStructType([wt] * nwords)
    ftype = ir.FunctionType(ret, [a.type for a in args])
    res = ctx.builder.asm(ftype, text, ",".join(cons), args, side_effect=True)
    if nwords == 1:
        return [res]
    return [ctx.builder.extract_value(res, i) for i in range(nwords)]


def _asm_store(ctx, ptr, pred, word, nwords, words, acc=PLAIN_STORE):
    """`@pred st.global[.vN].bW` of `words` at `ptr`, with `acc`'s qualifiers."""
    wt = _word_type(word)
    r = _REG[wt.width]
    args = list(words) + [ptr]
    cons = [r] * nwords + ["l"]
    hint, guard = _operands_after_address(acc, pred, args, cons)
    vals = ", ".join(f"${i}" for i in range(nwords))
    text = f"{guard}{acc.head}{_suffix(word, nwords)} [ ${nwords} + 0 ], {{ {vals} }}{hint};"
    ftype = ir.FunctionType(ir.VoidType(), [a.type for a in args])
    ctx.builder.asm(ftype, text, ",".join(cons), args, side_effect=True)


def _all(b, preds):
    acc = preds[0]
    for p in preds[1:]:
        acc = b.and_(acc, p)
    return acc


def _chunks(n, vec):
    return [list(range(j, j + vec)) for j in range(0, n, vec)]


def _mask_uniform(ctx, mask_value, layout, vec) -> bool:
    return vec == 1 or ctx.axis.info(mask_value).constancy[layout.order[0]] % vec == 0


# Past this many chunks per thread in one access whose mask is not uniform over a chunk, the
# access takes Triton's form instead of one branch per chunk: one predicated scalar access per
# element (LoadStoreOpToLLVM with the mask's alignment of 1). Each branch is a diamond for LLVM,
# and CorrelatedValuePropagation and instruction selection grow faster than linearly with a
# chain of them: a vector add at BLOCK 8192 on one warp (64 chunks per thread, 3 accesses)
# spent 0.10 s of 0.19 s of O3 in CVP and its ptx stage 2.5x Triton's. The library's branching
# accesses have 1-2 chunks per thread (vector add, axpy, dropout: BLOCK 1024 on 4 warps); at 16 a
# vector add of BLOCK 8192 on 4 warps still branches.
MAX_BRANCHED_CHUNKS = 16


def _scalar_form(ctx, mask_value, layout, vec, n_elems: int) -> bool:
    """Whether an access of `n_elems` elements per thread under `mask_value` (None: unmasked)
    takes Triton's predicated scalar form: its mask is not uniform over a `vec`-element chunk
    and a branch per chunk would make more than MAX_BRANCHED_CHUNKS of them."""
    return (mask_value is not None and not _mask_uniform(ctx, mask_value, layout, vec)
            and n_elems // vec > MAX_BRANCHED_CHUNKS)


def _elem_word(elem: str, ety) -> int:
    """Bits of one element's access on its own (an i1 moves as a byte)."""
    return mu.elem_bits(elem) if ety != I1 else 8


def load_words(ctx, ptr, pred, ety, word, nwords, others, idx, acc=PLAIN_LOAD):
    """The elements `idx` of a vector load of `nwords` words of `word` bits at `ptr` under `pred`, masked-off lanes
    taking `others`, with `acc`'s qualifiers; returns the unpacked elements of type `ety`."""
    b = ctx.builder
    k = len(idx) // nwords
    ow = [_pack(b, [others[i] for i in idx[w * k:(w + 1) * k]], ety, word) for w in range(nwords)] if others else []
    words = _asm_load(ctx, ptr, pred, word, nwords, ow, acc)
    return [e for w in words for e in _unpack(b, w, ety, k)]


@rule(TT.LOAD)
def load(ctx, op, ptr, *rest):
    """tt.load: per-thread vectorized global loads (up to 128 bits, as wide as the pointers' contiguity and
    alignment allow, Triton's LoadOpToLLVM), predicated by the mask with `other` where it is off; a mask not
    provably uniform over a vector takes the vector path only when all its lanes are on. i1 loads as i8."""
    p = mu.props(op)
    seg = list(p["operandSegmentSizes"]) if "operandSegmentSizes" in p else [1, len(rest), 0]
    mask = rest[0] if seg[1] else None
    other = rest[seg[1]] if seg[2] else None
    mask_v = op.operands[1] if seg[1] else None
    res = op.results[0]
    elem = mu.elem_str(res.type)
    ety = llvm_type(elem)
    mem_ety = ir.IntType(8) if ety == I1 else ety
    b = ctx.builder
    scalar = not isinstance(ptr, TensorVal)
    ptrs = [ptr] if scalar else ptr.elems
    masks = None if mask is None else ([mask] if scalar else mask.elems)
    others = None
    if other is not None:
        others = [other] if scalar else other.elems
        if ety == I1:
            others = [b.zext(o, mem_ety) for o in others]
    layout = None if scalar else ptr.layout
    vec, word, nwords = _plan(ctx, op, op.operands[0], elem, layout, len(ptrs))
    acc = Access.of(ctx, op, load=True)
    out = []
    if _scalar_form(ctx, mask_v, layout, vec, len(ptrs)):
        vec, word, nwords = 1, _elem_word(elem, ety), 1
    for idx in _chunks(len(ptrs), vec):
        if masks is None or _mask_uniform(ctx, mask_v, layout, vec):
            pred = None if masks is None else masks[idx[0]]
            out += load_words(ctx, ptrs[idx[0]], pred, mem_ety, word, nwords, others, idx, acc)
            continue
        # Mask not provably uniform over the chunk: vector path when every lane is in bounds.
        with b.if_else(_all(b, [masks[i] for i in idx])) as (whole, part):
            with whole:
                fast = load_words(ctx, ptrs[idx[0]], None, mem_ety, word, nwords, others, idx, acc)
                fast_bb = b.block
            with part:
                sw = _elem_word(elem, ety)
                slow = []
                for i in idx:
                    slow += load_words(ctx, ptrs[i], masks[i], mem_ety, sw, 1, others, [i], acc)
                slow_bb = b.block
        for f, s in zip(fast, slow):
            phi = b.phi(f.type)
            phi.add_incoming(f, fast_bb)
            phi.add_incoming(s, slow_bb)
            out.append(phi)
    if ety == I1:
        out = [b.icmp_unsigned("!=", v, ir.Constant(mem_ety, 0)) for v in out]
    if scalar:
        return out[0]
    return TensorVal(out, ptr.layout, ptr.shape)


def _store_owners(ctx, ptr, layout, vec) -> tuple[list | None, bool]:
    """Per element, the i1 "this thread stores it" (None when every thread stores all it holds),
    and whether that test is the same for all elements of each `vec`-element chunk.

    Triton's redundant-data mask (StoreOpToLLVM, getRedundantDataMask): a scalar is stored by
    thread 0 alone, and an element that several threads hold (a layout tile larger than the
    shape, a slice layout) by one of them, so a warp does not send the same bytes 32 times.
    The owner test of ctx.owned depends only on the offsets along the duplicated dimensions;
    when those differ within a vector chunk, the chunk is stored element by element instead.
    """
    b = ctx.builder
    if not isinstance(ptr, TensorVal):
        return [b.icmp_unsigned("==", ctx.sreg("tid.x"), ir.Constant(I32, 0))], True
    own = ctx.owned(layout, ptr.shape)
    if own is None or vec == 1:
        return own, True
    par, pshape, dims = duplicated_dims(layout, ptr.shape)
    offs = par.local_offsets(pshape)
    for idx in _chunks(len(offs), vec):
        if len({tuple(offs[i][d] for d in dims) for i in idx}) > 1:
            return own, False
    return own, True


@rule(TT.STORE)
def store(ctx, op, ptr, value, mask=None):
    """tt.store: per-thread vectorized global stores (as wide as contiguity and alignment allow), predicated by the
    mask; each element is stored once (threads holding replicated copies skip it, as Triton's StoreOpToLLVM)."""
    elem = mu.elem_str(op.operands[1].type)
    ety = llvm_type(elem)
    mem_ety = ir.IntType(8) if ety == I1 else ety
    b = ctx.builder
    scalar = not isinstance(ptr, TensorVal)
    ptrs = [ptr] if scalar else ptr.elems
    vals = [value] if scalar else value.elems
    if ety == I1:
        vals = [b.zext(v, mem_ety) for v in vals]
    masks = None if mask is None else ([mask] if scalar else mask.elems)
    layout = None if scalar else ptr.layout
    vec, word, nwords = _plan(ctx, op, op.operands[0], elem, layout, len(ptrs))
    own, uniform = _store_owners(ctx, ptr, layout, vec)
    mask_v = op.operands[2] if mask is not None else None
    if not uniform or _scalar_form(ctx, mask_v, layout, vec, len(ptrs)):
        vec, word, nwords = 1, _elem_word(elem, ety), 1
    k = vec // nwords
    acc = Access.of(ctx, op, load=False)

    def words(ix, w):
        """The values at indices `ix` packed into `w`-bit words, k elements each."""
        return [_pack(b, [vals[i] for i in ix[j * k:(j + 1) * k]], mem_ety, w) for j in range(len(ix) // k)]

    if own is not None:
        masks = own if masks is None else [b.and_(m, o) for m, o in zip(masks, own)]
    for idx in _chunks(len(ptrs), vec):
        # the owner test is uniform over a chunk (see _store_owners): the user's mask decides
        if mask is None or _mask_uniform(ctx, mask_v, layout, vec):
            pred = None if masks is None else masks[idx[0]]
            _asm_store(ctx, ptrs[idx[0]], pred, word, nwords, words(idx, word), acc)
            continue
        with b.if_else(_all(b, [masks[i] for i in idx])) as (whole, part):
            with whole:
                _asm_store(ctx, ptrs[idx[0]], None, word, nwords, words(idx, word), acc)
            with part:
                sw = _elem_word(elem, ety)
                for i in idx:
                    _asm_store(ctx, ptrs[i], masks[i], sw, 1, [_pack(b, [vals[i]], mem_ety, sw)], acc)
    return None
