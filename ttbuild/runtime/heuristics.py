"""`@triton.heuristics` at launch: the checked, bounded expression grammar of ttbuild.pyeval.heuristics (standard library only, shared with the build's decorator reader)."""

from ttbuild.pyeval.heuristics import (
                                       HELPERS,
                                       HeuristicError,
                                       cdiv,
                                       check_expression,
                                       check_node,
                                       compile_expression,
                                       is_boolean,
                                       next_power_of_2,
)

__all__ = ["HeuristicError", "HELPERS", "check_expression", "check_node", "compile_expression", "is_boolean",
           "next_power_of_2", "cdiv"]
