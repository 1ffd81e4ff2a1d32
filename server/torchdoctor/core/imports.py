"""Where a fix's new imports go: into the file's import block, where Ruff's isort rules
(``ruff check --select I`` with its default settings) would put them, without moving or
rewriting the file's own imports.

Ruff's order: sections ``from __future__``, standard library (``sys.stdlib_module_names``),
third party, first party, local (relative imports), one blank line between two sections;
within a section the ``import x`` lines, then the ``from x import y`` lines, each sorted by
module (case-insensitively, digits by value); the names of a ``from`` import are sorted
constants first, then classes, then the others. ``from m import a`` and ``from m import b`` are
one statement.

Which section an existing import is in is read from the file's own blocks (the runs of imports
between blank lines): the standard library, relative imports and ``__future__`` are known, and so
are common third-party packages (``KNOWN_THIRD_PARTY``); a block of other names is the project's
own (first party) when it comes after a third-party block, or when it is the only such block
(names not known to be third party are taken to come after third party), and third party
when another block of such names follows it. A new import of a module that a block already
imports from (``import torch.distributed as dist`` next to ``from torch import nn``) joins that
block. A new import that is neither standard library nor relative is third party.

When the file's imports are sorted that way (each block one section, in section order, each
sorted, one statement per row), a new import goes to its sorted place in the block of its
section, or into a new block between the sections around it; a name imported ``from`` a
module the block already imports from (one plain ``from m import ...`` of that module) goes
into that statement, at its sorted place when its names are sorted (a parenthesised statement
with one name per row gains a row). When they are not sorted, a new import goes after the last
import of its module or section (else after the last import), and the file's own order stays.
An import the block already has is not added again.

The block is the module's first run of top-level imports (in a notebook, the part of it in the
cell where it starts); imports inside ``try:`` or ``if TYPE_CHECKING:`` are not part of it. A
file without one gets a new block after its docstring, shebang, encoding cookie and leading
comments (a comment right above the first statement stays with it), with a blank line before
the code that follows (two before a ``def`` or ``class``).
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING

from .model import Edit, Pos
from .source import Source

if TYPE_CHECKING:
    from .notebook import Notebook

FUTURE, STDLIB, THIRD_PARTY, FIRST_PARTY, LOCAL = range(5)
_UNKNOWN = -1  # neither the standard library nor a known third-party package
_CODE = 99  # code inserted after the imports: after every import at the same place

_STDLIB = frozenset(sys.stdlib_module_names)
# Third-party packages common in PyTorch code, so that a block of them is known to be third
# party even without another block to compare it with.
KNOWN_THIRD_PARTY = frozenset(
    {
        "PIL",
        "accelerate",
        "albumentations",
        "apex",
        "cv2",
        "datasets",
        "deepspeed",
        "einops",
        "fairscale",
        "functorch",
        "h5py",
        "huggingface_hub",
        "hydra",
        "jax",
        "lightning",
        "matplotlib",
        "numpy",
        "omegaconf",
        "onnx",
        "onnxruntime",
        "pandas",
        "peft",
        "pytest",
        "pytorch_lightning",
        "requests",
        "safetensors",
        "scipy",
        "seaborn",
        "skimage",
        "sklearn",
        "tensorboard",
        "tensorflow",
        "timm",
        "tokenizers",
        "torch",
        "torch_geometric",
        "torchaudio",
        "torchdata",
        "torchmetrics",
        "torchtext",
        "torchvision",
        "tqdm",
        "transformers",
        "triton",
        "wandb",
        "xformers",
        "yaml",
    }
)
LINE_LENGTH = 88  # Ruff's default: a longer ``from`` import is wrapped, one name per row
_NATURAL = re.compile(r"[0-9]+|[^0-9]")
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*[-\w.]+")

Names = tuple[tuple[str, str | None], ...]  # (name, asname) of each alias


# ---------------------------------------------------------------------------- order -------
def _natural(text: str) -> tuple[tuple[int, int], ...]:
    """Ruff's natural order: characters by code point, a run of digits by its value."""
    return tuple(
        (0x30, int(t)) if t[0] in "0123456789" else (ord(t), 0) for t in _NATURAL.findall(text)
    )


def member_key(name: str, asname: str | None) -> tuple[object, ...]:
    """Order of the names of a ``from`` import: constants, classes, then the rest."""
    if len(name) > 1 and name == name.upper() and name != name.lower():
        kind = 0
    elif name[:1].isupper():
        kind = 1
    else:
        kind = 2
    return (
        kind,
        _natural(name.lower()),
        _natural(name),
        asname is not None,
        _natural(asname or ""),
    )


def statement_key(module: str, level: int, names: Names, *, straight: bool) -> tuple[object, ...]:
    """Order of the statements of one section: ``import`` lines, then ``from`` lines."""
    if straight:
        asname = names[0][1]
        return (
            0,
            0,
            _natural(module.lower()),
            _natural(module),
            asname is not None,
            _natural(asname or ""),
        )
    first = min(member_key(n, a) for n, a in names)
    return (1, -level, _natural(module.lower()), _natural(module), first)


def _section(module: str, level: int) -> int:
    if level:
        return LOCAL
    if module == "__future__":
        return FUTURE
    top = module.split(".")[0]
    if top in _STDLIB:
        return STDLIB
    return THIRD_PARTY if top in KNOWN_THIRD_PARTY else _UNKNOWN


# ------------------------------------------------------------------------- statements -----
@dataclass
class _New:
    """One import statement to add (``from`` names of one module are gathered in one)."""

    module: str
    level: int
    names: list[tuple[str, str | None]]
    straight: bool

    @property
    def top(self) -> str | None:
        return None if self.level else self.module.split(".")[0]

    @property
    def section(self) -> int:
        found = _section(self.module, self.level)
        return THIRD_PARTY if found == _UNKNOWN else found

    def key(self) -> tuple[object, ...]:
        return statement_key(self.module, self.level, tuple(self.names), straight=self.straight)

    def text(self) -> str:
        if self.straight:
            name, asname = self.names[0]
            return f"import {name}" + (f" as {asname}" if asname else "")
        names = sorted(self.names, key=lambda na: member_key(*na))
        listed = ", ".join(n + (f" as {a}" if a else "") for n, a in names)
        return f"from {'.' * self.level}{self.module} import {listed}"


@dataclass
class _Old:
    """One import statement of the block."""

    node: ast.Import | ast.ImportFrom
    first: int  # first row, with the comment rows right above it
    last: int
    own_rows: bool  # nothing else on its rows

    @property
    def straight(self) -> bool:
        return isinstance(self.node, ast.Import)

    @property
    def module(self) -> str:
        if isinstance(self.node, ast.Import):
            return self.node.names[0].name
        return self.node.module or ""

    @property
    def level(self) -> int:
        return 0 if isinstance(self.node, ast.Import) else self.node.level

    @property
    def tops(self) -> set[str]:
        if isinstance(self.node, ast.Import):
            return {a.name.split(".")[0] for a in self.node.names}
        return set() if self.node.level else {(self.node.module or "").split(".")[0]}

    @property
    def section(self) -> int:
        return _section(self.module, self.level)

    def names(self) -> Names:
        return tuple((a.name, a.asname) for a in self.node.names)

    def key(self) -> tuple[object, ...]:
        return statement_key(self.module, self.level, self.names(), straight=self.straight)

    def has(self, new: _New, name: str, asname: str | None) -> bool:
        """Whether this statement already imports ``name`` as ``new`` would."""
        if new.straight != self.straight:
            return False
        if isinstance(self.node, ast.Import):
            return any(a.name == name and a.asname == asname for a in self.node.names)
        return (
            (self.node.module or "") == new.module
            and self.node.level == new.level
            and any(a.name == name and a.asname == asname for a in self.node.names)
        )


@dataclass
class _Block:
    stmts: list[_Old]
    rank: int = _UNKNOWN
    sorted: bool = True


# ------------------------------------------------------------------------- the plan -------
@dataclass
class _Plan:
    """Texts to insert, by place: ``("at", row)`` (start of the row) or ``("after", row)`` (end
    of a row with no line break after it in its file or cell), each with an order key."""

    source: Source
    notebook: Notebook | None
    pieces: dict[tuple[str, int], list[tuple[tuple[object, ...], str]]] = field(
        default_factory=dict
    )
    edits: list[Edit] = field(default_factory=list)

    def add(self, place: tuple[str, int], order: tuple[object, ...], text: str) -> None:
        self.pieces.setdefault(place, []).append((order, text))

    def after_row(self, row: int) -> tuple[str, int]:
        """The place right after ``row``: the start of the next row when that row is in the
        same file or cell."""
        line = self.source.line(row)
        if line.endswith(("\n", "\r")) and _same_cell(self.notebook, row, row + 1):
            return ("at", row + 1)
        return ("after", row)

    def result(self) -> list[Edit]:
        """The edits, one per place (texts at one place joined in order)."""
        nl = self.source.newline
        out = list(self.edits)
        for (how, row), texts in self.pieces.items():
            text = "".join(t for _o, t in sorted(texts, key=lambda ot: ot[0]))
            if how == "at":
                out.append(Edit(Pos(row, 0), Pos(row, 0), text))
            else:
                col = len(self.source.line(row).rstrip("\r\n"))
                text = text[: -len(nl)] if text.endswith(nl) else text
                out.append(Edit(Pos(row, col), Pos(row, col), nl + text))
        merged: list[Edit] = []
        for edit in sorted(out, key=lambda e: (e.start, e.end)):
            if merged and merged[-1].start == merged[-1].end == edit.start == edit.end:
                merged[-1] = Edit(edit.start, edit.end, merged[-1].content + edit.content)
            else:
                merged.append(edit)
        return merged


def _same_cell(notebook: Notebook | None, a: int, b: int) -> bool:
    if notebook is None:
        return True
    cell = notebook.cell_at(a)
    return cell is not None and cell is notebook.cell_at(b)


def _requests(lines: Sequence[str]) -> list[_New]:
    """The statements to add: one per ``import`` name, ``from`` names of one module (without
    ``as``) gathered, each name once."""
    out: list[_New] = []
    seen: set[tuple[object, ...]] = set()
    for line in lines:
        for node in ast.parse(line.strip()).body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if ("i", a.name, a.asname) not in seen:
                        seen.add(("i", a.name, a.asname))
                        out.append(_New(a.name, 0, [(a.name, a.asname)], True))
            elif isinstance(node, ast.ImportFrom):
                module, level = node.module or "", node.level
                for a in node.names:
                    if ("f", module, level, a.name, a.asname) in seen:
                        continue
                    seen.add(("f", module, level, a.name, a.asname))
                    same = next(
                        (
                            n
                            for n in out
                            if not n.straight
                            and n.module == module
                            and n.level == level
                            and a.asname is None
                            and all(x is None for _, x in n.names)
                        ),
                        None,
                    )
                    if same is not None:
                        same.names.append((a.name, a.asname))
                    else:
                        out.append(_New(module, level, [(a.name, a.asname)], False))
            else:
                raise ValueError(f"not an import: {line!r}")
    return out


def _is_comment(source: Source, row: int) -> bool:
    return source.line(row).lstrip().startswith("#")


def _is_blank(source: Source, row: int) -> bool:
    return not source.line(row).strip()


def _old_statements(source: Source, run: Sequence[ast.Import | ast.ImportFrom]) -> list[_Block]:
    blocks: list[_Block] = []
    prev_last = 0
    for node in run:
        first = node.lineno
        between = range(prev_last + 1, node.lineno)
        if prev_last:
            while first - 1 > prev_last and _is_comment(source, first - 1):
                first -= 1
        start = source.start(node)
        end = source.end(node)
        rest = source.line(end.row)[end.col :].strip()
        own = source.line(start.row)[: start.col].strip() == "" and (
            rest == "" or rest.startswith("#")
        )
        if prev_last and node.lineno == prev_last:
            own = False  # `import a; import b`
            if blocks and blocks[-1].stmts:
                blocks[-1].stmts[-1].own_rows = False
        old = _Old(node, first, node.end_lineno or node.lineno, own)
        if not blocks or any(_is_blank(source, r) for r in between):
            blocks.append(_Block([old]))
        else:
            blocks[-1].stmts.append(old)
        prev_last = old.last
    return blocks


def _rank_blocks(blocks: list[_Block]) -> bool:
    """Give each block its section; whether the blocks are sorted as Ruff sorts them."""
    clean = True
    unknown: list[_Block] = []
    for block in blocks:
        sections = {s.section for s in block.stmts}
        if sections <= {THIRD_PARTY, _UNKNOWN}:
            block.rank = THIRD_PARTY if THIRD_PARTY in sections else _UNKNOWN
        elif len(sections) == 1:
            block.rank = sections.pop()
        else:
            block.rank = _UNKNOWN
            clean = False
        if block.rank == _UNKNOWN and clean:
            unknown.append(block)
        keys = [s.key() for s in block.stmts]
        block.sorted = all(
            s.own_rows and (not s.straight or len(s.node.names) == 1) for s in block.stmts
        ) and all(a <= b for a, b in pairwise(keys))
        clean = clean and block.sorted
    if not clean:
        return False
    third = [i for i, b in enumerate(blocks) if b.rank == THIRD_PARTY]
    for block in unknown:
        index = blocks.index(block)
        if third:
            block.rank = FIRST_PARTY if index > third[0] else THIRD_PARTY
        elif len(unknown) > 1 and block is unknown[0]:
            block.rank = THIRD_PARTY
        else:
            block.rank = FIRST_PARTY
    ranks = [b.rank for b in blocks]
    return all(a < b for a, b in pairwise(ranks))


def _merge(plan: _Plan, old: _Old, names: list[str]) -> None:
    """Add ``names`` to the ``from m import ...`` statement ``old``: at their sorted places when
    its names are sorted, else after them; a row each when it has one name per row."""
    source, nl = plan.source, plan.source.newline
    node = old.node
    assert isinstance(node, ast.ImportFrom)
    aliases = list(node.names)
    keys = [member_key(a.name, a.asname) for a in aliases]
    in_order = all(a <= b for a, b in pairwise(keys))
    rows = [a.lineno for a in aliases]
    one_per_row = (
        (node.end_lineno or node.lineno) > node.lineno
        and len(set(rows)) == len(rows)
        and all(source.line(a.lineno)[: source.start(a).col].strip() == "" for a in aliases)
    )
    at: dict[int, list[str]] = {}
    for name in sorted(names, key=lambda n: member_key(n, None)):
        key = member_key(name, None)
        index = len(keys)
        if in_order:
            index = next((i for i, k in enumerate(keys) if k > key), len(keys))
        at.setdefault(index, []).append(name)
    start, end = source.start(node), source.end(node)
    row = source.line(start.row).rstrip("\r\n")
    added_width = sum(len(n) + 2 for n in names)
    if start.row == end.row and not row[end.col :].strip() and len(row) + added_width > LINE_LENGTH:
        # Too long for one row: Ruff wraps it, one name per row.
        listed: list[str] = []
        for i, alias in enumerate([*aliases, None]):
            listed.extend(at.get(i, ()))
            if alias is not None:
                listed.append(alias.name)
        indent = source.indent_of(start.row)
        module = "." * node.level + (node.module or "")
        text = f"from {module} import ({nl}"
        text += "".join(f"{indent}    {n},{nl}" for n in listed) + f"{indent})"
        plan.edits.append(Edit(start, end, text))
        return
    for index, added in at.items():
        if index < len(aliases):
            alias = aliases[index]
            if one_per_row:
                indent = source.indent_of(alias.lineno)
                pos = Pos(alias.lineno, 0)
                plan.edits.append(Edit(pos, pos, "".join(f"{indent}{n},{nl}" for n in added)))
            else:
                pos = source.start(alias)
                plan.edits.append(Edit(pos, pos, "".join(f"{n}, " for n in added)))
            continue
        last = aliases[-1]
        end = source.end(last)
        after = source.line(end.row)[end.col :].strip()
        indent = source.indent_of(last.lineno)
        if one_per_row and after.startswith(",") and after[1:].strip()[:1] in ("", "#"):
            pos = Pos(end.row + 1, 0)
            plan.edits.append(Edit(pos, pos, "".join(f"{indent}{n},{nl}" for n in added)))
        elif one_per_row:
            plan.edits.append(Edit(end, end, "".join(f",{nl}{indent}{n}" for n in added)))
        else:
            plan.edits.append(Edit(end, end, "".join(f", {n}" for n in added)))


def _docstring(tree: ast.Module) -> ast.stmt | None:
    first = tree.body[0] if tree.body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first
    return None


def _top_place(plan: _Plan, tree: ast.Module) -> tuple[tuple[str, int], str, int]:
    """Where a new block goes in a module without imports: (place, text before it, blank rows
    after it)."""
    source, nl = plan.source, plan.source.newline
    doc = _docstring(tree)
    rest = tree.body[1:] if doc is not None else tree.body
    if not rest:
        if doc is None:
            return ("at", 1), "", 0
        return plan.after_row(doc.end_lineno or doc.lineno), nl, 0
    stmt = rest[0]
    row = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
    lowest = (doc.end_lineno or doc.lineno) + 1 if doc is not None else 1
    if plan.notebook is not None:
        cell = plan.notebook.cell_at(row)
        if cell is not None:
            lowest = max(lowest, cell.start_row)
    # The comment rows right above the statement stay with it...
    start = row
    while start > lowest and _is_comment(source, start - 1):
        start -= 1
    # ...but a shebang and an encoding cookie stay first.
    if start == 1 and start < row and plan.notebook is None:
        if source.line(1).startswith("#!"):
            start = 2
        if start <= 2 and start < row and _CODING.match(source.line(start)):
            start += 1
    before = ""
    if (
        start > 1
        and _same_cell(plan.notebook, start - 1, start)
        and not _is_blank(source, start - 1)
    ):
        before = nl
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return ("at", start), before, 2 if isinstance(stmt, defs) else 1


def plan_imports(
    tree: ast.Module,
    source: Source,
    run: Sequence[ast.Import | ast.ImportFrom],
    lines: Sequence[str],
    notebook: Notebook | None = None,
    *,
    code: str | None = None,
    code_after: int | None = None,
) -> list[Edit]:
    """Edits that add the import ``lines`` to the block ``run`` (the module's first run of
    top-level imports, in order; empty when it has none) and ``code`` (rows to run right after
    the imports) after row ``code_after``, or after the new block when ``run`` is empty.
    Placement as the module's docstring says."""
    plan = _Plan(source, notebook)
    nl = source.newline
    if notebook is not None and run:
        cell = notebook.cell_at(run[0].lineno)
        run = [s for s in run if notebook.cell_at(s.lineno) is cell]
    blocks = _old_statements(source, run)
    olds = [s for b in blocks for s in b.stmts]

    todo: list[_New] = []  # what the block does not import yet
    for new in _requests(lines):
        names = [(n, a) for n, a in new.names if not any(o.has(new, n, a) for o in olds)]
        if names:
            new.names = names
            todo.append(new)

    if not olds:
        if not todo and code is None:
            return []
        place, before, blanks = _top_place(plan, tree)
        groups: dict[int, list[_New]] = {}
        for new in todo:
            groups.setdefault(new.section, []).append(new)
        text = nl.join(
            "".join(n.text() + nl for n in sorted(group, key=_New.key))
            for _rank, group in sorted(groups.items())
        )
        if code is not None:
            text += (nl if text else "") + code + nl
        plan.add(place, (0,), before + text + nl * blanks)
        return plan.result()

    clean = _rank_blocks(blocks)
    fresh: dict[tuple[tuple[str, int], int, bool], list[_New]] = {}  # new blocks
    for new in todo:
        rank = new.section
        # A name from a module the block imports with one plain `from`: into that statement.
        if not new.straight and all(a is None for _n, a in new.names):
            same = [
                o
                for o in olds
                if not o.straight
                and o.module == new.module
                and o.level == new.level
                and o.own_rows
                and all(a.asname is None and a.name != "*" for a in o.node.names)
            ]
            if len(same) == 1:
                _merge(plan, same[0], [n for n, _a in new.names])
                continue
        key = new.key()
        text = new.text() + nl
        if clean:
            top = new.top
            block = next((b for b in blocks if top and any(top in o.tops for o in b.stmts)), None)
            if block is None:
                block = next((b for b in blocks if b.rank == rank), None)
            if block is not None:
                later = next((o for o in block.stmts if o.key() > key), None)
                if later is not None:
                    plan.add(("at", later.first), (block.rank, key), text)
                else:
                    plan.add(plan.after_row(block.stmts[-1].last), (block.rank, key), text)
                continue
            lower = [b for b in blocks if b.rank < rank]
            if lower:
                where = (plan.after_row(lower[-1].stmts[-1].last), rank, False)
            else:
                where = (("at", blocks[0].stmts[0].first), rank, True)
            fresh.setdefault(where, []).append(new)
            continue
        # Not sorted: after the last import of its module, else of its section, else last.
        anchor = next((o for o in reversed(olds) if new.top and new.top in o.tops), None)
        if anchor is None:
            wanted = {rank, _UNKNOWN} if rank == THIRD_PARTY else {rank}
            anchor = next((o for o in reversed(olds) if o.section in wanted), olds[-1])
        plan.add(plan.after_row(anchor.last), (rank, key), text)
    for (place, rank, first), group in fresh.items():
        lines_text = "".join(n.text() + nl for n in sorted(group, key=_New.key))
        plan.add(place, (rank,), lines_text + nl if first else nl + lines_text)
    if code is not None and code_after is not None:
        plan.add(plan.after_row(code_after), (_CODE,), nl + code + nl)
    return plan.result()
