"""One project, not one file: examples/project is a training script whose sampler, model
and saving helpers live in a package of its own (re-exported through ``__init__.py``). Its
pitfalls are found whether the folder or the one script is checked, from any working folder,
and each finding names the other module its fact comes from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2] / "examples" / "project"
EXPECTED = [
    ("TDR105", 18),  # the model is a class of trainer/models.py, held on self
    ("TDR502", 26),  # the DistributedSampler is built in trainer/data.py
    ("TDR505", 31),  # save_checkpoint (trainer/utils.py) saves on every rank
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "project"
    shutil.copytree(PROJECT, copy)
    return copy


def _found(run) -> list[tuple[str, int]]:
    return [(f["code"], f["location"]["row"]) for f in run.json()]


@pytest.mark.parametrize("target", [".", "train.py"])
def test_findings_rest_on_facts_of_other_modules(td, project: Path, target: str) -> None:
    run = td("check", "--output-format", "json", "--no-cache", target, cwd=project)
    assert run.code == 1, run.err
    assert _found(run) == EXPECTED
    messages = {f["code"]: f["message"] for f in run.json()}
    assert "(`DistributedSampler` created in trainer/data.py:5)" in messages["TDR502"]
    assert "`save_checkpoint` (trainer/utils.py:5)" in messages["TDR505"]


def test_the_script_checked_from_another_folder(td, project: Path, tmp_path: Path) -> None:
    run = td("check", "--output-format", "json", "--no-cache", str(project / "train.py"))
    assert _found(run) == EXPECTED


def test_a_helper_that_checks_the_rank_itself_is_not_reported(td, project: Path) -> None:
    # save_on_master (line 32) checks the rank in trainer/utils.py; make save_checkpoint do
    # the same and its call is no longer reported.
    utils = project / "trainer" / "utils.py"
    utils.write_text(
        utils.read_text().replace(
            "def save_checkpoint(state, path):\n    torch.save(state, path)\n",
            "def save_checkpoint(state, path):\n    if dist.get_rank() == 0:\n"
            "        torch.save(state, path)\n",
        )
    )
    run = td("check", "--output-format", "json", "--no-cache", ".", cwd=project)
    assert [code for code, _row in _found(run)] == ["TDR105", "TDR502"]


def test_without_the_package_the_facts_are_unknown(td, project: Path) -> None:
    # The sampler and the saving helper are unknown; the model is still one by its use
    # (`self.model.eval()`, `self.model.parameters()` given to the optimizer), with no fix:
    # its forward cannot be read.
    shutil.rmtree(project / "trainer")
    run = td("check", "--output-format", "json", "--no-cache", "train.py", cwd=project)
    assert _found(run) == [("TDR105", 18)]
    assert not run.json()[0]["fix"]


def test_fix_seeds_the_sampler_returned_by_the_helper(td, project: Path) -> None:
    run = td("check", "--fix", "--no-cache", "train.py", cwd=project)
    assert run.code == 1, run.out + run.err
    text = (project / "train.py").read_text()
    assert "    for epoch in range(epochs):\n        sampler.set_epoch(epoch)\n" in text
    again = td("check", "--output-format", "json", "--no-cache", "train.py", cwd=project)
    assert [code for code, _row in _found(again)] == ["TDR105", "TDR505"]


def test_a_cached_result_is_dropped_when_a_module_it_read_changes(td, project: Path) -> None:
    first = td("check", "--output-format", "json", "train.py", cwd=project)
    assert _found(first) == EXPECTED
    assert (project / ".torchdoctor_cache").is_dir()
    assert _found(td("check", "--output-format", "json", "train.py", cwd=project)) == EXPECTED
    data = project / "trainer" / "data.py"
    data.write_text(data.read_text().replace("(dataset)", "(dataset, shuffle=False)"))
    again = td("check", "--output-format", "json", "train.py", cwd=project)
    assert [code for code, _row in _found(again)] == ["TDR105", "TDR505"]
    # A module that appears where an import is looked for changes what the import means.
    (project / "trainer" / "utils.py").unlink()
    (project / "trainer" / "__init__.py").write_text(
        "from .data import build_loader\n\n\ndef save_checkpoint(state, path):\n    pass\n\n\n"
        "def save_on_master(state, path):\n    pass\n"
    )
    final = td("check", "--output-format", "json", "train.py", cwd=project)
    assert [code for code, _row in _found(final)] == ["TDR105"]


def test_a_loader_handed_to_the_project_backend_is_followed_to_the_epoch_loop(
    td, tmp_path: Path
) -> None:
    # `make_backend` returns one of several backends: `distribute` cannot be read from train.py.
    (tmp_path / "backends.py").write_text(
        "class Local:\n    def distribute(self, model=None, data=None):\n        return model, data\n"
        "BACKENDS = {'local': Local()}\ndef make_backend(name='local'):\n"
        "    return BACKENDS[name]\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch.utils.data import DataLoader, DistributedSampler\n"
        "from backends import make_backend\nbackend = make_backend()\n"
        "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, batch_size=8, sampler=sampler)\n"
        "model, dl = backend.distribute(model=net, data=loader)\n"
        "for epoch in range(3):\n    for batch in dl:\n        step(batch)\n"
    )
    for locale, says in (
        ("en", "`dl` (what `backend.distribute(...)` returns for `loader`):"),
        ("zh", "`dl`（`backend.distribute(...)` 对 `loader` 返回的值）的"),
    ):
        run = td(
            "check",
            "--output-format",
            "json",
            "--no-cache",
            "--locale",
            locale,
            "train.py",
            cwd=tmp_path,
        )
        (finding,) = run.json()
        assert (finding["code"], finding["location"]["row"]) == ("TDR502", 8)
        assert says in finding["message"]
        assert not finding["fix"]
    # Alone, the backend is unknown: nothing says `dl` is the loader.
    (tmp_path / "backends.py").unlink()
    run = td("check", "--output-format", "json", "--no-cache", "train.py", cwd=tmp_path)
    assert run.json() == []
