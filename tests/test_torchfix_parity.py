"""TorchFix parity: every fixture under tests/fixtures/torchfix/ gets exactly the findings its
``# expect: CODE`` comments state (through ``engine.runner.check_any``); TorchFix codes work in
``# noqa`` comments and in ``select``/``ignore``; rules follow the target torch version; fixes
never leave code that fails to compile or names something undefined."""

from __future__ import annotations

import ast
import builtins
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchdoctor.core.config import Settings
from torchdoctor.core.torch_version import parse_version
from torchdoctor.linter.registry import ALIASES, all_rules, get_rule, resolve_selector
from torchdoctor.linter.runner import check_any, fix_any

FIXTURES = Path(__file__).parent / "fixtures" / "torchfix"
EXPECT = re.compile(r"#\s*expect:\s*(?P<codes>[A-Z0-9, ]+)")
REGISTERED = frozenset(r.code for r in all_rules())
TORCHFIX_CODES = (
    "TOR001", "TOR002", "TOR003", "TOR004", "TOR101", "TOR102", "TOR103", "TOR104", "TOR105",
    "TOR106", "TOR107", "TOR108", "TOR201", "TOR202", "TOR203", "TOR401", "TOR402",
)  # fmt: skip
# Every rule a TorchFix code maps to: the fixtures are checked with all of them on.
PARITY_CODES = frozenset().union(*(resolve_selector(c) for c in TORCHFIX_CODES))
TDR8 = frozenset(c for c in REGISTERED if c.startswith("TDR8"))


def _expected(text: str) -> set[tuple[int, str]]:
    out = set()
    for row, line in enumerate(text.splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            for code in re.split(r"[\s,]+", match.group("codes").strip()):
                # An expectation is never dropped: a code no rule has is a failure.
                assert code in REGISTERED, f"row {row} expects {code}, which is not registered"
                out.add((row, code))
    return out


FIXTURE_FILES = sorted(FIXTURES.glob("*.py"))


def test_every_torchfix_code_has_a_fixture() -> None:
    names = {p.name.split("_")[0].upper() for p in FIXTURE_FILES}
    assert set(TORCHFIX_CODES) <= names


def test_every_torchfix_code_is_mapped() -> None:
    for code in TORCHFIX_CODES:
        assert code in ALIASES, code
    for code in TORCHFIX_CODES:
        if code != "TOR401":
            assert resolve_selector(code), f"{code} maps to no registered rule"


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[p.name for p in FIXTURE_FILES])
def test_fixture_findings(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    result = check_any(text, str(path), _fixture_settings(text), codes=PARITY_CODES)
    assert not result.errors, result.errors
    got = {(f.range.start.row, f.code) for f in result.findings}
    assert got == _expected(text)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[p.name for p in FIXTURE_FILES])
def test_fixes_compile_and_define_their_names(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    outcome = fix_any(text, str(path), unsafe=True, codes=TDR8)
    assert outcome.error is None, outcome.error
    compile(outcome.text, str(path), "exec")  # no syntax error, no repeated keyword
    before = _loaded_names(text)
    bound = _bound_names(outcome.text) | set(dir(builtins))
    introduced = _loaded_names(outcome.text) - before
    assert introduced <= bound, introduced - bound
    leftover = [f for f in outcome.result.findings if f.code in TDR8 and f.bulk_fix(True)]
    assert leftover == []


def _fixture_settings(text: str) -> Settings | None:
    """A fixture's ``# target-version: X`` line: the torch version it is checked against."""
    for line in text.splitlines():
        if line.startswith("# target-version:"):
            return Settings(target_version=line.split(":", 1)[1].strip())
    return None


def _loaded_names(text: str) -> set[str]:
    return {
        n.id
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _bound_names(text: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                out.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            out.add(node.name)
    return out


def test_fix_imports_torch_when_the_file_has_only_from_imports() -> None:
    code = "from torch import qr\n\nq, r = qr(a)\n"
    outcome = fix_any(code, "m.py", codes=frozenset({"TDR804"}))
    assert outcome.text == "import torch\nfrom torch import qr\n\nq, r = torch.linalg.qr(a)\n"


def test_fix_offers_nothing_when_torch_means_something_else() -> None:
    code = "from torch import qr\n\ntorch = load_plugin()\nq, r = qr(a)\n"
    result = check_any(code, "m.py", codes=frozenset({"TDR804"}))
    assert [f.code for f in result.findings] == ["TDR804"]
    assert result.findings[0].fix is None


# -- noqa and selection with TorchFix codes ---------------------------------------------------
def _codes(code: str, settings: Settings | None = None) -> list[str]:
    result = check_any(code, "m.py", settings, codes=None if settings else PARITY_CODES)
    return sorted(f.code for f in result.findings)


def test_noqa_torchfix_code_silences_the_mapped_rule() -> None:
    assert _codes("import torch\nq = torch.qr(a)\n") == ["TDR804"]
    assert _codes("import torch\nq = torch.qr(a)  # noqa: TOR101\n") == []
    # Another TorchFix code does not silence it.
    assert _codes("import torch\nq = torch.qr(a)  # noqa: TOR001\n") == ["TDR804"]


def test_noqa_torchfix_code_that_maps_to_several_rules() -> None:
    line = 'import torch\nsd = torch.load("m.pt", weights_only=False)'
    assert _codes(line + "\n") == ["TDR602", "TDR603"]
    assert _codes(line + "  # noqa: TOR102\n") == []
    assert _codes(line + "  # noqa: TOR101\n") == ["TDR602", "TDR603"]


def test_noqa_torchfix_prefix() -> None:
    code = "import torch\ny = torch.log(1 + x) * (torch.exp(x) - 1)  # noqa: TOR1\n"
    assert _codes(code) == []
    assert _codes(code.replace("TOR1", "TOR2")) == ["TDR808", "TDR809"]


def test_select_and_ignore_accept_torchfix_codes() -> None:
    assert resolve_selector("TOR101") == {"TDR401", "TDR804", "TDR813"}
    assert resolve_selector("tor102") == {"TDR602", "TDR603"}
    assert resolve_selector("TOR2") == {"TDR810", "TDR811", "TDR812"}
    assert resolve_selector("TOR003") == {"TDR405"} & REGISTERED
    code = "import torch\nq = torch.qr(a)\nsd = torch.load('m.pt')\n"
    assert _codes(code, Settings(select=["TOR101"])) == ["TDR804"]
    assert _codes(code, Settings(select=["TOR1"], ignore=["TOR102"])) == ["TDR804"]
    assert resolve_selector("TOR108") == {"TDR814"} and resolve_selector("TOR402") == {"TDR111"}
    assert get_rule("TOR203") is not None and get_rule("TOR203").code == "TDR812"


def test_select_torchfix_code_in_configuration(tmp_path: Path) -> None:
    from torchdoctor.linter.configuration import load_file
    from torchdoctor.linter.selection import enabled_codes

    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.torchdoctor]\nselect = ["TOR0", "TOR101"]\nignore = ["TOR002"]\n')
    enabled = enabled_codes(load_file(config))
    assert {"TDR801", "TDR803", "TDR804"} <= enabled
    assert "TDR802" not in enabled and "TDR805" not in enabled


# -- target version -----------------------------------------------------------------------------
def test_parse_version() -> None:
    assert parse_version("2.13") == (2, 13)
    assert parse_version("2.13.0+cu128") == (2, 13)
    assert parse_version("torch==1.9.1") == (1, 9)
    assert parse_version("latest") is None


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("1.8", []),  # nothing was deprecated yet
        ("1.10", ["TDR804", "TDR804"]),  # deprecated, not yet removed
        ("1.13", ["TDR801", "TDR804"]),  # torch.solve removed
        ("2.13", ["TDR801", "TDR804"]),
    ],
)
def test_rules_follow_the_target_version(target: str, expected: list[str]) -> None:
    code = "import torch\nx = torch.solve(b, A)\nq = torch.qr(a)\n"
    settings = Settings(target_version=target, select=["TDR8"])
    assert _codes(code, settings) == expected


def test_version_gated_rows() -> None:
    code = "import torch.distributed as dist\ndist.all_gather_into_tensor(out, x)\n"
    assert _codes(code, Settings(target_version="2.12", select=["TDR8"])) == []
    assert _codes(code, Settings(target_version="2.13", select=["TDR8"])) == ["TDR804"]


def test_installed_version_is_read_without_importing_torch() -> None:
    script = (
        "import sys\n"
        "from torchdoctor.core.torch_version import installed_version\n"
        "from torchdoctor.linter.runner import check_text\n"
        "check_text('import torch\\nq = torch.qr(a)\\n', 'm.py')\n"
        "print(installed_version(), 'torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[-1] == "False"
    assert out[0].startswith("(2,")


# -- pre-commit hook ----------------------------------------------------------------------------
def test_pre_commit_hook_replaces_the_flake8_plugin() -> None:
    yaml = pytest.importorskip("yaml")
    hooks = yaml.safe_load((Path(__file__).parents[1] / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "torchdoctor")
    assert hook["entry"] == "torchdoctor check"
    assert set(hook["types_or"]) == {"python", "jupyter"}
    # What pre-commit runs: the entry with the staged files appended; findings fail the hook.
    from torchdoctor.cli.main import main

    fixture = str(FIXTURES / "tor101_deprecated_use.py")
    assert main([*hook["entry"].split()[1:], "--no-cache", fixture]) == 1


# -- checkpoint with **kwargs (TOR003) ----------------------------------------------------------
def test_checkpoint_with_kwargs_is_reported_without_fix_at_lower_severity() -> None:
    from torchdoctor.core.model import Severity

    head = "from torch.utils.checkpoint import checkpoint\n"
    plain = check_any(head + "y = checkpoint(f, x)\n", "m.py", codes=frozenset({"TDR405"}))
    spread = check_any(head + "y = checkpoint(f, x, **kw)\n", "m.py", codes=frozenset({"TDR405"}))
    [p], [s] = plain.findings, spread.findings
    assert p.severity is Severity.WARNING and p.fix is not None
    assert s.severity is Severity.INFO and s.fix is None
    assert "`**kw`" in s.message.en and "`**kw`" in s.message.zh
    # A fix-all leaves the call alone: the dictionary may hold the key already.
    outcome = fix_any(head + "y = checkpoint(f, x, **kw)\n", "m.py", unsafe=True)
    assert outcome.text == head + "y = checkpoint(f, x, **kw)\n"
