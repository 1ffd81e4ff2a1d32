"""Configuration: `[tool.torchdoctor]` in the file's pyproject.toml, editor settings from
initializationOptions and workspace/configuration (per folder), reloaded on
didChangeConfiguration and on pyproject.toml changes, invalid values falling back to defaults."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import codes, initialize, lsp_client, open_doc, published, wait_until
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio

LOAD = 'import torch\nstate = torch.load("x", weights_only=True)\n'
BOTH = LOAD + "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n"


@lsp_client()
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def project(tmp_path: Path, table: str) -> tuple[str, str]:
    (tmp_path / "pyproject.toml").write_text(
        f"[project]\nname = 'x'\n\n[tool.torchdoctor]\n{table}\n"
    )
    (tmp_path / "pkg").mkdir(exist_ok=True)
    return tmp_path.as_uri(), (tmp_path / "pkg" / "train.py").as_uri()


async def test_pyproject_is_read_and_reloaded_when_it_changes(
    client: LanguageClient, tmp_path: Path
) -> None:
    root, uri = project(tmp_path, 'ignore = ["TDR602"]')
    await initialize(client, root_uri=root)
    # The server asks to be told about pyproject.toml changes.
    await wait_until(lambda: client.registrations)
    watchers = [
        r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    ]
    assert watchers[0].register_options["watchers"][0]["globPattern"] == "**/pyproject.toml"

    open_doc(client, uri, BOTH)
    assert codes((await published(client, uri)).diagnostics) == ["TDR405"]

    (tmp_path / "pyproject.toml").write_text("[tool.torchdoctor]\nselect = ['TDR602']\n")
    start = len(client.published)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[
                types.FileEvent(
                    uri=(tmp_path / "pyproject.toml").as_uri(), type=types.FileChangeType.Changed
                )
            ]
        )
    )
    assert codes((await published(client, uri, after=start)).diagnostics) == ["TDR602"]


async def test_invalid_pyproject_falls_back_to_defaults_and_logs_once(
    client: LanguageClient, tmp_path: Path
) -> None:
    root, uri = project(tmp_path, 'select = ["NOPE999"]')
    await initialize(client, root_uri=root)
    open_doc(client, uri, LOAD)
    assert codes((await published(client, uri)).diagnostics) == ["TDR602"]
    open_doc(client, uri.replace("train", "other"), LOAD)
    await published(client, uri.replace("train", "other"))
    problems = [m for m in client.log_messages if "NOPE999" in m.message]
    assert len(problems) == 1
    assert problems[0].type == types.MessageType.Warning
    assert client.messages == []  # no popup


async def test_workspace_configuration_and_did_change_configuration(
    client: LanguageClient, tmp_path: Path
) -> None:
    root, uri = project(tmp_path, "")
    client.set_configuration({"ignore": ["TDR602"]}, section="torchdoctor")
    await initialize(client, root_uri=root)
    open_doc(client, uri, BOTH)
    # The very first publish already honours the editor's settings (no flash of TDR602).
    assert codes((await published(client, uri)).diagnostics) == ["TDR405"]
    client.set_configuration(
        {"ignore": ["TDR405"], "docsBaseUrl": "https://example.org/td"}, section="torchdoctor"
    )
    start = len(client.published)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    after = await published(client, uri, after=start)
    assert codes(after.diagnostics) == ["TDR602"]
    assert after.diagnostics[0].code_description is not None
    assert after.diagnostics[0].code_description.href == "https://example.org/td/rules/TDR602/"


async def test_folder_settings_apply_to_their_folder_only(
    client: LanguageClient, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = (tmp_path / "a").as_uri(), (tmp_path / "b").as_uri()
    client.set_configuration({"ignore": ["TDR602"]}, section="torchdoctor", scope_uri=a)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                workspace=types.WorkspaceClientCapabilities(configuration=True)
            ),
            initialization_options={"debounceMs": 0},
            workspace_folders=[
                types.WorkspaceFolder(uri=a, name="a"),
                types.WorkspaceFolder(uri=b, name="b"),
            ],
        )
    )
    in_a, in_b = f"{a}/x.py", f"{b}/x.py"
    open_doc(client, in_a, LOAD)
    open_doc(client, in_b, LOAD)
    await wait_until(
        lambda: (
            [p for p in client.published if p.uri == in_a and not p.diagnostics]
            and [p for p in client.published if p.uri == in_b and p.diagnostics]
        )
    )


async def test_invalid_client_settings_fall_back_per_key(client: LanguageClient) -> None:
    await initialize(
        client, options={"debounceMs": "soon", "select": 5, "ignore": ["TDR405"], "logLevel": 3}
    )
    uri = "file:///tmp/td_cfg/x.py"
    open_doc(client, uri, BOTH)
    # select fell back to the defaults, ignore (valid) still applies.
    assert codes((await published(client, uri)).diagnostics) == ["TDR602"]
    warnings = [m.message for m in client.log_messages if m.type == types.MessageType.Warning]
    assert any("debounceMs" in w for w in warnings)
    assert any("`select`" in w for w in warnings)
    assert client.messages == []


async def test_disabled_server_publishes_nothing(client: LanguageClient) -> None:
    await initialize(client, options={"enable": False})
    uri = "file:///tmp/td_cfg/off.py"
    open_doc(client, uri, LOAD)
    assert (await published(client, uri)).diagnostics == []


async def test_excluded_files_are_not_checked(client: LanguageClient, tmp_path: Path) -> None:
    root, uri = project(tmp_path, 'exclude = ["pkg/generated_*.py"]')
    await initialize(client, root_uri=root)
    skipped = uri.replace("train.py", "generated_1.py")
    open_doc(client, skipped, LOAD)
    open_doc(client, uri, LOAD)
    assert codes((await published(client, uri)).diagnostics) == ["TDR602"]
    assert (await published(client, skipped)).diagnostics == []
