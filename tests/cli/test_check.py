"""``torchdoctor check``: output formats, exit codes, noqa, selection, config discovery."""

from __future__ import annotations

import json
from pathlib import Path

LOAD = 'import torch\nstate = torch.load("ckpt.pt", weights_only=True)\n'


def test_clean_file_exits_zero(td, tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text(
        'import torch\nx = torch.load("a", weights_only=True, map_location="cpu")\n'
    )
    run = td("check", "ok.py")
    assert run.code == 0, run.err
    assert "All checks passed!" in run.out


def test_finding_text_and_exit_one(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    run = td("check", "a.py")
    assert run.code == 1
    assert "a.py:2:9: TDR602 [*] `torch.load` without `map_location`" in run.out
    assert "Found 1 finding. [*] 1 fixable with the `--fix` option." in run.out


def test_chinese_messages(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    by_flag = td("check", "a.py", "--locale", "zh")
    by_env = td("check", "a.py", env={"TORCHDOCTOR_LOCALE": "zh_CN"})
    for run in (by_flag, by_env):
        assert "未指定 `map_location`" in run.out
        assert "发现 1 个问题。" in run.out


def test_json_is_ruff_compatible(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    data = td("check", "a.py", "--output-format", "json").json()
    assert len(data) == 1
    item = data[0]
    assert set(item) >= {
        "code",
        "name",
        "message",
        "filename",
        "location",
        "end_location",
        "fix",
        "url",
        "noqa_row",
        "cell",
    }
    assert item["code"] == "TDR602"
    assert item["name"] == "load-without-map-location"
    assert item["location"] == {"row": 2, "column": 9}
    assert item["end_location"] == {"row": 2, "column": 49}
    assert item["cell"] is None and item["noqa_row"] == 2
    assert item["fix"]["applicability"] == "safe"
    assert item["fix"]["edits"] == [
        {
            "content": ', map_location="cpu"',
            "location": {"row": 2, "column": 48},
            "end_location": {"row": 2, "column": 48},
        }
    ]
    assert "TDR602" in item["url"]


def test_sarif_and_github_formats(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    sarif = json.loads(td("check", "a.py", "--output-format", "sarif").out)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "torchdoctor"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["TDR602"]
    result = run["results"][0]
    assert result["ruleId"] == "TDR602" and result["level"] == "warning"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2
    gh = td("check", "a.py", "--output-format", "github").out.strip()
    assert gh.startswith("::warning title=torchdoctor (TDR602),file=a.py,line=2,col=9,")


def test_statistics(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD + 'other = torch.load("b.pt", weights_only=True)\n')
    run = td("check", "a.py", "--statistics")
    assert "    2\tTDR602\t[*] load-without-map-location" in run.out


def test_noqa(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch\n"
        'a = torch.load("a", weights_only=True)  # noqa: TDR602\n'
        'b = torch.load("b", weights_only=True)  # noqa\n'
        'c = torch.load("c", weights_only=True)  # noqa: TDR6\n'
        'd = torch.load("d", weights_only=True)  # noqa: TDR105\n'
    )
    data = td("check", "a.py", "--output-format", "json").json()
    assert [d["location"]["row"] for d in data] == [5]


def test_select_ignore_and_prefixes(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    assert td("check", "a.py", "--ignore", "TDR602").code == 0
    assert td("check", "a.py", "--ignore", "TDR6").code == 0
    assert td("check", "a.py", "--select", "TDR1").code == 0
    assert td("check", "a.py", "--select", "TDR1", "--extend-select", "TDR602").code == 1
    assert td("check", "a.py", "--select", "ALL").code == 1
    bad = td("check", "a.py", "--select", "XYZ9")
    assert bad.code == 2 and "names no rule" in bad.err


def test_config_discovery_from_each_file_upwards(td, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\nignore = ['TDR602']\n")
    sub = tmp_path / "pkg"
    sub.mkdir()
    (sub / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no table: keep looking up
    (sub / "a.py").write_text(LOAD)
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text("[tool.torchdoctor]\nselect = ['TDR6']\n")
    (other / "b.py").write_text(LOAD)
    data = td("check", ".", "--output-format", "json").json()
    assert [Path(d["filename"]).name for d in data] == ["b.py"]


def test_per_file_ignores_and_exclude(td, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.torchdoctor]\nexclude = ['generated']\n"
        "[tool.torchdoctor.per-file-ignores]\n'scripts/*.py' = ['TDR602']\n"
    )
    for folder in ("generated", "scripts", "src"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text(LOAD)
    data = td("check", "--output-format", "json").json()
    assert [Path(d["filename"]).parent.name for d in data] == ["src"]


def test_explicit_config_file(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    (tmp_path / "custom.toml").write_text("[tool.torchdoctor]\nignore = ['TDR602']\n")
    assert td("check", "a.py", "--config", "custom.toml").code == 0


def test_bad_config_is_one_clear_error(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\nselct = ['TDR6']\n")
    run = td("check", "a.py")
    assert "unknown setting `selct`" in run.err
    assert "Traceback" not in run.err
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor\n")
    run = td("check", "a.py")
    assert "invalid TOML" in run.err and "Traceback" not in run.err
    assert run.code == 2
    assert run.out == ""
    # The same error, once, exit 2: for files, a folder, JSON and stdin alike.
    (tmp_path / "b.py").write_text(LOAD)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\nselct = ['TDR6']\n")
    for args in (["a.py", "b.py"], ["."], ["--output-format", "json", "a.py", "b.py"], ["-"]):
        run = td("check", "--no-cache", *args, stdin=LOAD)
        assert run.code == 2, (args, run.out, run.err)
        assert run.out == "", args
        assert run.err.count("unknown setting `selct`") == 1, (args, run.err)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\ntarget-version = 'latest'\n")
    run = td("check", "a.py")
    assert """`target-version` must be a torch version such as "2.13", not 'latest'""" in run.err


IMPLICIT = 'import torch\nsd = torch.load("a.pt", map_location="cpu")\n'


def test_target_version_option(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(IMPLICIT)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\ntarget-version = '2.13'\n")
    newer = td("check", "a.py", "--output-format", "json").json()
    older = td("check", "a.py", "--output-format", "json", "--target-version", "2.5").json()
    assert newer == []  # from 2.6 the default weights_only=True loads a state dict safely
    assert [d["code"] for d in older] == ["TDR603"]
    assert "before PyTorch 2.6" in older[0]["message"]
    bad = td("check", "a.py", "--target-version", "newest")
    assert bad.code == 2
    assert """--target-version must be a torch version such as "2.13", not 'newest'""" in bad.err


def test_cache_follows_the_installed_torch(td, tmp_path: Path) -> None:
    """Without `target-version` the installed torch decides; upgrading it must not reuse
    findings cached for the old one."""
    (tmp_path / "a.py").write_text(IMPLICIT)
    fake = tmp_path / "site" / "torch-2.5.0.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.0\n")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    old = td("check", "a.py", "--output-format", "json", env=env).json()
    assert "before PyTorch 2.6" in old[0]["message"]
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.6.0\n")
    new = td("check", "a.py", "--output-format", "json", env=env).json()
    assert new == []


def test_gitignore_is_honoured(td, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("build_out/\nskip_me.py\n")
    (tmp_path / "build_out").mkdir()
    (tmp_path / "build_out" / "a.py").write_text(LOAD)
    (tmp_path / "skip_me.py").write_text(LOAD)
    (tmp_path / "keep.py").write_text(LOAD)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "lib.py").write_text(LOAD)
    data = td("check", "--output-format", "json").json()
    assert [Path(d["filename"]).name for d in data] == ["keep.py"]
    # A file named explicitly is checked even when ignored.
    assert td("check", "skip_me.py").code == 1


def test_files_without_torch_are_skipped(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import numpy as np\nx = np.load('a.npy')\n")
    assert td("check", "a.py").code == 0


def test_stdin(td) -> None:
    run = td("check", "-", "--stdin-filename", "snippet.py", stdin=LOAD)
    assert run.code == 1 and "snippet.py:2:9: TDR602" in run.out
    fixed = td("check", "-", "--fix", stdin=LOAD)
    assert (
        fixed.out
        == 'import torch\nstate = torch.load("ckpt.pt", weights_only=True, map_location="cpu")\n'
    )


def test_cache_gives_the_same_answer(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    first = td("check", "a.py", "--output-format", "json")
    assert (tmp_path / ".torchdoctor_cache").is_dir()
    second = td("check", "a.py", "--output-format", "json")
    assert first.out == second.out
    # A change of content is seen despite the cache.
    (tmp_path / "a.py").write_text(
        'import torch\nx = torch.load("a", weights_only=True, map_location="cpu")\n'
    )
    assert td("check", "a.py").code == 0
    no_cache = tmp_path / "nc"
    no_cache.mkdir()
    (no_cache / "a.py").write_text(LOAD)
    assert td("check", "a.py", "--no-cache", cwd=no_cache).code == 1
    assert not (no_cache / ".torchdoctor_cache").exists()


def test_many_files_in_parallel(td, tmp_path: Path) -> None:
    for i in range(40):
        (tmp_path / f"m{i:02d}.py").write_text(LOAD if i % 2 else "import torch\n")
    data = td("check", "-j", "2", "--output-format", "json", "--no-cache").json()
    assert sorted(Path(d["filename"]).name for d in data) == [
        f"m{i:02d}.py" for i in range(1, 40, 2)
    ]


def test_rule_command(td) -> None:
    run = td("rule", "TDR602")
    assert run.code == 0
    assert run.out.startswith("# TDR602 (load-without-map-location)")
    assert "## Why is this bad?" in run.out
    zh = td("rule", "load-without-map-location", "--locale", "zh")
    assert "## 为什么不好？" in zh.out
    listing = td("rule", "--all")
    assert "TDR602" in listing.out
    assert json.loads(td("rule", "--all", "--output-format", "json").out)[0]["code"].startswith(
        "TDR"
    )
    unknown = td("rule", "TDR999")
    assert unknown.code == 2 and "unknown rule" in unknown.err


def test_usage_error_exits_two(td) -> None:
    assert td("check", "--output-format", "xml").code == 2
    assert td("frobnicate").code == 2


def test_noqa_on_the_first_row_of_a_multi_row_statement(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "import torch\n"
        "state = torch.load(  # noqa: TDR602\n"
        "    'a.pt',\n"
        "    weights_only=True,\n"
        ")\n"
        "other = dict(\n"
        "    x=torch.load('b.pt', weights_only=True),\n"
        ")\n"
    )
    data = td("check", "a.py", "--output-format", "json").json()
    assert [d["location"]["row"] for d in data] == [7]
    (tmp_path / "b.py").write_text(
        "import torch\nother = dict(  # noqa: TDR602\n    x=torch.load('b.pt', weights_only=True),\n)\n"
    )
    assert td("check", "b.py").code == 0


def test_json_filenames_are_absolute_like_ruffs(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    (item,) = td("check", "a.py", "--output-format", "json").json()
    assert item["filename"] == str(tmp_path / "a.py")


def test_symlink_loops_end_and_each_real_file_is_checked_once(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text(LOAD)
    (tmp_path / "sub" / "b.py").write_text(LOAD)
    (tmp_path / "self").symlink_to(".")
    (tmp_path / "sub" / "up").symlink_to("..")
    (tmp_path / "link.py").symlink_to("a.py")
    env = {**os.environ, "TORCHDOCTOR_LOCALE": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "torchdoctor", "check", "--no-cache", "--output-format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,  # the loop used to run without end
    )
    assert proc.returncode == 1, proc.stderr
    files = sorted(
        Path(d["filename"]).relative_to(tmp_path).as_posix() for d in json.loads(proc.stdout)
    )
    assert files == ["a.py", "sub/b.py"]


def test_a_closed_pipe_ends_the_output_quietly(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    # 3,000 findings: far more JSON than a pipe holds, so the writer meets the closed pipe.
    (tmp_path / "many.py").write_text("import torch\n" + 'torch.load("a.pt")\n' * 3000)
    env = {**os.environ, "TORCHDOCTOR_LOCALE": ""}
    for args in (["rule", "--all"], ["check", "--no-cache", "--output-format", "json", "."]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "torchdoctor", *args],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # like `| head -1` that has read its line
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
        assert "Traceback" not in err and "BrokenPipeError" not in err, (args, err)
        # Ruff exits 0 and says nothing when its reader is gone; so does torchdoctor, every time.
        assert proc.returncode == 0 and err == "", (args, proc.returncode, err)


def test_a_locale_without_messages_is_refused_or_warned(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    run = td("check", "--no-cache", "--locale", "fr", "a.py")
    assert run.code == 2 and run.out == ""
    assert "--locale `fr`: messages exist in en and zh only" in run.err
    assert td("rule", "--locale", "fr", "TDR602").code == 2
    run = td("check", "--no-cache", "a.py", env={"TORCHDOCTOR_LOCALE": "fr"})
    assert run.code == 1 and "TDR602" in run.out
    assert "TORCHDOCTOR_LOCALE `fr`: messages exist in en and zh only; using en" in run.err
    assert td("check", "--no-cache", "--locale", "zh-CN", "a.py").code == 1


def test_diff_with_a_machine_format_is_refused(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    for fmt in ("json", "sarif", "github"):
        run = td("check", "--diff", "--output-format", fmt, "a.py")
        assert run.code == 2 and run.out == "", fmt
        assert f"--diff prints a diff; it cannot be combined with --output-format {fmt}" in run.err
    assert (tmp_path / "a.py").read_text() == LOAD


def test_repeated_selection_flags_add_up(td, tmp_path: Path) -> None:
    # TDR602 (no map_location) and TDR603 (weights_only=False) both fire on this load.
    (tmp_path / "a.py").write_text(
        'import torch\nstate = torch.load("ckpt.pt", weights_only=False)\n'
    )

    def codes(*flags: str) -> list[str]:
        return sorted(
            d["code"]
            for d in td("check", "--no-cache", "--output-format", "json", *flags, "a.py").json()
        )

    both = codes()
    assert {"TDR602", "TDR603"} <= set(both)
    assert codes("--select", "TDR602", "--select", "TDR603") == ["TDR602", "TDR603"]
    assert codes("--select", "TDR602,TDR603") == ["TDR602", "TDR603"]
    assert codes("--select", "TDR6", "--ignore", "TDR602", "--ignore", "TDR603") == []
    assert codes(
        "--select", "TDR602", "--extend-select", "TDR603", "--extend-select", "TDR602"
    ) == ["TDR602", "TDR603"]


def test_rule_with_a_torchfix_code_explains_every_rule_it_stands_for(td) -> None:
    # TorchFix's TOR102 is about `weights_only` (TDR603); a missing `map_location` is TDR602.
    run = td("rule", "TOR102")
    assert run.code == 0, run.err
    assert run.out.startswith("TOR102 stands for 2 rules: TDR603")
    first, second = run.out.index("# TDR603"), run.out.index("# TDR602")
    assert first < second
    data = json.loads(td("rule", "tor102", "--output-format", "json").out)
    assert [d["code"] for d in data] == ["TDR603", "TDR602"]
    # Each row of the TorchFix table (docs/torchfix.md) names what `rule` explains.
    table = (Path(__file__).parents[2] / "docs" / "torchfix.md").read_text(encoding="utf-8")
    row = next(line for line in table.splitlines() if line.startswith("| `TOR102`"))
    assert row.index("TDR603") < row.index("TDR602")
    single = json.loads(td("rule", "TOR106", "--output-format", "json").out)
    assert single["code"] == "TDR808"


def test_config_errors_are_all_reported_at_once(td, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(LOAD)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchdoctor]\nselect = "TDR6"\nselct = ["TDR6"]\nignore = ["XYZ9"]\n'
        'unsafe-fixes = "yes"\n[tool.torchdoctor.per-file-ignores]\n"tests/*" = "TDR6"\n'
    )
    run = td("check", "--no-cache", "a.py")
    assert run.code == 2 and run.out == "", run.out
    lines = run.err.splitlines()
    assert all(line.startswith("torchdoctor: error: ") for line in lines), run.err
    for problem in (
        """`select` must be a list of strings, such as ["TDR6"], not 'TDR6'""",
        "unknown setting `selct`",
        "`ignore` names no rule: `XYZ9`",
        "`unsafe-fixes` must be true or false",
        "`per-file-ignores.tests/*` must be a list of strings",
    ):
        assert sum(problem in line for line in lines) == 1, (problem, run.err)
    assert len(lines) == 5, run.err
    # A string is refused with one problem alone too; the list it stands for is accepted.
    (tmp_path / "pyproject.toml").write_text('[tool.torchdoctor]\nselect = "TDR6"\n')
    assert td("check", "--no-cache", "a.py").code == 2
    (tmp_path / "pyproject.toml").write_text('[tool.torchdoctor]\nselect = ["TDR6"]\n')
    assert td("check", "--no-cache", "a.py").code == 1


def test_a_run_that_checks_nothing_says_so(td, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("Notes about the training run.\nUse lr 0.1\n")
    (tmp_path / "empty").mkdir()
    for args in (["notes.txt"], ["empty"]):
        run = td("check", "--no-cache", *args)
        assert run.code == 0, run.err
        assert "All checks passed!" not in run.out
        assert run.out == "Checked nothing: no Python file or notebook under the given paths.\n"
    run = td("check", "--no-cache", "notes.txt")
    assert (
        run.err == "torchdoctor: warning: notes.txt is not a Python file or notebook; not checked\n"
    )
    zh = td("check", "--no-cache", "empty", "--locale", "zh")
    assert "没有检查任何文件" in zh.out
    # Next to a Python file, the text file is still named, and the Python file is checked.
    (tmp_path / "a.py").write_text(LOAD)
    both = td("check", "--no-cache", "notes.txt", "a.py")
    assert both.code == 1 and "TDR602" in both.out and "notes.txt" in both.err
    # A script without a suffix that runs Python is a Python file.
    (tmp_path / "train").write_text("#!/usr/bin/env python3\n" + LOAD)
    assert "TDR602" in td("check", "--no-cache", "train").out


def _without_torch(tmp_path: Path) -> dict[str, str]:
    """An environment for `python -S` that sees torchdoctor and its dependencies but no torch:
    the site-packages folder of this Python, less torch, linked into a folder of its own."""
    import os
    import sysconfig

    import torchdoctor

    packages = tmp_path / "site-without-torch"
    packages.mkdir()
    source = Path(sysconfig.get_paths()["purelib"])
    for entry in source.iterdir():
        if entry.name.split("-")[0].split(".")[0] != "torch":  # torch, torch-2.13.0.dist-info
            (packages / entry.name).symlink_to(entry)
    server = Path(torchdoctor.__file__).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": f"{server}{os.pathsep}{packages}", "TORCHDOCTOR_LOCALE": ""}


def test_without_torch_the_assumed_version_is_said_once(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = _without_torch(tmp_path)
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(LOAD)

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-S", "-m", "torchdoctor", "check", "--no-cache", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    probe = subprocess.run(
        [sys.executable, "-S", "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr
    run = check("a.py", "b.py")
    assert run.returncode == 1 and "TDR602" in run.stdout
    assert run.stderr.count("torchdoctor: note: no torch is installed next to torchdoctor") == 1
    assert "checking for the newest torch" in run.stderr
    # A version set on the command line or in the configuration: nothing to say.
    assert check("--target-version", "2.5", "a.py").stderr == ""
    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\ntarget-version = '2.5'\n")
    assert check("a.py", "b.py").stderr == ""
