"""Rule tables filled explicitly (ttbuild.registry): every rule module of a package is on its table's one list, a duplicate name raises, a missing name says what is missing, and importing a rule module registers nothing."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

from ttbuild.registry import DuplicateRule, Registry, RuleSet, build


def _rule_modules(package: str) -> set[str]:
    """Modules of `package` that define a module-level RULES (a RuleSet): the rule modules."""
    pkg = importlib.import_module(package)
    out = set()
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"{package}.{info.name}")
        if isinstance(getattr(mod, "RULES", None), RuleSet):
            out.add(mod.__name__)
    return out


@pytest.mark.parametrize("package, table", [("ttbuild.backend.llir", "ttbuild.backend.llir.rules"),
                                            ("ttbuild.frontend", "ttbuild.frontend.builtin_table")])
def test_every_rule_module_is_on_the_explicit_list(package, table):
    listed = {m.__name__ for m in importlib.import_module(table).MODULES}
    found = _rule_modules(package)
    assert found, f"no rule modules found in {package}"
    assert found - listed == set(), f"rule modules missing from {table}.MODULES"
    assert listed - found == set(), f"{table}.MODULES lists modules without RULES"


def test_every_collected_rule_is_in_its_table():
    from ttbuild.backend.llir import rules

    for mod in rules.MODULES:
        for _table, name, fn in mod.RULES:
            assert rules.RULES.lookup(name) is fn
            assert rules.RULES.origin(name) == mod.__name__


def _module(name: str, rules: RuleSet):
    return types.SimpleNamespace(__name__=name, RULES=rules)


def test_duplicate_registration_raises_naming_both_modules():
    a, b = RuleSet(), RuleSet()
    a.rule("tt.load")(lambda: 1)
    b.rule("tt.store", "tt.load")(lambda: 2)
    with pytest.raises(DuplicateRule, match=r"two LLIR rules for 'tt.load': in mod_a and in mod_b"):
        build({"default": Registry("LLIR rule")}, [_module("mod_a", a), _module("mod_b", b)])


def test_lookup_of_a_missing_name_says_what_is_missing():
    reg = Registry("LLIR rule")
    reg.register("tt.load", len)
    assert reg.lookup("tt.load") is len and "tt.load" in reg and reg.get("tt.dot") is None
    with pytest.raises(KeyError, match="no LLIR rule for 'tt.dot'"):
        reg.lookup("tt.dot")


def test_a_rule_set_registers_nothing_until_built():
    rs = RuleSet()
    fn = rs.rule("a", "b", table="method")(lambda: 0)
    assert [(t, n) for t, n, _ in rs] == [("method", "a"), ("method", "b")]
    tables = build({"default": Registry("x"), "method": Registry("y")}, [_module("m", rs)])
    assert len(tables["default"]) == 0 and tables["method"].lookup("b") is fn
