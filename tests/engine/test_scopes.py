"""Names in a def's or class's header are looked up where Python evaluates them: in the
enclosing scope, not in the def's or class's own."""

from __future__ import annotations

import ast

from torchdoctor.core.semantic import Semantic

SOURCE = """\
import torch as T

def outer(T):
    @T.no_grad()
    def inner(x: T.Tensor, T=T) -> T.Tensor:
        return T
    class Net(T.nn.Module, metaclass=T.Meta):
        T = 1
        y = T
    return inner
"""


def bindings() -> dict[tuple[int, int], str]:
    """(row, column) of each read of ``T`` -> how the binding it refers to was made."""
    tree = ast.parse(SOURCE)
    sem = Semantic(tree)
    out = {}
    for name in sem.names["T"]:
        binding = sem.lookup("T", name)
        assert binding is not None
        out[(name.lineno, name.col_offset)] = f"{binding.how}@{binding.node.lineno}"
    return out


def test_header_names_resolve_in_the_enclosing_scope() -> None:
    found = bindings()
    param_of_outer = "param@3"
    assert found[(4, 5)] == param_of_outer  # decorator
    assert found[(5, 17)] == param_of_outer  # parameter annotation
    assert found[(5, 29)] == param_of_outer  # default value
    assert found[(5, 35)] == param_of_outer  # return annotation
    assert found[(6, 15)] == "param@5"  # the body reads inner's own parameter
    assert found[(7, 14)] == param_of_outer  # base class
    assert found[(7, 37)] == param_of_outer  # class keyword
    assert found[(9, 12)] == "assign@8"  # the class body reads its own T
