"""What `torchdoctor run` measured, in the editor: a report written by hand where the run writes
it (`<project root>/.torchdoctor_cache/runs/<key>.json`, the public file contract) shows in the
hover of the static finding it measured, in that diagnostic's `data`, and as a diagnostic of its
own where no static finding is; it follows the report when it changes and goes when it goes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import initialize, lsp_client, open_doc, open_notebook, published, wait_until
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio

TEXT = (
    "import torch\n"
    'state = torch.load("x", weights_only=True)\n'
    "for batch in loader:\n"
    "    out = model(batch)\n"
)


def report_file(root: Path, script: Path) -> Path:
    key = hashlib.sha256(str(script.resolve()).encode()).hexdigest()[:16]
    return root / ".torchdoctor_cache" / "runs" / f"{key}.json"


def finding(path: Path, code: str, row: int, col: int, summary: str, **extra: Any) -> dict:
    return {
        "code": code,
        "path": str(path),
        "row": row,
        "col": col,
        "message": f"{code} measured: {summary}",
        "message_zh": f"{code} 实测：{summary}",
        "measured": {"bytes": 2254857830, "calls": 157, "unknown": "ignored"},
        "summary": summary,
        "summary_zh": f"中文 {summary}",
        **extra,
    }


def write_report(
    root: Path, script: Path, findings: list[dict], started: str, target: Path | None = None
) -> Path:
    target = target or report_file(root, script)
    target.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "version": 1,
        "torchdoctor": "0.1.0",
        "script": str(script),
        "argv": [],
        "started": started,
        "duration_s": 1.0,
        "torch": "2.13.0+cpu",
        "device": "cpu",
        "steps": 3,
        "stopped": "exit",
        "exit_code": 0,
        "findings": findings,
        "timeline": [],
        "future_key": {"readers": "ignore it"},
    }
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, target)
    return target


def project(tmp_path: Path) -> tuple[Path, Path, str]:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    script = root / "pkg" / "train.py"
    script.write_text(TEXT)
    return root, script, script.as_uri()


async def hover_text(client: LanguageClient, uri: str, line: int, col: int) -> str:
    result = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, col),
        )
    )
    assert result is not None
    assert isinstance(result.contents, types.MarkupContent)
    return result.contents.value


def changed(client: LanguageClient, target: Path, kind: types.FileChangeType) -> None:
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=target.as_uri(), type=kind)])
    )


def by_source(params: types.PublishDiagnosticsParams, source: str) -> list[types.Diagnostic]:
    return [d for d in params.diagnostics if d.source == source]


@lsp_client()
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_measurement_in_hover_data_and_own_diagnostic(
    client: LanguageClient, tmp_path: Path
) -> None:
    root, script, uri = project(tmp_path)
    # A report of another run of the same script, older: the newest one wins.
    old = root / ".torchdoctor_cache" / "runs" / "0000000000000000.json"
    write_report(
        root, script, [finding(script, "TDR105", 3, 1, "old")], "2026-01-01T00:00:00Z", old
    )
    report = write_report(
        root,
        script,
        [
            finding(script, "TDR602", 2, 9, "loaded 3 times onto cuda:0"),
            finding(script, "TDR105", 4, 5, "2.1 GB of activations over 157 batches"),
            finding(tmp_path / "elsewhere.py", "TDR105", 1, 1, "not this file"),
        ],
        "2026-12-02T15:30:00Z",
    )
    # Files that are not reports, or not this version of them, are skipped.
    (report.parent / "broken.json").write_text("{not json")
    (report.parent / "future.json").write_text(json.dumps({"version": 99, "findings": [1]}))
    await initialize(client, root_uri=root.as_uri(), locale="en-US")
    # The server asks to be told when a report changes.
    await wait_until(lambda: client.registrations)
    patterns = [
        w["globPattern"]
        for r in client.registrations
        if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        for w in r.register_options["watchers"]
    ]
    assert "**/.torchdoctor_cache/runs/*.json" in patterns

    open_doc(client, uri, TEXT)
    params = await published(client, uri)
    static = by_source(params, "torchdoctor")
    assert [d.code for d in static] == ["TDR602"]
    assert static[0].data["measured"]["summary"] == "loaded 3 times onto cuda:0"
    assert static[0].data["measured"]["values"]["calls"] == 157
    # The fixes of the static finding are still there for code actions.
    assert static[0].data["fixesOnRequest"] is True
    own = by_source(params, "torchdoctor run")
    assert len(own) == 1
    assert own[0].code == "TDR105"
    assert own[0].severity == types.DiagnosticSeverity.Information
    assert own[0].message == "TDR105 measured: 2.1 GB of activations over 157 batches"
    assert own[0].range.start == types.Position(3, 4)
    assert own[0].range.end == types.Position(3, 22)  # to the end of the line

    text = await hover_text(client, uri, 1, 12)
    assert text.startswith("**TDR602**")
    assert "measured: loaded 3 times onto cuda:0 (`torchdoctor run train.py`" in text
    assert '**Fix**: Add `map_location="cpu"`' in text  # the fix is still named
    text = await hover_text(client, uri, 3, 10)
    assert text.startswith("**TDR105**")
    assert "measured: 2.1 GB of activations over 157 batches" in text

    # The code actions of the static finding still work.
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=static[0].range,
            context=types.CodeActionContext(diagnostics=[static[0], own[0]]),
        )
    )
    assert actions and any("map_location" in a.title for a in actions)

    # The report changes: the editor says so, the diagnostics follow.
    write_report(
        root,
        script,
        [finding(script, "TDR105", 4, 5, "3.4 GB of activations over 200 batches")],
        "2026-12-02T16:00:00Z",
    )
    start = len(client.published)
    changed(client, report, types.FileChangeType.Changed)
    params = await published(client, uri, after=start)
    assert "measured" not in by_source(params, "torchdoctor")[0].data
    own = by_source(params, "torchdoctor run")
    assert [d.message for d in own] == ["TDR105 measured: 3.4 GB of activations over 200 batches"]
    assert "3.4 GB" in await hover_text(client, uri, 3, 10)

    # The report goes: so does what it measured (the older report of the script shows again).
    report.unlink()
    start = len(client.published)
    changed(client, report, types.FileChangeType.Deleted)
    params = await published(client, uri, after=start)
    assert [d.message for d in by_source(params, "torchdoctor run")] == ["TDR105 measured: old"]
    old.unlink()
    start = len(client.published)
    changed(client, report, types.FileChangeType.Deleted)
    params = await published(client, uri, after=start)
    assert by_source(params, "torchdoctor run") == []
    assert [d.code for d in params.diagnostics] == ["TDR602"]


async def test_a_report_is_read_again_when_the_document_is_checked(
    client: LanguageClient, tmp_path: Path
) -> None:
    """No watcher (a client without dynamic registration): the next check reads it."""
    root, script, uri = project(tmp_path)
    await initialize(client, root_uri=root.as_uri())
    open_doc(client, uri, TEXT)
    params = await published(client, uri)
    assert by_source(params, "torchdoctor run") == []
    write_report(root, script, [finding(script, "TDR105", 4, 5, "1 GB")], "2026-12-02T15:30:00Z")
    start = len(client.published)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=TEXT + "\n")],
        )
    )
    params = await published(client, uri, after=start)
    assert [d.message for d in by_source(params, "torchdoctor run")] == ["TDR105 measured: 1 GB"]


async def test_chinese_client(client: LanguageClient, tmp_path: Path) -> None:
    root, script, uri = project(tmp_path)
    write_report(
        root,
        script,
        [
            finding(script, "TDR602", 2, 9, "loaded 3 times"),
            finding(script, "TDR105", 4, 5, "2.1 GB"),
        ],
        "2026-12-02T15:30:00Z",
    )
    await initialize(client, root_uri=root.as_uri(), locale="zh-CN")
    open_doc(client, uri, TEXT)
    params = await published(client, uri)
    own = by_source(params, "torchdoctor run")
    assert [d.message for d in own] == ["TDR105 实测：2.1 GB"]
    assert own[0].data["measured"]["summary"] == "中文 2.1 GB"
    text = await hover_text(client, uri, 1, 12)
    assert "实测：中文 loaded 3 times（`torchdoctor run train.py`" in text


async def test_notebook_cell_measured_by_the_cell_magic(
    client: LanguageClient, tmp_path: Path
) -> None:
    """`%%torchdoctor run` writes the notebook's report: rows are those of the cell's code, and
    `"cell"` names that code (sha256 of it, stripped, first 16 hex digits)."""
    root = tmp_path / "nbproj"
    root.mkdir()
    (root / ".git").mkdir()
    nb = root / "eval.ipynb"
    body = "outs = []\nfor b in batches:\n    outs.append(model(b))\n"
    key = hashlib.sha256(body.strip().encode()).hexdigest()[:16]
    write_report(
        root,
        nb,
        [finding(nb, "TDR105", 3, 5, "330.0 KB of activations over 10 forward calls", cell=key)],
        "2026-12-02T15:30:00Z",
    )
    await initialize(client, root_uri=root.as_uri())
    a = f"vscode-notebook-cell:{nb}#A"
    b = f"vscode-notebook-cell:{nb}#B"
    open_notebook(client, nb.as_uri(), [(a, "import torch"), (b, "%%torchdoctor run\n" + body)])
    params = await published(client, b)
    own = by_source(params, "torchdoctor run")
    assert [(d.code, d.range.start) for d in own] == [("TDR105", types.Position(3, 4))]
    assert own[0].data["measured"]["summary"] == "330.0 KB of activations over 10 forward calls"
    assert by_source(await published(client, a), "torchdoctor run") == []


async def test_pull_diagnostics_follow_the_report(client: LanguageClient, tmp_path: Path) -> None:
    root, script, uri = project(tmp_path)
    report = write_report(
        root, script, [finding(script, "TDR105", 4, 5, "1 GB")], "2026-12-02T15:30:00Z"
    )
    await initialize(client, root_uri=root.as_uri(), pull=True)
    open_doc(client, uri, TEXT)

    async def pulled() -> list[str]:
        result = await client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert isinstance(result, types.RelatedFullDocumentDiagnosticReport)
        return [d.message for d in result.items if d.source == "torchdoctor run"]

    assert await pulled() == ["TDR105 measured: 1 GB"]
    write_report(root, script, [finding(script, "TDR105", 4, 5, "2 GB")], "2026-12-02T16:00:00Z")
    changed(client, report, types.FileChangeType.Changed)
    # The document is checked again (and the editor told to pull): a pull then has the new one.
    for _ in range(300):
        if await pulled() == ["TDR105 measured: 2 GB"]:
            break
        await asyncio.sleep(0.05)
    assert await pulled() == ["TDR105 measured: 2 GB"]


async def test_a_measured_code_no_rule_has(client: LanguageClient, tmp_path: Path) -> None:
    root, script, uri = project(tmp_path)
    write_report(
        root,
        script,
        [finding(script, "TDR999", 1, 1, "3 s in data loading")],
        "2026-12-02T15:30:00Z",
    )
    await initialize(client, root_uri=root.as_uri())
    open_doc(client, uri, TEXT)
    [own] = by_source(await published(client, uri), "torchdoctor run")
    assert own.code == "TDR999" and own.code_description is None
    text = await hover_text(client, uri, 0, 2)
    assert text.startswith("**TDR999**: TDR999 measured: 3 s in data loading")
    assert "measured: 3 s in data loading (`torchdoctor run train.py`" in text
