"""Move the Chinese text of rules still written in the module (``zh = \"\"\"...\"\"\"`` in the rule
class) to ``server/torchdoctor/rules/zh/TDRnnn.md``, each code block that repeats the English one
replaced by its placeholder ``{code:N}``, and remove it from the module.

    python scripts/move_translations.py            # every rule that still has one
    python scripts/move_translations.py TDR999     # these rules

A code block whose comments are translated is kept written out. The script checks that the file
gives back the same text before it changes anything; run ``ruff format`` and the translation tests
afterwards (``pytest tests/rules/test_translations.py``).
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from torchdoctor.linter.registry import all_rules  # noqa: E402
from torchdoctor.rules.base import Rule  # noqa: E402
from torchdoctor.rules.docs import code_blocks, fill_code, translation_path  # noqa: E402


def markdown(rule: type[Rule]) -> str:
    """The translation file's text: the inline text with repeated code blocks as placeholders."""
    english = inspect.cleandoc(rule.__doc__ or "")
    chinese = inspect.cleandoc(vars(rule)["zh"])
    en_lines, zh_lines = english.split("\n"), chinese.split("\n")
    en_blocks = [en_lines[a:b] for a, b in code_blocks(english)]
    out = list(zh_lines)
    # From the last block, so that earlier line numbers stay valid.
    for k, (a, b) in reversed(list(enumerate(code_blocks(chinese)))):
        if k < len(en_blocks) and zh_lines[a:b] == en_blocks[k]:
            out[a:b] = [f"{{code:{k + 1}}}"]
    text = "\n".join(out)
    if fill_code(text, english) != chinese:
        raise SystemExit(f"{rule.code}: the placeholders do not give back the same text")
    return text + "\n"


def remove_assignment(rule: type[Rule]) -> None:
    """Delete ``zh = ...`` from the rule's class, with one of the blank lines around it."""
    path = Path(inspect.getfile(rule))
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == rule.__name__)
    node = next(
        n
        for n in cls.body
        if isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "zh" for t in n.targets)
    )
    lines = source.splitlines(keepends=True)
    start, end = node.lineno - 1, node.end_lineno or node.lineno
    if start > 0 and not lines[start - 1].strip() and end < len(lines) and not lines[end].strip():
        end += 1
    path.write_text("".join(lines[:start] + lines[end:]), encoding="utf-8")


def main(codes: list[str]) -> int:
    wanted = {c.upper() for c in codes}
    rules = [r for r in all_rules() if "zh" in vars(r) and (not wanted or r.code in wanted)]
    for rule in rules:
        target = translation_path(rule.code)
        if target.exists():
            print(f"{rule.code}: {target} exists; left as it is", file=sys.stderr)
            continue
        text = markdown(rule)
        target.parent.mkdir(exist_ok=True)
        target.write_text(text, encoding="utf-8")
        remove_assignment(rule)
        kept = text.count("```") // 2
        print(
            f"{rule.code}: {target.relative_to(ROOT)}"
            + (f" ({kept} translated block(s))" if kept else "")
        )
    if not rules:
        print("no rule holds its Chinese text in its module")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
