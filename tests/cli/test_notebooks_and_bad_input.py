"""Notebooks through the CLI, and inputs that cannot be checked."""

from __future__ import annotations

import json
from pathlib import Path


def test_notebook_findings_map_to_cells(td, tmp_path: Path, notebook) -> None:
    nb = notebook(
        "%matplotlib inline\nimport torch\n!pip list",
        "# Load the weights\n",
        "x = 1\nstate = torch.load('w.pt', weights_only=True)\n%time y = 2",
    )
    (tmp_path / "n.ipynb").write_text(nb)
    run = td("check", "n.ipynb")
    assert run.code == 1
    assert "n.ipynb:cell 3:2:9: TDR602" in run.out
    data = td("check", "n.ipynb", "--output-format", "json").json()
    assert data[0]["cell"] == 3
    assert data[0]["location"] == {"row": 2, "column": 9}
    assert data[0]["fix"]["edits"][0]["location"] == {"row": 2, "column": 45}


def test_markdown_cells_are_counted_but_not_checked(td, tmp_path: Path, notebook) -> None:
    raw = json.loads(notebook("import torch", "state = torch.load('w.pt', weights_only=True)"))
    raw["cells"].insert(
        1,
        {"cell_type": "markdown", "metadata": {}, "source": ["torch.load('x', weights_only=True)"]},
    )
    (tmp_path / "n.ipynb").write_text(json.dumps(raw, indent=1))
    data = td("check", "n.ipynb", "--output-format", "json").json()
    assert [d["cell"] for d in data] == [3]


def test_notebook_fix_edits_only_cell_sources(td, tmp_path: Path, notebook) -> None:
    nb = notebook(
        "import torch\nnet = torch.nn.Linear(2, 2)",
        "state = torch.load('w.pt', weights_only=True)  # 权重\nnet.load_state_dict(state)",
    )
    raw = json.loads(nb)
    raw["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]
    raw["metadata"]["custom"] = {"z": 1, "a": [1, 2]}
    original = json.dumps(raw, indent=1, ensure_ascii=False) + "\n"
    path = tmp_path / "n.ipynb"
    path.write_text(original, encoding="utf-8")
    run = td("check", "--fix", "n.ipynb")
    assert run.code == 0, run.out + run.err
    after = path.read_text(encoding="utf-8")
    expected = original.replace(
        "\"state = torch.load('w.pt', weights_only=True)  # 权重\\n\"",
        '"state = torch.load(\'w.pt\', weights_only=True, map_location=\\"cpu\\")  # 权重\\n"',
    )
    assert after == expected


def test_notebook_with_a_broken_cell(td, tmp_path: Path, notebook) -> None:
    (tmp_path / "n.ipynb").write_text(notebook("import torch", "def f(:\n    pass"))
    run = td("check", "n.ipynb")
    assert "n.ipynb:cell 2:1: syntax error" in run.err
    assert "Traceback" not in run.err


def test_a_broken_cell_is_an_error_of_that_cell_and_the_others_are_checked(
    td, tmp_path: Path, notebook
) -> None:
    nb = notebook(
        "import torch\nmodel = torch.nn.Linear(2, 2)",
        "lr = \n",  # an exercise left blank
        "state = torch.load('w.pt', weights_only=True)",
        "optimizer = torch.optim.SGD(model.parameters(), lr=\n",  # the second blank
        "torch.save(model, 'model.pt')",
    )
    (tmp_path / "n.ipynb").write_text(nb)
    run = td("check", "n.ipynb")
    assert run.code == 1
    assert "n.ipynb:cell 3:1:9: TDR602" in run.out
    assert "n.ipynb:cell 5:1:12: TDR601" in run.out
    errors = [line for line in run.err.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: n.ipynb:cell 2:1: syntax error: invalid syntax",
        "error: n.ipynb:cell 4:1: syntax error: '(' was never closed",
    ]
    # Fixes of the other cells apply; the broken cells stay as they are.
    td("check", "--fix", "n.ipynb")
    cells = [c["source"] for c in json.loads((tmp_path / "n.ipynb").read_text())["cells"]]
    assert "map_location" in "".join(cells[2])
    assert "".join(cells[1]) == "lr = \n"


def test_valid_ipython_syntax_is_never_an_error(td, tmp_path: Path, notebook) -> None:
    nb = notebook(
        "import torch",
        "torch.*Tensor?",  # wildcard search of help
        "torch.nn.Module??\n?torch.load\n%timeit torch.ones(3)\n!nvidia-smi\nfiles = !ls",
        "state = torch.load('w.pt', weights_only=True)",
    )
    (tmp_path / "n.ipynb").write_text(nb)
    run = td("check", "n.ipynb")
    assert run.err == ""
    assert "n.ipynb:cell 4:1:9: TDR602" in run.out


def test_broken_notebook_json(td, tmp_path: Path) -> None:
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    (tmp_path / "good.py").write_text("import torch\nx = torch.load('a', weights_only=True)\n")
    run = td("check", ".")
    assert "bad.ipynb: invalid notebook JSON" in run.err
    assert "good.py:2:5: TDR602" in run.out  # the run goes on
    assert "Traceback" not in run.err


def test_syntax_error_is_one_line(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import torch\nx = (\n")
    run = td("check", "a.py")
    assert run.code == 1
    assert run.err.strip().startswith("error: a.py:")
    assert "syntax error" in run.err and "Traceback" not in run.err


def test_binary_undecodable_and_missing_files(td, tmp_path: Path) -> None:
    (tmp_path / "bin.py").write_bytes(b"torch\x00\x01\x02")
    (tmp_path / "latin.py").write_bytes(b"import torch\nx = '\xff\xfe'\n")
    run = td("check", "bin.py", "latin.py", "missing.py")
    assert "bin.py: binary file" in run.err
    assert "latin.py:2: cannot decode as utf-8" in run.err
    assert "missing.py: no such file or folder" in run.err
    assert "Traceback" not in run.err


def test_pep263_encoding_is_honoured(td, tmp_path: Path) -> None:
    (tmp_path / "enc.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch\nx = torch.load('\xe9')\n"
    )
    run = td("check", "enc.py")
    assert "enc.py:3:5: TDR602" in run.out


def test_huge_and_deeply_nested_files(td, tmp_path: Path) -> None:
    (tmp_path / "deep.py").write_text("import torch\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    (tmp_path / "huge.py").write_bytes(b"import torch\n" + b"#" * (11 * 1024 * 1024))
    (tmp_path / "fine.py").write_text("import torch\nx = torch.load('a', weights_only=True)\n")
    run = td("check", ".")
    assert "deep.py:" in run.err and "Traceback" not in run.err
    assert "huge.py: file too large" in run.err
    assert "fine.py:2:5: TDR602" in run.out


def test_a_cell_no_python_source_can_hold_is_an_error_of_that_cell(
    td, tmp_path: Path, notebook
) -> None:
    # A lone surrogate (JSON allows "\ud800"): the cell cannot be parsed, the others are checked.
    raw = json.loads(
        notebook("import torch", "x = 1", "state = torch.load('w.pt', weights_only=True)")
    )
    raw["cells"][1]["source"] = ['x = "\ud800"\n']
    (tmp_path / "n.ipynb").write_text(json.dumps(raw))  # ASCII: the surrogate as an escape
    run = td("check", "n.ipynb")
    assert "n.ipynb:cell 3:1:9: TDR602" in run.out
    assert "error: n.ipynb:cell 2: cannot parse" in run.err
    assert "Traceback" not in run.err


def test_a_symlink_loop_is_reported_like_a_dangling_link(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    (tmp_path / "gone.py").symlink_to("nowhere.py")
    run = td("check", "a.py", "gone.py")
    assert run.code == 2 or run.code == 1
    assert "a.py: cannot read: " in run.err and "symbolic links" in run.err
    assert "gone.py: no such file or folder" in run.err
    assert "Traceback" not in run.err
    assert "2 files could not be checked" in run.out


def test_a_cell_whose_source_is_not_text_is_reported(td, tmp_path: Path, notebook) -> None:
    raw = json.loads(notebook("import torch", "x = 1", "state = torch.load('w.pt')"))
    raw["cells"][1]["source"] = 42
    raw["cells"][0]["source"] = ["import torch\n", None]
    (tmp_path / "n.ipynb").write_text(json.dumps(raw))
    run = td("check", "n.ipynb")
    assert "All checks passed" not in run.out
    assert "n.ipynb:cell 2: cannot read: its source is not text (int)" in run.err
    assert "n.ipynb:cell 1: cannot read: its source is not text" in run.err
    assert "Traceback" not in run.err
    assert run.code == 1
