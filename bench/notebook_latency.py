"""Latency of a notebook's underlines as JupyterLab sees it: a keystroke in one cell ->
``publishDiagnostics`` of that cell, in a small notebook and in a large one.

A client speaks LSP over stdio to ``python -m torchdoctor server`` exactly as the JupyterLab
extension does (jupyterlab-ext/src/client.ts and notebookSync.ts): the same capabilities and
``clientInfo`` (the server then puts every fix into the diagnostics' data), the server's default
settings (``debounceMs`` included), ``notebookDocument/didOpen`` with every code cell, and for
each keystroke a ``notebookDocument/didChange`` with the whole text of the edited cell. One
character is typed into a cell in the middle of the notebook, then deleted, ``--edits`` times;
each time the clock runs from the message sent to the first publish of that cell's new version.
Prints p50/p95 per notebook size, the number of ``publishDiagnostics`` per keystroke (each one
makes the JupyterLab extension update that cell, and the panel once per burst), and the ratio of
the large notebook's p50 to the small one's (goal: <= 2).

    python bench/notebook_latency.py [--cells 12,302] [--edits 20] [--server "torchdoctor server"]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

CELL_KINDS = [
    textwrap.dedent(
        """\
        class Block{i}(nn.Module):
            def __init__(self, dim: int) -> None:
                super().__init__()
                self.fc = nn.Linear(dim, dim)
                self.drop = nn.Dropout(0.1)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x + self.drop(F.gelu(self.fc(x)))"""
    ),
    textwrap.dedent(
        """\
        model_{i} = Block{j}(64).to(device)
        optimizer_{i} = torch.optim.AdamW(model_{i}.parameters(), lr=1e-3)
        for step in range(10):
            batch = torch.randn(32, 64, device=device)
            loss = model_{i}(batch).pow(2).mean()
            optimizer_{i}.zero_grad()
            loss.backward()
            optimizer_{i}.step()
            total_{i} = loss"""
    ),
    textwrap.dedent(
        """\
        state_{i} = torch.load("checkpoint_{i}.pt")
        model_{i}.load_state_dict(state_{i})
        model_{i}.eval()
        with torch.no_grad():
            out_{i} = model_{i}(torch.randn(4, 64, device=device))
        print(out_{i}.t().view(-1).shape)"""
    ),
    "x_{i} = torch.randn(128, 64)\ny_{i} = x_{i}.t()\ny_{i}.shape",
]
HEADER = (
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
    'device = "cuda" if torch.cuda.is_available() else "cpu"'
)


def cells_of(count: int) -> list[str]:
    """``count`` code cells of a training notebook: imports, blocks, training, evaluation."""
    out = [HEADER]
    for i in range(1, count):
        kind = CELL_KINDS[i % len(CELL_KINDS)]
        out.append(kind.format(i=i, j=max(1, i - (i % len(CELL_KINDS)))))
    return out


class Client:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.published: dict[str, list[tuple[float, int | None]]] = {}
        self.event = asyncio.Event()
        self.reader = asyncio.ensure_future(self.read())

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        self.send({"id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(future, 120)

    async def read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            length = None
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    return
                if not line.strip():
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None
            message = json.loads(await self.proc.stdout.readexactly(length))
            if "id" in message and "method" in message:  # a request of the server
                items = (message.get("params") or {}).get("items")
                result = [None] * len(items) if isinstance(items, list) else None
                self.send({"id": message["id"], "result": result})
            elif "id" in message:
                future = self.waiting.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message.get("result"))
            elif message.get("method") == "textDocument/publishDiagnostics":
                params = message["params"]
                self.published.setdefault(params["uri"], []).append(
                    (time.perf_counter(), params.get("version"))
                )
                self.event.set()

    async def published_after(self, uri: str, version: int, since: int) -> float:
        deadline = time.perf_counter() + 120
        while time.perf_counter() < deadline:
            for when, got in self.published.get(uri, [])[since:]:
                if got is None or got == version:
                    return when
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), deadline - time.perf_counter())
            except TimeoutError:
                break
        raise TimeoutError(f"no diagnostics for {uri} version {version}")


def capabilities() -> dict[str, Any]:
    """The JupyterLab extension's client capabilities (jupyterlab-ext/src/client.ts)."""
    return {
        "general": {"positionEncodings": ["utf-16"]},
        "textDocument": {
            "synchronization": {"dynamicRegistration": False, "didSave": False},
            "publishDiagnostics": {
                "relatedInformation": True,
                "codeDescriptionSupport": True,
                "dataSupport": True,
                "versionSupport": True,
            },
            "codeAction": {
                "dynamicRegistration": False,
                "dataSupport": True,
                "resolveSupport": {"properties": ["edit"]},
                "codeActionLiteralSupport": {
                    "codeActionKind": {"valueSet": ["quickfix", "source", "source.fixAll"]}
                },
            },
            "hover": {"contentFormat": ["markdown", "plaintext"]},
        },
        "workspace": {
            "configuration": True,
            "applyEdit": True,
            "workspaceEdit": {"documentChanges": False},
            "didChangeConfiguration": {"dynamicRegistration": False},
        },
        "notebookDocument": {
            "synchronization": {"dynamicRegistration": False, "executionSummarySupport": False}
        },
    }


async def measure(server: list[str], count: int, edits: int, root: Path) -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        *server,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=root,
    )
    client = Client(proc)
    try:
        await client.request(
            "initialize",
            {
                "processId": None,
                "clientInfo": {"name": "jupyterlab-torchdoctor", "version": "0.1.0"},
                "rootUri": root.as_uri(),
                "workspaceFolders": [{"uri": root.as_uri(), "name": "jupyter"}],
                "capabilities": capabilities(),
                "initializationOptions": {},
            },
        )
        client.notify("initialized", {})
        path = root / f"notebook-{count}.ipynb"
        cells = cells_of(count)
        uris = [f"vscode-notebook-cell:{path}#cell-{i}" for i in range(count)]
        client.notify(
            "notebookDocument/didOpen",
            {
                "notebookDocument": {
                    "uri": path.as_uri(),
                    "notebookType": "jupyter-notebook",
                    "version": 1,
                    "cells": [{"kind": 2, "document": uri} for uri in uris],
                },
                "cellTextDocuments": [
                    {"uri": uri, "languageId": "python", "version": 1, "text": text}
                    for uri, text in zip(uris, cells, strict=True)
                ],
            },
        )
        target = count // 2
        uri = uris[target]
        await client.published_after(uri, 1, 0)  # the first check of the whole notebook
        notebook_version, version = 1, 1
        base = cells[target]
        latencies = []
        total = sum(len(v) for v in client.published.values())
        for n in range(edits * 2):
            text = base + "  # x" if n % 2 == 0 else base  # a character typed, then deleted
            version += 1
            notebook_version += 1
            since = len(client.published.get(uri, []))
            start = time.perf_counter()
            client.notify(
                "notebookDocument/didChange",
                {
                    "notebookDocument": {"uri": path.as_uri(), "version": notebook_version},
                    "change": {
                        "cells": {
                            "textContent": [
                                {
                                    "document": {"uri": uri, "version": version},
                                    "changes": [{"text": text}],
                                }
                            ]
                        }
                    },
                },
            )
            done = await client.published_after(uri, version, since)
            latencies.append((done - start) * 1000)
            await asyncio.sleep(0.3)  # a pause between keystrokes: each one is checked alone
        sent = sum(len(v) for v in client.published.values()) - total
        print(f"{count:4d} cells: {sent / (edits * 2):.1f} publishDiagnostics per keystroke")
        await client.request("shutdown", None)
        client.notify("exit", None)
        await asyncio.wait_for(proc.wait(), 30)
        return latencies
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        client.reader.cancel()


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):7.1f} ms  p95 {p95:7.1f} ms  max {ordered[-1]:7.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", default="12,302", help="notebook sizes (code cells)")
    parser.add_argument("--edits", type=int, default=20, help="keystrokes typed (and deleted)")
    parser.add_argument(
        "--server",
        default=shlex.join([sys.executable, "-m", "torchdoctor", "server"]),
        help="the language server's command line",
    )
    args = parser.parse_args()
    sizes = [int(n) for n in args.cells.split(",")]
    medians = {}
    with tempfile.TemporaryDirectory() as tmp:
        for count in sizes:
            latencies = asyncio.run(measure(shlex.split(args.server), count, args.edits, Path(tmp)))
            medians[count] = statistics.median(latencies)
            lines = sum(text.count("\n") + 1 for text in cells_of(count))
            print(f"{count:4d} cells ({lines:5d} lines): {summary(latencies)}")
    if len(sizes) >= 2:
        small, large = medians[min(sizes)], medians[max(sizes)]
        print(f"large / small (p50): {large / small:.2f} (goal <= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
