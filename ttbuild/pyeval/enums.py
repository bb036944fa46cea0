"""Enum classes of a project module (`class Tier(Enum): LARGE = 232448`) as a static read sees them; standard library only.

Members with their name and value, `Cls[name]`, `Cls(value)`, class and static methods run in
the bounded evaluator."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ttbuild.errors import CompilationError

from .objects import External
from .values import Function

ENUM_BASES = frozenset({"enum.Enum", "enum.IntEnum", "enum.StrEnum"})


@dataclass(frozen=True, eq=False)
class Member:
    """One member of an EnumClass: `name` and `value` (compared by identity, as Python's members are)."""

    owner: str
    name: str
    value: object


@dataclass(frozen=True, eq=False)
class BoundMethod:
    """A class or static method of an EnumClass read as an attribute: `first` is the class for a classmethod,
    None for a staticmethod."""

    fn: Function
    first: object = None


@dataclass(eq=False)
class EnumClass:
    """A subclass of enum.Enum whose body is members (`NAME = <value>`), a docstring and class / static methods."""

    name: str
    members: dict = field(default_factory=dict)
    methods: dict = field(default_factory=dict)  # name -> (FunctionDef, "classmethod" | "staticmethod")

    def attribute(self, attr: str):
        """`Cls.attr`: a member or a bound class / static method; None when the class has neither."""
        if attr in self.members:
            return self.members[attr]
        if attr in self.methods:
            fn, kind = self.methods[attr]
            return BoundMethod(Function(fn), self if kind == "classmethod" else None)
        return None

    def by_value(self, value):
        """`Cls(value)`: the member holding `value`; None when none does (Python's ValueError)."""
        return next((m for m in self.members.values() if type(m.value) is type(value) and m.value == value), None)


def enum_class(ex, stmt: ast.ClassDef) -> EnumClass | None:
    """The EnumClass a class statement makes, its member values evaluated by `ex` (the module's executor), or None
    for another class or a body with anything else (instance methods, nested classes...)."""
    if len(stmt.bases) != 1 or stmt.keywords or stmt.decorator_list:
        return None
    try:
        base = ex.eval(stmt.bases[0], None)
        if not (isinstance(base, External) and base.path in ENUM_BASES):
            return None
        cls = EnumClass(stmt.name)
        for s in stmt.body:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                name = s.targets[0].id
                cls.members[name] = Member(stmt.name, name, ex.eval(s.value, None))
                continue
            kinds = [ast.unparse(d) for d in s.decorator_list] if isinstance(s, ast.FunctionDef) else []
            if kinds not in (["classmethod"], ["staticmethod"]):
                return None
            ex.project.home[s] = ex.mod
            cls.methods[s.name] = (s, kinds[0])
    except CompilationError:
        return None
    return cls
