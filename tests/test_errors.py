"""Every error ttbuild raises on purpose is a `ttbuild.errors.TTBuildError`, and the modules the runtime shares stay stdlib-only."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ttbuild.errors import TTBuildError


def _classes():
    from ttbuild.cache.base import CacheError
    from ttbuild.errors import CompilationError, NotSupportedYet, ToolError
    from ttbuild.graph.meta import MetaError
    from ttbuild.graph.variants import VariantError
    from ttbuild.options import OptionError
    from ttbuild.runtime.driver import CudaError
    from ttbuild.runtime.launch import LaunchError
    from ttbuild.runtime.metadata import MetadataError
    from ttbuild.runtime.select import NoMatchingVariant
    from ttbuild.signature import SignatureError
    from ttbuild.target import TargetError

    return [CacheError, CompilationError, NotSupportedYet, ToolError, MetaError, VariantError, OptionError,
            CudaError, LaunchError, MetadataError, NoMatchingVariant, SignatureError, TargetError]


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_deliberate_errors_are_ttbuild_errors(cls):
    assert issubclass(cls, TTBuildError)


def test_value_errors_stay_value_errors():
    # Callers that caught ValueError from the parsers keep working.
    from ttbuild.options import Options
    from ttbuild.signature import parse_signature
    from ttbuild.target import Target

    for call in (lambda: parse_signature("*fp33"), lambda: Target.parse("hip:90"), lambda: Options(num_warps=3)):
        with pytest.raises(ValueError) as info:
            call()
        assert isinstance(info.value, TTBuildError)


def test_shared_fact_modules_import_only_the_standard_library():
    code = ("import sys; before = set(sys.modules); "
            "import ttbuild.errors, ttbuild.target, ttbuild.options, ttbuild.signature, ttbuild.canonical, ttbuild.irattrs; "
            "new = sorted(m for m in set(sys.modules) - before if m.split('.')[0] not in sys.stdlib_module_names "
            "and m.split('.')[0] != 'ttbuild'); print(','.join(new))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
