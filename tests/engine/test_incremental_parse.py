"""``IncrementalParser`` builds the same tree as a whole parse, whatever the edit."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from torchdoctor.core import incremental
from torchdoctor.core.incremental import IncrementalParser, parse_text
from torchdoctor.core.semantic import Semantic
from torchdoctor.linter.runner import Superseded, check_text

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


def facts(sem: Semantic) -> dict[str, object]:
    """Everything the walk collects, with nodes compared by identity."""

    def ids(nodes: object) -> list[int]:
        return [id(n) for n in nodes]  # type: ignore[attr-defined]

    def binding(b: object) -> tuple[object, ...]:
        return tuple(
            id(v) if isinstance(v, ast.AST) else v
            for v in (b.node, b.how, b.scope, b.value, b.index, b.qualname)  # type: ignore[attr-defined]
        )

    return {
        "order": ids(sem.order),
        "parents": sorted((id(k), id(v)) for k, v in sem.parents.items()),
        "scopes": [
            (
                id(node),
                id(scope.parent.node) if scope.parent else None,
                sorted(scope.global_names),
                {name: [binding(b) for b in bs] for name, bs in scope.bindings.items() if bs},
            )
            for node, scope in sem.scopes.items()
        ],
        "lists": [ids(getattr(sem, name)) for name in ("calls", "withs", "assigns", "functions")],
        "imports": [(id(n), id(a), q) for n, a, q in sem.imports],
        "indexes": [
            {key: ids(values) for key, values in getattr(sem, name).items()}
            for name in ("calls_by_attr", "calls_by_name", "attributes", "names")
        ],
        "self_attrs": {(id(c), a): ids(v) for (c, a), v in sem.self_attr_values.items()},
        "loops": ids(sem.loops),
        "name_scopes": sorted((id(k), id(v.node)) for k, v in sem.name_scopes.items()),
        "walks": [
            ids(sem.walk(node, into_functions=deep))
            for node in sem.order[::5]
            for deep in (False, True)
        ],
    }


def findings(text: str, parser: IncrementalParser | None = None) -> list[tuple[object, ...]]:
    result = check_text(text, "train.py", parser=parser)
    return [(f.code, f.range, f.message.en, f.fixes) for f in result.findings]


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
        with parser.session(text, path.name) as parsed:
            tree, error = parsed.tree, parsed.error
            if whole is None:
                assert tree is None and error is not None and whole_error is not None
                assert (error.reason, error.row) == (whole_error.reason, whole_error.row)
            else:
                assert tree is not None, error
                assert dump(tree) == dump(whole)
                assert facts(Semantic.from_chunks(tree, parsed.chunks)) == facts(Semantic(tree))
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
    with parser.session(edited, "a.py") as parsed:
        assert parsed.tree is not None and dump(parsed.tree) == dump(ast.parse(edited))
    assert parser.reused_rows >= text.count("\n") - 8


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_checks_after_edits_find_what_a_fresh_check_finds(path: Path) -> None:
    """Rows added and removed above the findings, statements typed and deleted: the findings
    (places, messages and fixes) equal those of a check from scratch."""
    rng = random.Random(path.name)
    text = path.read_text()
    parser = IncrementalParser()
    assert findings(text, parser) == findings(text)
    for _ in range(25):
        lines = text.splitlines(keepends=True)
        row = rng.randrange(len(lines) + 1)
        roll = rng.random()
        if roll < 0.4:
            lines[row:row] = ["\n"] * rng.randrange(1, 3)
        elif roll < 0.7 and row < len(lines) and not lines[row].strip():
            del lines[row]
        else:
            lines[row:row] = ["x = torch.load('a.pt')\n"]
        candidate = "".join(lines)
        if parse_text(candidate, "train.py")[0] is None:
            continue
        text = candidate
        assert findings(text, parser) == findings(text)
    assert findings(text, parser)


def test_a_stopped_check_leaves_its_parse_for_the_next() -> None:
    head = "import torch\n\n\n"
    text = head + "".join(f"def f{i}(x):\n    return torch.load(x)\n\n\n" for i in range(50))
    parser = IncrementalParser()
    check_text(text, "a.py", parser=parser)
    edited = text.replace("def f10(x):", "def f10(y):")
    with pytest.raises(Superseded):
        check_text(edited, "a.py", parser=parser, stop=lambda: True)
    again = edited.replace("def f20(x):", "def f20(y):")
    assert findings(again, parser) == findings(again)
    assert parser.reused_rows >= again.count("\n") - 8


# Rows that start at column 0 yet end no statement, or lie inside one: where a piece cannot end.
TRAPS = (
    'doc = """\ndef inside():\n    pass\nclass Inside:\n"""\n'
    "values = [\n1,\n2,\n]\n"
    "if values:\n    pass\nelse:\n    pass\n"
    "try:\n    pass\nexcept OSError:\n    pass\nfinally:\n    pass\n"
    "@decorator\n\ndef decorated():\n    pass\n"
    "total = 1 + \\\n2\n"
    "\f\nx = 1; y = 2\n"
)


def long_text(body: str) -> str:
    """``body`` repeated until the text is parsed in pieces."""
    copies = -(-incremental.PIECES_FROM // max(len(body), 1)) + 1
    return body * copies


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_long_text_parsed_in_pieces_gives_the_whole_parse(path: Path) -> None:
    text = long_text(path.read_text() + "\n" + TRAPS)
    tree, error = parse_text(text, path.name)
    assert error is None and tree is not None
    assert dump(tree) == dump(ast.parse(text))
    assert incremental._parse_in_pieces(text, path.name) is not None  # in pieces indeed
    empty = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and not n.keywords]
    assert empty and all(call.keywords is incremental.NO_ITEMS for call in empty)
    with pytest.raises(TypeError):
        empty[0].keywords.append(ast.keyword("x", ast.Constant(1)))


def test_future_imports_in_a_long_text() -> None:
    body = "x = 1 if a else 2\nprint(x)\n"
    annotations = long_text("from __future__ import annotations\n" + body)
    assert incremental._parse_in_pieces(annotations, "a.py") is not None
    tree, _error = parse_text(annotations, "a.py")
    assert tree is not None and dump(tree) == dump(ast.parse(annotations))
    barry = "from __future__ import barry_as_FLUFL\n" + long_text("y = 1 != 2\n" + body)
    assert incremental._parse_in_pieces(barry, "a.py") is None  # it may change how `<>` parses
    tree, _error = parse_text(barry, "a.py")
    assert tree is not None and dump(tree) == dump(ast.parse(barry))


@pytest.mark.parametrize("path", FILES[:4], ids=lambda p: p.name)
def test_broken_long_texts_fail_as_a_whole_parse_would(path: Path) -> None:
    rng = random.Random(path.name)
    original = long_text(path.read_text())
    for _ in range(6):
        text = original
        for _ in range(3):
            text = edit(rng, text)
        tree, error = parse_text(text, path.name)
        try:
            whole = ast.parse(text)
        except SyntaxError as exc:
            assert tree is None and error is not None
            assert (error.reason, error.row) == (f"syntax error: {exc.msg}", exc.lineno)
        else:
            assert tree is not None and dump(tree) == dump(whole)
