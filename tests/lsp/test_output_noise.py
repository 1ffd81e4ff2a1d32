"""What the server writes to stderr, which editors show in their output channel next to the
``window/logMessage`` messages: no message twice, and no warning about a cancelled request
that was already answered (editors cancel those all the time)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from lsp_helpers import initialize, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

SERVER = [sys.executable, "-m", "torchdoctor", "server"]


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def messages(stdout: bytes) -> list[dict[str, Any]]:
    out = []
    while stdout:
        head, _, rest = stdout.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        out.append(json.loads(rest[:length]))
        stdout = rest[length:]
    return out


def test_stderr_repeats_no_log_message_and_ignores_late_cancels() -> None:
    uri = "file:///tmp/td_noise/a.py"
    session = b"".join(
        [
            frame({"id": 1, "method": "initialize", "params": {"capabilities": {}}}),
            frame({"method": "initialized", "params": {}}),
            frame(
                {
                    "method": "textDocument/didOpen",
                    "params": {
                        "textDocument": {
                            "uri": uri,
                            "languageId": "python",
                            "version": 1,
                            "text": 'import torch\nstate = torch.load("x")\n',
                        }
                    },
                }
            ),
            frame(
                {
                    "id": 2,
                    "method": "textDocument/hover",
                    "params": {
                        "textDocument": {"uri": uri},
                        "position": {"line": 0, "character": 0},
                    },
                }
            ),
            # Cancelling requests that have been answered (or never existed).
            frame({"method": "$/cancelRequest", "params": {"id": 1}}),
            frame({"method": "$/cancelRequest", "params": {"id": 77}}),
            frame(
                {
                    "id": 3,
                    "method": "workspace/executeCommand",
                    "params": {"command": "torchdoctor.debugInfo", "arguments": []},
                }
            ),
            frame({"id": 4, "method": "shutdown"}),
            frame({"method": "exit"}),
        ]
    )
    done = subprocess.run(SERVER, input=session, capture_output=True, timeout=120)
    replies = messages(done.stdout)
    assert any(m.get("id") == 3 and "result" in m for m in replies)
    logged = [m["params"]["message"] for m in replies if m.get("method") == "window/logMessage"]
    assert any("debug info" in m for m in logged)
    stderr = done.stderr.decode()
    assert "Cancel notification for unknown message id" not in stderr
    for message in logged:
        assert message.splitlines()[0] not in stderr, message


@lsp_client()
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_a_configuration_change_that_changes_nothing_reloads_nothing(
    client: LanguageClient,
) -> None:
    """VS Code sends ``didChangeConfiguration`` as soon as the server registers for it: with the
    settings as they were, nothing is reloaded, logged or checked again."""
    client.set_configuration({"ignore": ["TDR405"]}, section="torchdoctor")
    await initialize(client)
    uri = "file:///tmp/td_noise/b.py"
    open_doc(client, uri, 'import torch\nstate = torch.load("x")\n')
    await published(client, uri, version=1)
    await asyncio.sleep(0.3)
    mark, logs = len(client.published), len(client.log_messages)  # type: ignore[attr-defined]
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchdoctor.debugInfo", arguments=[])
    )
    assert result["clientSettings"]["ignore"] == ["TDR405"]
    await asyncio.sleep(0.5)
    assert [m.message for m in client.log_messages[logs:] if "reloaded" in m.message] == []
    assert client.published[mark:] == []  # type: ignore[attr-defined]
    # A real change still reloads.
    client.set_configuration({"ignore": ["TDR602"]}, section="torchdoctor")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    after = await published(client, uri, after=mark)
    assert [d.code for d in after.diagnostics] == []
