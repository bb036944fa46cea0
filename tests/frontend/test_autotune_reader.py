"""ttbuild.frontend.autotune: @triton.autotune / @triton.heuristics read from source, never run, with located refusals."""

from __future__ import annotations

import textwrap
import warnings

import pytest

from ttbuild.errors import CompilationError, CompilerWarning
from ttbuild.frontend.autotune import MAX_STEPS, Autotune, Config, Decorators, Heuristic, read_decorators
from ttbuild.runtime.heuristics import compile_expression

HEAD = '''
import torch
import triton
import triton.language as tl
'''

# A matmul in the shape of Triton's tutorial 03: configs from a function chosen by an is_cuda() helper.
MATMUL = HEAD + '''
def is_cuda():
    return triton.runtime.driver.active.get_current_target().backend == "cuda"


def is_hip_mi200():
    target = triton.runtime.driver.active.get_current_target()
    return target.backend == "hip" and target.arch == "gfx90a"


def cuda_configs(stages=3):
    """Tiles for NVIDIA GPUs."""
    configs = []
    for bm, bn in [(128, 128), (64, 256)]:
        warps = 8 if bm * bn >= 128 * 128 else 4
        configs.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 32, "GROUP_M": 8},
                                     num_stages=stages, num_warps=warps))
    configs += [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 4}, num_warps=2,
                              num_stages=stages + 2)]
    return configs


def hip_configs():
    return [triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 16, "GROUP_M": 1, "waves_per_eu": 2})]


def get_autotune_config():
    if is_cuda() or is_hip_mi200():
        return cuda_configs(stages=4)
    elif torch.version.hip:
        return hip_configs()
    return []


@triton.autotune(configs=get_autotune_config(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pass
'''


def read(src: str, kernel: str = "kernel", file: str = "k.py") -> Decorators:
    return read_decorators(textwrap.dedent(src), kernel, file)


def refusal(src: str, kernel: str = "kernel") -> CompilationError:
    """The reader's located error: raised, or kept for the rows that need the value (a configs list
    or heuristics dict it cannot evaluate: Autotune.unread, Decorators.unread)."""
    try:
        deco = read(src, kernel)
    except CompilationError as e:
        return e
    kept = deco.autotune.unread if deco.autotune is not None and deco.autotune.unread else deco.unread
    assert kept is not None, "the reader neither refused nor kept an error"
    return kept


def where(src: str, needle: str, nth: int = 0) -> tuple[int, int]:
    """(line, col) of the nth occurrence of `needle` in the dedented source."""
    lines = textwrap.dedent(src).splitlines()
    hits = [(i + 1, line.index(needle)) for i, line in enumerate(lines) if needle in line]
    return hits[nth]


def at(err: CompilationError) -> tuple[int, int]:
    return err.loc.line, err.loc.col


def test_tutorial_matmul_configs_from_functions():
    d = read(MATMUL, "matmul_kernel", "matmul.py")
    assert d.heuristics == ()
    assert d.autotune == Autotune(
        configs=(Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=8, num_stages=4),
                 Config({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=8, num_stages=4),
                 Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 64, "GROUP_M": 4}, num_warps=2, num_stages=6)),
        key=("M", "N", "K"))
    first = d.autotune.configs[0]
    assert (first.loc.file, first.loc.line, first.loc.col) == ("matmul.py", *where(MATMUL, "triton.Config"))
    assert (d.autotune.loc.line, d.autotune.loc.col) == (where(MATMUL, "triton.autotune")[0], 1)
    assert hash(first) == hash(Config({"BLOCK_K": 32}, num_warps=8, num_stages=4))  # kwargs is not hashed


def test_comprehension_and_module_level_names():
    src = HEAD + textwrap.dedent('''
    SIZES = [32, 64, 128]
    WARPS = {32: 2, 64: 4}
    BASE = [triton.Config({"BLOCK": 1024}, num_warps=8, num_stages=1, maxnreg=128)]
    CONFIGS = BASE + [
        triton.Config({"BLOCK": b, "ROWS": r}, num_warps=WARPS[b] if b in WARPS else 8)
        for b in SIZES if b > 32 or len(SIZES) == 1
        for r in range(1, 3)
    ]

    @triton.autotune(CONFIGS, ["n_rows", "n_cols"], reset_to_zero=("out_ptr",), restore_value=["x_ptr"],
                     warmup=25, rep=100, cache_results=True, use_cuda_graph=False)
    @triton.jit
    def kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr, ROWS: tl.constexpr = 1):
        pass
    ''')
    tune = read(src).autotune
    assert [(c.kwargs, c.num_warps, c.num_stages, c.maxnreg) for c in tune.configs] == [
        ({"BLOCK": 1024}, 8, 1, 128),
        ({"BLOCK": 64, "ROWS": 1}, 4, 3, None), ({"BLOCK": 64, "ROWS": 2}, 4, 3, None),
        ({"BLOCK": 128, "ROWS": 1}, 8, 3, None), ({"BLOCK": 128, "ROWS": 2}, 8, 3, None)]
    assert tune.key == ("n_rows", "n_cols")
    assert (tune.reset_to_zero, tune.restore_value) == (("out_ptr",), ("x_ptr",))


@pytest.mark.parametrize("imports, deco, config", [
    ("import triton", "triton.autotune", "triton.Config"),
    ("from triton import autotune, Config", "autotune", "Config"),
    ("import triton as tt", "tt.autotune", "tt.Config"),
    ("from triton.runtime import autotuner", "autotuner.autotune", "autotuner.Config"),
    ("from triton.runtime.autotuner import autotune as tune, Config as C", "tune", "C"),
])
def test_decorator_spellings(imports, deco, config):
    src = f'''
    {imports}
    from triton.language import constexpr
    import triton.language as tl

    @{deco}(configs=[{config}(kwargs={{"B": 64}}, num_warps=2, num_ctas=2)], key=[])
    @triton.jit
    def kernel(x, B: constexpr):
        pass
    '''
    assert read(src).autotune.configs == (Config({"B": 64}, num_warps=2, num_ctas=2),)


def test_empty_config_list_is_tritons_default_and_no_decorators():
    src = HEAD + textwrap.dedent('''
    @triton.autotune(configs=[], key=[])
    @triton.jit
    def kernel(x):
        pass

    @triton.jit
    def plain(x, B: tl.constexpr):
        pass
    ''')
    assert read(src).autotune.configs == (Config({}, num_warps=4, num_stages=3, num_ctas=1),)
    assert read(src, "plain") == Decorators(None, ())


HEUR = HEAD + '''
from triton import cdiv as ceil_div


def block_for(meta):
    """Whole rows in one program."""
    return min(triton.next_power_of_2(meta["N"]), 8192)


@triton.autotune(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_K": 32}),
                          triton.Config({"BLOCK_M": 128, "BLOCK_K": 64}, num_warps=8)], key=["M", "K"])
@triton.heuristics({
    "EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0,
    "BLOCK_N": block_for,
})
@triton.heuristics(values={"TILES": lambda nargs: ceil_div(nargs["M"], nargs["BLOCK_M"]) * tl.cdiv(nargs["N"], 16)})
@triton.jit
def kernel(x_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
           BLOCK_N: tl.constexpr, TILES: tl.constexpr):
    pass
'''


def test_heuristics_normalized_in_launch_order():
    d = read(HEUR)
    assert [c.kwargs for c in d.autotune.configs] == [{"BLOCK_M": 64, "BLOCK_K": 32}, {"BLOCK_M": 128, "BLOCK_K": 64}]
    assert d.heuristics == (
        Heuristic("EVEN_K", "args['K'] % args['BLOCK_K'] == 0", ("BLOCK_K", "K"), True),
        Heuristic("BLOCK_N", "min(next_power_of_2(args['N']), 8192)", ("N",), False),
        Heuristic("TILES", "cdiv(args['M'], args['BLOCK_M']) * cdiv(args['N'], 16)", ("BLOCK_M", "M", "N"), False),
    )
    assert (d.heuristics[0].loc.line, d.heuristics[0].loc.col) == where(HEUR, "lambda args")
    assert d.heuristics[1].loc.line == where(HEUR, '"BLOCK_N": block_for')[0]
    f = {h.name: compile_expression(h.expr) for h in d.heuristics}
    args = {"M": 1000, "N": 3000, "K": 96, "BLOCK_M": 128, "BLOCK_K": 32}
    assert (f["EVEN_K"](args), f["BLOCK_N"](args), f["TILES"](args)) == (True, 4096, 8 * 188)
    assert f["EVEN_K"]({**args, "K": 100}) is False


def test_prune_configs_by_warns_and_goes_on():
    src = HEAD + textwrap.dedent('''
    def prune(configs, named_args, **kwargs):
        return configs[:1]

    @triton.autotune(configs=[triton.Config({"B": 1}), triton.Config({"B": 2})], key=[],
                     prune_configs_by={"early_config_prune": prune, "top_k": 1})
    @triton.jit
    def kernel(x, B: tl.constexpr):
        pass
    ''')
    with pytest.warns(CompilerWarning, match="prune_configs_by is not evaluated") as rec:
        d = read(src)
    assert len(d.autotune.configs) == 2
    assert (rec[0].message.loc.line, rec[0].message.loc.col) == where(src, '{"early_config_prune"')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read(src.replace('prune_configs_by={"early_config_prune": prune, "top_k": 1}', "prune_configs_by=None"))


def test_pre_hook_none_passed_on_by_a_config_helper():
    """Tutorial 09's matmul_get_configs(pre_hook=None) hands its parameter to triton.Config: None
    unless a caller passes a hook."""
    src = HEAD + textwrap.dedent('''
    NO_HOOK = None

    def hook(nargs):
        pass

    def matmul_get_configs(pre_hook=None):
        return [
            triton.Config({'BLOCK_SIZE_M': BM, 'BLOCK_SIZE_N': BN}, num_stages=s,
                          num_warps=w, pre_hook=pre_hook)
            for BM in [128]
            for BN in [128, 256]
            for s in ([2, 3])
            for w in [4, 8]
        ]

    @triton.autotune(configs=matmul_get_configs(), key=["M"], pre_hook=NO_HOOK, post_hook=None,
                     prune_configs_by=NO_HOOK)
    @triton.jit
    def kernel(x, M, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
        pass

    @triton.autotune(configs=matmul_get_configs(pre_hook=hook), key=["M"])
    @triton.jit
    def hooked(x, M, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
        pass
    ''')
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # prune_configs_by=None through a name: no warning either
        tune = read(src).autotune
    assert [(c.kwargs["BLOCK_SIZE_N"], c.num_stages, c.num_warps) for c in tune.configs] == [
        (128, 2, 4), (128, 2, 8), (128, 3, 4), (128, 3, 8), (256, 2, 4), (256, 2, 8), (256, 3, 4), (256, 3, 8)]
    err = refusal(src, "hooked")
    assert err.message == "triton.Config(pre_hook=...): ttbuild builds configs ahead of time and cannot run a pre_hook"
    assert at(err) == where(src, "pre_hook)")  # the helper's `pre_hook=pre_hook`


def test_key_that_is_no_parameter_is_ignored_with_a_warning():
    """Tutorial 08's `key=[..., 'gropup_c_ptrs', ...]`: Triton's Autotuner.run keeps the key names
    found among the arguments and skips the others; so does ttbuild, and it says so."""
    src = HEAD + textwrap.dedent('''
    @triton.autotune(
        [triton.Config({"B": 64})],
        key=['group_a_ptrs', 'group_b_ptrs', 'gropup_c_ptrs', 'group_size'],
    )
    @triton.jit
    def kernel(group_a_ptrs, group_b_ptrs, group_c_ptrs, group_size, B: tl.constexpr):
        pass
    ''')
    with pytest.warns(CompilerWarning) as rec:
        tune = read(src).autotune
    assert tune.key == ("group_a_ptrs", "group_b_ptrs", "group_size")
    (w,) = [r.message for r in rec]
    assert w.message == ("autotune key names 'gropup_c_ptrs', which is not a parameter of kernel (parameters: "
                         "group_a_ptrs, group_b_ptrs, group_c_ptrs, group_size, B): ignored, as Triton's autotuner "
                         "ignores it too")
    assert (w.loc.file, w.loc.line, w.loc.col) == ("k.py", *where(src, "'gropup_c_ptrs'"))
    assert str(w).startswith(f"k.py:{w.loc.line}:{w.loc.col + 1}: warning: autotune key names 'gropup_c_ptrs'")


def test_filter_map_and_lambdas_over_configs():
    """Tutorial 06's `configs=list(filter(keep, configs))` with keep() reading the config's fields."""
    src = HEAD + textwrap.dedent('''
    def is_cuda():
        return triton.runtime.driver.active.get_current_target().backend == "cuda"

    configs = [
        triton.Config({'BLOCK_M': BM, 'BLOCK_N': BN}, num_stages=s, num_warps=w, pre_hook=None) \\
        for BM in [64, 128]\\
        for BN in [32, 128]\\
        for s in [2] \\
        for w in [4, 8]\\
    ]

    def keep(conf):
        BLOCK_M = conf.kwargs["BLOCK_M"]
        BLOCK_N = conf.kwargs["BLOCK_N"]
        return not (is_cuda() and BLOCK_M * BLOCK_N < 128 * 128 and conf.num_warps == 8
                    and conf.pre_hook is None and conf.num_ctas == 1)

    small = lambda c: c.kwargs["BLOCK_M"] == 64
    MORE = list(map(lambda bm, w: triton.Config({'BLOCK_M': bm, 'BLOCK_N': 16}, num_warps=w), (16, 32), [1, 2, 4]))

    @triton.autotune(configs=list(filter(keep, configs)), key=["N_CTX"])
    @triton.jit
    def kernel(N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        pass

    @triton.autotune(configs=tuple(filter(small, configs)) + tuple(filter(None, MORE)), key=[])
    @triton.jit
    def other(N_CTX, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        pass
    ''')
    tune = read(src).autotune
    assert [(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps) for c in tune.configs] == [
        (64, 32, 4), (64, 128, 4), (128, 32, 4), (128, 128, 4), (128, 128, 8)]
    assert tune.configs[0].loc.line == where(src, "triton.Config({'BLOCK_M': BM")[0]
    other = read(src, "other").autotune
    assert [(c.kwargs, c.num_warps) for c in other.configs] == [
        ({"BLOCK_M": 64, "BLOCK_N": 32}, 4), ({"BLOCK_M": 64, "BLOCK_N": 32}, 8),
        ({"BLOCK_M": 64, "BLOCK_N": 128}, 4), ({"BLOCK_M": 64, "BLOCK_N": 128}, 8),
        ({"BLOCK_M": 16, "BLOCK_N": 16}, 1), ({"BLOCK_M": 32, "BLOCK_N": 16}, 2)]


def kernel_with(configs: str, key: str = '["n"]', extra: str = "", helpers: str = "") -> str:
    return HEAD + helpers + f'''
@triton.autotune(configs={configs}, key={key}{extra})
@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass
'''


# (source, the text the error points at, what its message must say)
REFUSALS = [
    (kernel_with('[triton.Config({"BLOCK": 64})] if torch.cuda.is_available() else []'),
     "torch.cuda.is_available()", "cannot evaluate `torch.cuda.is_available()` without running the file"),
    (kernel_with('[triton.Config({"BLOCK": 64}, num_warps=torch.cuda.device_count())]'),
     "torch.cuda.device_count()", "reads autotune configs statically"),
    (kernel_with('[triton.Config({"BLOCK": 64}, pre_hook=zero_out)]'),
     "zero_out", "ttbuild builds configs ahead of time and cannot run a pre_hook"),
    (kernel_with('[triton.Config({"BLOCK": 64}, ir_override="k.ttgir")]'), '"k.ttgir"', "ir_override"),
    (kernel_with('[triton.Config({"BLOCK": 64})]', extra=", pre_hook=lambda kw, reset_only=False: None"),
     "lambda kw", "cannot run a pre_hook"),
    (kernel_with('[triton.Config({"BLOCK": 64})]', extra=", post_hook=done"), "done", "post_hook"),
    (kernel_with('[triton.Config({"BLOCK": 64})]', extra=", do_bench=bench"), "bench)", "do_bench"),
    (kernel_with('[triton.Config({"BLOCK": 64})]', key='["n", 3]'),
     "3]", "autotune key names 3, which is not a parameter of kernel (parameters: x_ptr, n, BLOCK)"),
    (kernel_with('[triton.Config({"BLOCK": 64})]', key='"n"'), '"n"', "must be a list of argument names"),
    (kernel_with('[triton.Config({"BLOCK": 64})]', extra=', reset_to_zero=["y_ptr"]'), '"y_ptr"', "reset_to_zero"),
    (kernel_with('[triton.Config({"BLOCK": 64, "n": 3})]'),
     '"n": 3', "sets `n`, which is not a tl.constexpr parameter of the kernel (constexpr parameters: BLOCK)"),
    (kernel_with('[triton.Config({"BLOCK": 64}), 4]'), "4]", "configs[1] is 4, not a triton.Config"),
    (kernel_with('[triton.Config({"BLOCK": 64}, num_warps=6)]'), "6)]", "num_warps=6): must be a power of 2"),
    (kernel_with('[triton.Config({"BLOCK": 64.0j})]'), "64.0j", "cannot evaluate `64j`"),
    (kernel_with("A", helpers="A = B\nB = [*A]\n"), "A]", "`A` is defined in terms of itself (A -> B -> A)"),
    (kernel_with("configs()", helpers="def configs():\n    out = []\n    for i in range(10 ** 9):\n"
                                      "        out.append(i)\n    return out\n"),
     "for i in", f"gave up evaluating after {MAX_STEPS} steps (a runaway loop?)"),
    (kernel_with("[triton.Config({'BLOCK': b}) for b in range(10 ** 6)]"), "[triton.Config({'BLOCK': b}) for",
     "runaway loop"),
    (kernel_with("make()", helpers="def make():\n    return make()\n"), ("make()", 1), "(a recursion?)"),
    (kernel_with("cfgs()", helpers="def cfgs():\n    import os\n    return []\n"), "import os",
     "a function body may hold"),
    (kernel_with("cfgs(8)", helpers="def cfgs(w):\n    return [triton.Config({'BLOCK': 1}, num_warps=v)]\n"),
     "v)", "name `v` is not defined before the kernel"),
    (kernel_with("cfgs()", helpers="def cfgs():\n    w = w + 1\n    return []\n"), "w + 1",
     "local name `w` is read before it is assigned"),
    (kernel_with("[] if is_mi300() else []",
                 helpers="def is_mi300():\n    return triton.runtime.driver.active.get_current_target().arch == 9\n"),
     "triton.runtime.driver.active.get_current_target().arch", "arch depends on the GPU"),
    (kernel_with('[triton.Config({"BLOCK": 2 ** 10 ** 9})]'), "2 ** 10", "has more than 4096 bits"),
    (kernel_with('[triton.Config({"BLOCK": 64})]', extra=", warm_up=3"), "warm_up=3",
     "triton.autotune has no parameter `warm_up`"),
    (kernel_with("os.environ['CONFIGS']", helpers="import os\n"), "os.environ", "cannot evaluate `os.environ`"),
    (kernel_with("[triton.Config({'BLOCK': b}) for b, w in zip([64], [4])]"), "zip(",
     "cannot evaluate `zip([64], [4])` without running the file"),
    (kernel_with("configs(hook)", helpers="def hook(nargs):\n    pass\n\n\ndef configs(pre_hook=None):\n"
                                          "    return [triton.Config({'BLOCK': 64}, pre_hook=pre_hook)]\n"),
     "pre_hook)]", "triton.Config(pre_hook=...): ttbuild builds configs ahead of time and cannot run a pre_hook"),
    (kernel_with("[triton.Config({'BLOCK': 64}, pre_hook=HOOK)]", helpers="HOOK = print\n"), "HOOK)",
     "triton.Config(pre_hook=...): ttbuild builds configs ahead of time and cannot run a pre_hook"),
    (kernel_with("list(filter(keep, CONFIGS))",
                 helpers="CONFIGS = [triton.Config({'BLOCK': 64})]\n\n\ndef keep(conf):\n"
                         "    return torch.cuda.get_device_capability()[0] == 9\n"),
     "torch.cuda.get_device_capability()",
     "cannot evaluate `torch.cuda.get_device_capability()` without running the file"),
    (kernel_with("list(filter(lambda c, d=1: True, []))"), "lambda c, d",
     "cannot evaluate `lambda c, d=1: True` without running the file: ttbuild reads autotune configs statically "
     "(a lambda may take plain positional parameters only)"),
    (kernel_with("list(filter(len, [[triton.Config({'BLOCK': 64})]]))"), "len,",
     "cannot evaluate `len` without running the file"),
    (kernel_with("list(filter(3, [triton.Config({'BLOCK': 64})]))"), "filter(3",
     "only a function of the file or a lambda is called, not 3"),
    (kernel_with("list(map(lambda b: triton.Config({'BLOCK': b}), [64], [4]))"), "map(",
     "`lambda b: triton.Config({'BLOCK': b})` takes 1 arguments, not 2"),
    (kernel_with("list(filter(None))"), "filter(", "`filter(None)` fails: filter expected 2 arguments, got 1"),
    (kernel_with("[triton.Config({'BLOCK': 64}, num_warps=c.num_warps) for c in CONFIGS if c.all_kwargs()]",
                 helpers="CONFIGS = [triton.Config({'BLOCK': 64})]\n"), "c.all_kwargs",
     "cannot evaluate `c.all_kwargs` without running the file"),
]


@pytest.mark.parametrize("src, points_at, says", REFUSALS, ids=[r[2][:40] for r in REFUSALS])
def test_refusals_point_at_the_node(src, points_at, says):
    err = refusal(src)
    assert says in err.message
    assert at(err) == where(src, *(points_at if isinstance(points_at, tuple) else (points_at,)))
    assert err.loc.file == "k.py" and str(err).startswith(f"k.py:{err.loc.line}:{err.loc.col + 1}: error:")


def heuristic_kernel(values: str, helpers: str = "", above: str = "") -> str:
    return HEAD + helpers + f'''
{above}@triton.heuristics({values})
@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass
'''


HEURISTIC_REFUSALS = [
    (heuristic_kernel('{"BLOCK": lambda args: args["x_ptr"].dtype.itemsize * 256}'),
     'args["x_ptr"].dtype.itemsize', "heuristic `BLOCK`: attribute access is not allowed"),
    (heuristic_kernel('{"BLOCK": lambda args: math.ceil(args["n"] / 2)}', helpers="import math\n"),
     "math.ceil", "may not read `math`"),
    (heuristic_kernel('{"BLOCK": lambda args: LIMIT}', helpers="LIMIT = 4\n"), "LIMIT}", "may not read `LIMIT`"),
    (heuristic_kernel('{"BLOCK": lambda meta: args["n"]}'), 'args["n"]', "`args` is not defined here"),
    (heuristic_kernel('{"BLOCK": lambda args: [v for v in (1, 2)]}'), "[v for", "a comprehension is not allowed"),
    (heuristic_kernel('{"n": lambda args: 4}'), '"n"', "sets `n`, which is not a tl.constexpr parameter"),
    (heuristic_kernel('{"BLOCK": lambda args: args["size"]}'), 'args["size"]',
     "reads args['size'], which is not a parameter of kernel"),
    (heuristic_kernel('{"BLOCK": lambda args: 64 if args["EVEN"] else 32, "EVEN": lambda args: args["n"] % 2 == 0}'),
     'args["EVEN"]', "reads args['EVEN'], which a later heuristic computes"),
    (heuristic_kernel('{"BLOCK": lambda args, b=1: 64}'), "lambda args, b", "must take one parameter"),
    (heuristic_kernel('{"BLOCK": pick}', helpers="def pick(args):\n    x = 64\n    return x\n"), "def pick",
     "pick must be a single `return <expression>`"),
    (heuristic_kernel('{"BLOCK": tuned_block}', helpers="tuned_block = None\n"), "tuned_block}",
     "must be a lambda or the name of a function"),
    (heuristic_kernel("dict(BLOCK=lambda args: 4)"), "dict(", "ttbuild reads a dict literal"),
    (heuristic_kernel('{"EVEN": lambda args: args["n"] % args["BLOCK"] == 0}',
                      above='@triton.autotune([triton.Config({"BLOCK": 64})], key=["n"])\n'),
     '"EVEN"', None),  # not a refusal: the heuristic runs after the config is chosen
    (heuristic_kernel('{"EVEN": lambda args: args["n"] % args["BLOCK"] == 0}\n)\n'
                      '@triton.autotune([triton.Config({"BLOCK": 64})], key=["n"]'),
     'args["BLOCK"]', "which the autotune config below sets only after this heuristic runs"),
    (heuristic_kernel('{"BLOCK": lambda args: 32}',
                      above='@triton.autotune([triton.Config({"BLOCK": 64})], key=["n"])\n'),
     ('"BLOCK"', 1), "set both by @triton.heuristics and by the autotune configs"),
]


@pytest.mark.parametrize("src, points_at, says", HEURISTIC_REFUSALS, ids=[str(r[2])[:40] for r in HEURISTIC_REFUSALS])
def test_heuristic_refusals_point_at_the_node(src, points_at, says):
    if says is None:
        assert read(src).heuristics[0].params == ("BLOCK", "n")
        return
    err = refusal(src)
    assert says in err.message
    assert at(err) == where(src, *(points_at if isinstance(points_at, tuple) else (points_at,)))


def test_missing_kernel_and_syntax_error():
    err = refusal(HEAD + "def helper():\n    pass\n", kernel="kernel")
    assert "kernel 'kernel' is not a function of k.py (functions there: helper)" in err.message
    err = refusal(HEAD + "@triton.autotune(configs=[, key=[])\ndef kernel():\n    pass\n")
    assert "invalid syntax" in err.message and at(err) == (5, 34)


def test_names_bound_after_the_kernel_are_not_seen():
    src = HEAD + textwrap.dedent('''
    @triton.autotune(configs=LATER, key=[])
    @triton.jit
    def kernel(x, B: tl.constexpr):
        pass

    LATER = [triton.Config({"B": 1})]
    ''')
    err = refusal(src)
    assert "name `LATER` is not defined before the kernel" in err.message
    assert at(err) == where(src, "LATER")


# Issue 32 item 1: every operation of the reader is bounded, and refused where it is written.
@pytest.mark.parametrize("configs, points_at, says", [
    ('[triton.Config({"BLOCK": 64 if 0.5 in range(10**15) else 32})]', "0.5 in", "the range scanned by `in`"),
    ('[triton.Config({"BLOCK": 9**9**9**9})]', "9**9**9})", "has more than 4096 bits"),
    ('[triton.Config({"BLOCK": 1 << 10**10})]', "1 << 10", "has more than 4096 bits"),
    ('[triton.Config({"BLOCK": len([0] + [1] * 10**9)})]', "[1] * 10", "more than the 1000000"),
    ('[triton.Config({"BLOCK": 64}) for _ in range(5000)]', "[triton.Config", "5000 configs, more than the 1024"),
])
def test_costly_operations_are_refused_at_the_node(configs, points_at, says):
    src = kernel_with(configs)
    err = refusal(src)
    assert says in err.message
    assert (err.loc.line, err.loc.col) == where(src, points_at)


def test_wrappers_applied_by_call_are_read_as_decorators():
    """Issue 30: `f = triton.jit(f)` then `f = triton.heuristics({...})(f)`, and autotune(...)(jit(g))."""
    src = HEAD + '''
def scale(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


scale = triton.jit(scale)
scale = triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(scale)


def _impl(x_ptr, n, BLOCK: tl.constexpr):
    pass


tuned = triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n"])(
    triton.jit(_impl))
'''
    got = read(src, "scale")
    assert got.autotune is None and [h.name for h in got.heuristics] == ["EVEN"]
    assert got.heuristics[0].params == ("BLOCK", "n")
    tuned = read(src, "tuned")
    assert [c.kwargs for c in tuned.autotune.configs] == [{"BLOCK": 64}, {"BLOCK": 128}]
