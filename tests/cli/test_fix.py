"""``--fix``, ``--unsafe-fixes`` and ``--diff`` through the CLI."""

from __future__ import annotations

import os
from pathlib import Path

LOAD = 'import torch\nstate = torch.load("ckpt.pt", weights_only=True)\n'
FIXED = 'import torch\nstate = torch.load("ckpt.pt", weights_only=True, map_location="cpu")\n'


def test_fix_writes_and_exits_clean(td, tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(LOAD)
    os.chmod(path, 0o640)
    run = td("check", "--fix", "a.py")
    assert run.code == 0, run.out + run.err
    assert "Fixed 1 finding." in run.out
    assert path.read_text() == FIXED
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_fix_subcommand_and_crlf(td, tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(LOAD.replace("\n", "\r\n").encode())
    assert td("fix", "a.py").code == 0
    assert path.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_diff_changes_nothing(td, tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(LOAD)
    run = td("check", "--diff", "a.py")
    assert run.code == 1
    assert (
        '-state = torch.load("ckpt.pt", weights_only=True)\n+state = torch.load("ckpt.pt", weights_only=True, map_location="cpu")'
        in run.out
    )
    assert path.read_text() == LOAD
    assert "Would fix 1 finding." in run.err


# A whole module saved: TDR601's only fix (save `model.state_dict()`) is unsafe (the file then
# holds a dict, and the code that loads it must change), so the file changes with the
# unsafe-fixes setting and only with it.
GENERATOR = """import torch

model = torch.nn.Linear(2, 2)
torch.save(model, "model.pt")
"""
DECORATED = GENERATOR.replace("torch.save(model,", "torch.save(model.state_dict(),")


def test_unsafe_fixes_only_when_asked(td, tmp_path: Path) -> None:
    path = tmp_path / "u.py"
    path.write_text(GENERATOR)
    run = td("check", "--fix", "--no-cache", "u.py")
    assert path.read_text() == GENERATOR, "a safe --fix applied an unsafe fix"
    assert run.code == 1
    assert "(1 hidden fix can be enabled with the `--unsafe-fixes` option.)" in run.out
    run = td("check", "--fix", "--unsafe-fixes", "--no-cache", "u.py")
    assert run.code == 0, run.out + run.err
    assert path.read_text() == DECORATED
    # With the setting in pyproject the unsafe fix applies without the flag...
    path.write_text(GENERATOR)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\nunsafe-fixes = true\n")
    assert td("check", "--fix", "--no-cache", "u.py").code == 0
    assert path.read_text() == DECORATED
    # ...and the setting off in pyproject keeps it out.
    path.write_text(GENERATOR)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\nunsafe-fixes = false\n")
    assert td("check", "--fix", "--no-cache", "u.py").code == 1
    assert path.read_text() == GENERATOR


def test_fix_keeps_unfixable_findings(td, tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(LOAD + "x = torch.load('b', weights_only=True)  # noqa\n")
    run = td("check", "--fix", "a.py")
    assert run.code == 0
    assert path.read_text() == FIXED + "x = torch.load('b', weights_only=True)  # noqa\n"


def test_fix_never_writes_a_broken_file(td, tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    text = "import torch\nx = torch.load('a'\n"
    path.write_text(text)
    run = td("check", "--fix", "broken.py")
    assert path.read_text() == text
    assert "syntax error" in run.err


def test_fix_writes_back_in_the_files_own_encoding(td, tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    head = '# -*- coding: latin-1 -*-\ns = "café"\n'
    path.write_bytes((head + LOAD).encode("latin-1"))
    run = td("check", "--fix", "--no-cache", "latin.py")
    assert run.code == 0, run.out + run.err
    assert path.read_bytes() == (head + FIXED).encode("latin-1")


def test_fix_keeps_a_byte_order_mark(td, tmp_path: Path, notebook) -> None:
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + LOAD.encode())
    assert td("fix", "--no-cache", "bom.py").code == 0
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()
    nb = tmp_path / "n.ipynb"
    nb.write_text(notebook(LOAD))
    assert td("fix", "--no-cache", "n.ipynb").code == 0
    assert not nb.read_bytes().startswith(b"\xef\xbb\xbf")  # no BOM added where none was


def test_fix_through_a_symlink_fixes_its_target(td, tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "a.py"
    target.write_text(LOAD)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    run = td("fix", "--no-cache", "link.py")
    assert run.code == 0, run.out + run.err
    assert link.is_symlink()
    assert target.read_text() == FIXED


def test_a_read_only_file_is_reported_as_not_fixed(td, tmp_path: Path) -> None:
    path = tmp_path / "ro.py"
    path.write_text(LOAD)
    path.chmod(0o444)
    run = td("fix", "--no-cache", "ro.py")
    assert path.read_text() == LOAD
    assert run.code == 1
    assert "ro.py: not written: the file is read-only" in run.err
    assert "Fixed" not in run.out
    assert "TDR602" in run.out  # the finding is still there


def test_thousands_of_fixes_in_one_file_are_all_applied(tmp_path: Path) -> None:
    import subprocess
    import sys

    # The cost of choosing a round's fixes is measured by bench/, not here; this checks that a
    # file with thousands of fixes is fixed completely in one run.
    body = "".join(
        f'def f{i}(model):\n    model.load_state_dict(torch.load("a.pt", weights_only=True))\n\n'
        for i in range(5000)
    )
    path = tmp_path / "big.py"
    path.write_text("import torch\n\n" + body)
    select = ["--select", "TDR602", "big.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "fix", "--no-cache", "--unsafe-fixes", *select],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "TORCHDOCTOR_LOCALE": ""},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Fixed 5000 findings." in proc.stdout
    assert path.read_text().count('map_location="cpu"') == 5000


def test_fix_from_stdin_gives_back_its_own_encoding(tmp_path: Path) -> None:
    import subprocess
    import sys

    def fix(data: bytes) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "torchdoctor", "fix", "--no-cache", "-"],
            cwd=tmp_path,
            input=data,
            capture_output=True,
            env={**os.environ, "TORCHDOCTOR_LOCALE": ""},
            timeout=120,
        )

    head = '# -*- coding: latin-1 -*-\ns = "café"\n'
    assert fix((head + LOAD).encode("latin-1")).stdout == (head + FIXED).encode("latin-1")
    assert fix(b"\xef\xbb\xbf" + LOAD.encode()).stdout == b"\xef\xbb\xbf" + FIXED.encode()
    undecodable = b'import torch\nx = "\xff\xfe"\n'
    run = fix(undecodable)
    assert run.stdout == undecodable  # given back as it came, never emptied
    assert run.returncode == 2 and b"cannot decode" in run.stderr
