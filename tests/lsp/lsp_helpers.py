"""Shared helpers: a pytest-lsp client that records every publish (with its version) and the
edits the server asks it to apply, started against `python -m torchdoctor server` over stdio."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
from typing import Any, Union

import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

SERVER = [sys.executable, "-m", "torchdoctor", "server"]
TIMEOUT = 15.0


def _publish(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)  # type: ignore[attr-defined]


def _apply_edit(
    client: LanguageClient, params: types.ApplyWorkspaceEditParams
) -> types.ApplyWorkspaceEditResult:
    client.applied_edits.append(params)  # type: ignore[attr-defined]
    return types.ApplyWorkspaceEditResult(applied=True)


def _register(client: LanguageClient, params: types.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)  # type: ignore[attr-defined]


def _converter() -> Any:
    """pygls' converter, reading a code action that carries a command as a CodeAction (the stock
    hook takes any object with a `command` key for a bare Command)."""
    converter = default_converter()

    def code_action_or_command(obj: Any, _: type) -> types.Command | types.CodeAction:
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(
        Union[types.Command, types.CodeAction],  # noqa: UP007 - the exact type lsprotocol uses
        code_action_or_command,
    )
    return converter


def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=_converter)
    client.published = []  # type: ignore[attr-defined]
    client.applied_edits = []  # type: ignore[attr-defined]
    client.registrations = []  # type: ignore[attr-defined]
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _publish
    features[types.WORKSPACE_APPLY_EDIT] = _apply_edit
    features[types.CLIENT_REGISTER_CAPABILITY] = _register
    register_lsp_features(client, features)
    return client


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=make_client)


def lsp_client(**kwargs: Any) -> Callable[..., Any]:
    """A pytest-lsp fixture decorator using the recording client."""
    return pytest_lsp.fixture(config=CONFIG, **kwargs)


def capabilities(
    *, pull: bool = False, resolve: bool = True, notebooks: bool = True
) -> types.ClientCapabilities:
    """Capabilities of an editor like VS Code, with pull diagnostics on or off."""
    return types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            configuration=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True),
            did_change_configuration=types.DidChangeConfigurationClientCapabilities(
                dynamic_registration=True
            ),
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=True
            ),
            diagnostics=types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
            if pull
            else None,
        ),
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(),
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
                related_information=True,
                version_support=True,
                code_description_support=True,
                data_support=True,
                tag_support=types.ClientDiagnosticsTagOptions(
                    value_set=[types.DiagnosticTag.Unnecessary, types.DiagnosticTag.Deprecated]
                ),
            ),
            diagnostic=types.DiagnosticClientCapabilities() if pull else None,
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
            code_action=types.CodeActionClientCapabilities(
                code_action_literal_support=types.ClientCodeActionLiteralOptions(
                    code_action_kind=types.ClientCodeActionKindOptions(
                        value_set=["", "quickfix", "source", "source.fixAll", "notebook"]
                    )
                ),
                is_preferred_support=True,
                data_support=True,
                resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])
                if resolve
                else None,
            ),
        ),
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities()
        )
        if notebooks
        else None,
        window=types.WindowClientCapabilities(
            show_document=types.ShowDocumentClientCapabilities(support=True)
        ),
    )


async def initialize(
    client: LanguageClient,
    *,
    options: dict[str, Any] | None = None,
    locale: str | None = None,
    root_uri: str | None = None,
    pull: bool = False,
    resolve: bool = True,
) -> types.InitializeResult:
    folders = [types.WorkspaceFolder(uri=root_uri, name="root")] if root_uri else None
    return await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities(pull=pull, resolve=resolve),
            initialization_options={"debounceMs": 0, **(options or {})},
            locale=locale,
            root_uri=root_uri,
            workspace_folders=folders,
        )
    )


async def wait_until(predicate: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    """Poll until ``predicate()`` is truthy; its value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the server")
        await asyncio.sleep(0.02)


async def published(
    client: LanguageClient, uri: str, version: int | None = None, after: int = 0
) -> types.PublishDiagnosticsParams:
    """The first publish for ``uri`` (of ``version`` when given) after index ``after``."""

    def find() -> types.PublishDiagnosticsParams | None:
        for p in client.published[after:]:  # type: ignore[attr-defined]
            if p.uri == uri and (version is None or p.version == version):
                return p
        return None

    return await wait_until(find)


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )


def change(
    client: LanguageClient,
    uri: str,
    version: int,
    start: tuple[int, int],
    end: tuple[int, int],
    text: str,
) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(*start), types.Position(*end)), text=text
                )
            ],
        )
    )


def open_notebook(client: LanguageClient, uri: str, cells: list[tuple[str, str]]) -> None:
    """notebookDocument/didOpen of a notebook of code cells: (cell URI, text) pairs."""
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(kind=types.NotebookCellKind.Code, document=c)
                    for c, _ in cells
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri=c, language_id="python", version=1, text=text)
                for c, text in cells
            ],
        )
    )


def codes(diagnostics: Any) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


# ---- the editor's side of the text ------------------------------------------------------------
_EOL = re.compile(r"\r\n|\r|\n")


def editor_lines(text: str) -> list[str]:
    """The document's lines as an LSP client counts them (``\\n``, ``\\r\\n``, ``\\r`` only),
    without their line endings."""
    return _EOL.split(text)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def editor_offset(text: str, pos: types.Position) -> int:
    """The code-point offset of an LSP position (UTF-16 columns) as an editor resolves it: a
    column past the end of its line is the line's end, a line past the last is the text's end."""
    offset = 0
    for i, m in enumerate(re.finditer(r"([^\r\n]*)(\r\n|\r|\n|$)", text)):
        if i == pos.line:
            line, units = m.group(1), 0
            for j, ch in enumerate(line):
                if units >= pos.character:
                    return offset + j
                units += utf16_len(ch)
            return offset + len(line)
        offset = m.end()
        if not m.group(2):
            break
    return len(text)


def apply_editor_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP text edits (all against ``text``) as an editor does."""
    spans = sorted(
        (
            (editor_offset(text, e.range.start), editor_offset(text, e.range.end), e.new_text)
            for e in edits
        ),
        reverse=True,
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


async def fixes_of(
    client: LanguageClient, uri: str, diagnostic: types.Diagnostic
) -> list[tuple[types.CodeAction, int | None, list[types.TextEdit]]]:
    """The fixes the server offers for one diagnostic (built when asked for: a text document's
    diagnostics do not carry them): each quick-fix action with an edit, the document version
    that edit names, and its edits in ``uri``."""
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostic.range,
            context=types.CodeActionContext(diagnostics=[diagnostic], only=["quickfix"]),
        )
    )
    out = []
    for action in result or []:
        if not isinstance(action, types.CodeAction) or action.edit is None:
            continue
        if action.title.startswith("Disable ") or action.title.startswith("在此行禁用"):
            continue
        for item in action.edit.document_changes or []:
            if isinstance(item, types.TextDocumentEdit) and item.text_document.uri == uri:
                edits = [e for e in item.edits if isinstance(e, types.TextEdit)]
                out.append((action, item.text_document.version, edits))
        for target, edits in (action.edit.changes or {}).items():
            if target == uri:
                out.append((action, None, list(edits)))
    return out
