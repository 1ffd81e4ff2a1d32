"""The kernel bridge in the language server: a real ipykernel, a notebook opened over LSP
notebook sync, cells run in the kernel the way a user runs them, live findings and hovers."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsp_helpers import SERVER, codes, initialize, make_client, open_notebook, wait_until
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")
pytest.importorskip("torch")

LIVE = pytest.mark.asyncio(loop_scope="module")

SETUP = "import torch\na = torch.randn(4, 6)\nb = a.t()"
CELLS = [SETUP, "flat = b.view(-1)\nok = a.view(2, -1)"]


class Kernel:
    """An ipykernel in a private runtime dir, and the user's client that runs cells in it."""

    def __init__(self, runtime: Path, notebook: Path) -> None:
        from jupyter_client import KernelManager

        self.km = KernelManager(
            kernel_name="python3", connection_file=str(runtime / "kernel-lsp-test.json")
        )
        env = dict(os.environ, PYTHONWARNINGS="ignore", JPY_SESSION_NAME=str(notebook))
        self.km.start_kernel(env=env)
        self.user = self.km.client()
        self.user.start_channels()
        self.user.wait_for_ready(timeout=60)

    @property
    def connection_file(self) -> str:
        return str(self.km.connection_file)

    def run(self, code: str) -> int:
        reply = self.user.execute_interactive(code, timeout=60, output_hook=lambda m: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        return int(reply["content"]["execution_count"])

    def subshells(self) -> list[str]:
        """The kernel's subshells (each bridge that connects makes one for its probes)."""
        msg = self.user.session.msg("list_subshell_request", {})
        self.user.control_channel.send(msg)
        while True:
            reply = self.user.control_channel.get_msg(timeout=10)
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                return sorted(reply["content"]["subshell_id"])

    def close(self) -> None:
        self.user.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runtime")


@pytest.fixture(scope="module")
def kernel(runtime: Path) -> Iterator[Kernel]:
    k = Kernel(runtime, runtime / "found.ipynb")
    try:
        yield k
    finally:
        k.close()


async def start_server(runtime: Path, **options: Any) -> LanguageClient:
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime))
    config = ClientServerConfig(server_command=SERVER, client_factory=make_client, server_env=env)
    client = await config.start(devtools=None)
    await initialize(client, options=options)
    return client


async def stop_server(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()


def open_cells(client: LanguageClient, path: Path, cells: list[str]) -> list[str]:
    """Open a notebook at ``path`` with these code cells; their URIs as VS Code spells them."""
    uris = [f"vscode-notebook-cell:{path}#W{i}sZmlsZQ%3D%3D" for i in range(len(cells))]
    open_notebook(client, path.as_uri(), list(zip(uris, cells, strict=True)))
    return uris


async def hover_text(client: LanguageClient, uri: str, line: int, col: int) -> str:
    result = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, col),
        )
    )
    if result is None:
        return ""
    assert isinstance(result.contents, types.MarkupContent)
    return result.contents.value


async def debug_info(client: LanguageClient) -> dict[str, Any]:
    info = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="torchdoctor.debugInfo", arguments=[])
    )
    assert isinstance(info, dict)
    return info


async def until_attached(client: LanguageClient) -> None:
    """Wait until the server has connected to the notebook's kernel."""
    for _ in range(300):
        if (await debug_info(client))["kernelBridge"]["notebooksWithKernel"]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the server did not connect to the kernel")


def live(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    return [d for d in client.diagnostics.get(uri, []) if str(d.code).startswith("TDR9")]


async def ready(client: LanguageClient, kernel: Kernel, runtime: Path) -> str:
    """The notebook open in ``client``, its first cell run, the live finding published: the
    second cell's URI."""
    path = runtime / "explicit.ipynb"
    if not getattr(client, "opened", False):
        open_cells(client, path, CELLS)
        client.opened = True  # type: ignore[attr-defined]
    kernel.run(SETUP)
    uri = f"vscode-notebook-cell:{path}#W1sZmlsZQ%3D%3D"
    await wait_until(lambda: live(client, uri))
    return uri


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def client(runtime: Path, kernel: Kernel) -> AsyncIterator[LanguageClient]:
    c = await start_server(runtime, kernelConnectionFile=kernel.connection_file)
    yield c
    await stop_server(c)


@LIVE
async def test_running_a_cell_publishes_a_live_view_finding(
    client: LanguageClient, kernel: Kernel, runtime: Path
) -> None:
    _setup, use = open_cells(client, runtime / "explicit.ipynb", CELLS)
    client.opened = True  # type: ignore[attr-defined]
    # Statically, `b.view(-1)` on `b = a.t()` likely fails (TDR101); nothing runs yet.
    await wait_until(lambda: use in client.diagnostics)
    assert codes(client.diagnostics[use]) == ["TDR101"]
    await until_attached(client)
    count = kernel.run(SETUP)  # the user runs the first cell
    [finding] = await wait_until(lambda: live(client, use))
    assert finding.code == "TDR901"
    assert finding.range == types.Range(types.Position(0, 7), types.Position(0, 17))
    assert "live" in finding.message.lower() and f"In [{count}]" in finding.message
    assert "view size is not compatible" in finding.message
    # The same call is not reported twice: the live finding replaces TDR101 there.
    assert codes(client.diagnostics[use]) == ["TDR901"]
    assert finding.data["fixes"][0]["edits"] == [{"range": [0, 9, 0, 13], "newText": "reshape"}]


@LIVE
async def test_hover_shows_the_live_tensor(
    client: LanguageClient, kernel: Kernel, runtime: Path
) -> None:
    uri = await ready(client, kernel, runtime)
    count = kernel.run("c = torch.zeros(3, 5, dtype=torch.float64)")
    text = await hover_text(client, uri, 1, 5)  # `a` in `ok = a.view(2, -1)`
    assert "`a` live" in text and "`Tensor(4, 6)` · `float32` · `cpu`" in text
    assert "strides: `(6, 1)`" in text and f"(after In [{count}])" in text
    # On the failing view: the rule's hover and the tensor's facts together.
    both = await hover_text(client, uri, 0, 7)
    assert "TDR901" in both and "`b` live" in both and "strides: `(1, 6)`" in both
    assert await hover_text(client, uri, 0, 0) == ""  # `flat` is not defined in the kernel


@LIVE
async def test_busy_kernel_does_not_block_a_hover(
    client: LanguageClient, kernel: Kernel, runtime: Path
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the busy cell holds the GIL through libc's sleep")
    uri = await ready(client, kernel, runtime)
    assert "`a` live" in await hover_text(client, uri, 1, 5)
    # A cell that holds the GIL: even a kernel subshell cannot answer while it runs.
    msg_id = kernel.user.execute("import ctypes\nctypes.PyDLL(None).sleep(6)")
    # Hovers answer (with facts until the cell has taken the GIL, then "kernel busy") while
    # the cell still runs.
    text = ""
    while "kernel busy" not in text and not kernel.user.shell_channel.msg_ready():
        text = await hover_text(client, uri, 1, 5)
    still_running = not kernel.user.shell_channel.msg_ready()
    reply = kernel.user.get_shell_msg(timeout=60)
    assert reply["parent_header"]["msg_id"] == msg_id, reply
    assert still_running
    assert "kernel busy" in text
    assert "`a` live" in await hover_text(client, uri, 1, 5)  # answers again once idle


@LIVE
async def test_kernel_found_through_jpy_session_name(kernel: Kernel, runtime: Path) -> None:
    kernel.run(SETUP)
    before = kernel.subshells()
    c = await start_server(runtime)  # no connection file given: look in the runtime dir
    try:
        _setup, use = open_cells(c, runtime / "found.ipynb", CELLS)
        [finding] = await wait_until(lambda: live(c, use))
        assert finding.code == "TDR901"
        # Another notebook is not matched to this kernel.
        _other_setup, other = open_cells(c, runtime / "other.ipynb", CELLS)
        await wait_until(lambda: other in c.diagnostics)
        text = await hover_text(c, other, 1, 5)
        assert codes(c.diagnostics[other]) == ["TDR101"] and "live" not in text
        assert len(kernel.subshells()) == len(before) + 1  # the server's, for its probes
    finally:
        await stop_server(c)
    # A clean shutdown deleted the server's subshell in the kernel.
    assert kernel.subshells() == before


@LIVE
@pytest.mark.parametrize("options", [{"bridge": False}, {"trusted": False}])
async def test_bridge_off_or_untrusted_workspace(
    kernel: Kernel, runtime: Path, options: dict[str, Any]
) -> None:
    kernel.run(SETUP)
    c = await start_server(runtime, kernelConnectionFile=kernel.connection_file, **options)
    try:
        _setup, use = open_cells(c, runtime / "off.ipynb", CELLS)
        await wait_until(lambda: use in c.diagnostics)
        kernel.run("d = 1")
        # A hover probes the kernel at once when the bridge is on: here it says nothing live.
        text = await hover_text(c, use, 1, 5)
        assert text == ""
        assert codes(c.diagnostics[use]) == ["TDR101"]
        info = await debug_info(c)
        assert info["kernelBridge"]["notebooksWithKernel"] == 0
        assert info["kernelBridge"]["trusted"] is options.get("trusted", True)
    finally:
        await stop_server(c)


# ---- without a kernel: what the server reads from the editor ---------------------------------
@pytest.mark.parametrize(
    ("line", "col", "name"),
    [
        ("y = model.fc.weight.t()", 10, "model.fc"),
        ("y = model.fc.weight.t()", 14, "model.fc.weight"),
        ("y = model.fc.weight.t()", 4, "model"),
        ("z = f(x).shape", 10, None),
        ("for x in xs:", 1, None),
        ("n = 12", 4, None),
        ("s = 'abc'", 6, None),
        ("y = xs[0].shape", 11, None),
    ],
)
def test_name_under_the_cursor(line: str, col: int, name: str | None) -> None:
    from torchdoctor.lsp.kernels import name_at

    assert name_at(line, col) == name


@pytest.mark.parametrize(
    ("options", "trusted"),
    [
        (None, True),
        ({}, True),
        ({"trusted": True}, True),
        ({"trusted": False}, False),
        ({"trusted": "no"}, False),
        ({"torchdoctor": {"trusted": False}}, False),
    ],
)
def test_workspace_trust_from_initialization_options(options: Any, trusted: bool) -> None:
    from torchdoctor.lsp.kernels import workspace_trusted

    assert workspace_trusted(options) is trusted


def test_connection_file_setting() -> None:
    from torchdoctor.lsp.settings import parse_settings

    parsed, problems = parse_settings(
        {"kernelConnectionFile": "kernel-1.json", "bridge": False}, "test"
    )
    assert (parsed.kernel_connection_file, parsed.bridge, problems) == ("kernel-1.json", False, [])
    bad, problems = parse_settings({"kernelConnectionFile": 3}, "test")
    assert bad.kernel_connection_file is None and "kernelConnectionFile" in problems[0]
