"""``IncrementalParser`` builds the same tree as a whole parse, whatever the edit."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from torchdoctor.engine.incremental import IncrementalParser, parse_text

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "examples").glob("*.py"))
# Pieces of code typed at random places: some keep the code valid, others break it (open
# brackets and strings, stray indents, continuations, `__future__` imports in the middle).
PIECES = [
    "1",
    "x",
    "\n",
    "\n\n",
    "    ",
    "(",
    ")",
    "'",
    '"""',
    "#",
    "def f():\n    pass\n",
    "\nclass A:\n",
    "\\\n",
    "y = 2\n",
    "@dec\n",
    "; q = 1",
    "\n    z = 3\n",
    "from __future__ import annotations\n",
    "\r\n",
]


def dump(tree: ast.AST) -> str:
    return ast.dump(tree, include_attributes=True)


def edit(rng: random.Random, text: str) -> str:
    pos = rng.randrange(len(text) + 1)
    roll = rng.random()
    if roll < 0.5:
        return text[:pos] + rng.choice(PIECES) + text[pos:]
    if roll < 0.8:
        return text[:pos] + text[pos + rng.randrange(1, 40) :]
    lines = text.splitlines(keepends=True)  # move a few rows elsewhere
    start = rng.randrange(len(lines))
    block = lines[start : start + rng.randrange(1, 5)]
    del lines[start : start + len(block)]
    where = rng.randrange(len(lines) + 1)
    lines[where:where] = block
    return "".join(lines)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_random_edits_parse_as_a_whole_parse_would(path: Path) -> None:
    rng = random.Random(path.name)
    original = path.read_text()
    text = original
    parser = IncrementalParser()
    reused = 0
    for _ in range(120):
        text = edit(rng, text)
        whole, whole_error = parse_text(text, path.name)
        with parser.session(text, path.name) as (tree, error):
            if whole is None:
                assert tree is None and error is not None and whole_error is not None
                assert (error.reason, error.row) == (whole_error.reason, whole_error.row)
            else:
                assert tree is not None, error
                assert dump(tree) == dump(whole)
                reused += parser.reused_rows > 0
        if whole is None and rng.random() < 0.5:
            text = original  # back to valid code, so that most edits build on a good parse
    assert reused > 10  # the parses above did reuse unchanged statements


def test_typing_inside_a_function_reparses_only_that_function() -> None:
    head = "import torch\n\n\n"
    funcs = [f"def f{i}(x):\n    return torch.load(x)\n\n\n" for i in range(50)]
    text = head + "".join(funcs)
    parser = IncrementalParser()
    with parser.session(text, "a.py"):
        pass
    edited = text.replace("def f25(x):", "def f25(xy):")
    with parser.session(edited, "a.py") as (tree, _error):
        assert tree is not None and dump(tree) == dump(ast.parse(edited))
    assert parser.reused_rows >= text.count("\n") - 8
