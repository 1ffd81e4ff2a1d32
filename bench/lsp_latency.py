"""Latency of the language server as an editor sees it: didChange -> publishDiagnostics.

A real LSP client talks to ``python -m torchdoctor server`` over stdio, opens a generated
~1,000-line and a ~10,000-line PyTorch training file, makes small edits one at a time with
``debounceMs: 0`` and waits for the diagnostics of each new version: one character typed inside
a row, then rows added near the top (every statement below moves). Prints p50/p95 per file, the
server's resident memory, and the same with 100 documents open. When ``fixit`` is importable
(or ``--fixit-python`` names a Python that has ``fixit[lsp]``), ``fixit lsp`` runs through the
same steps for comparison.

Goals: p50 <= 30 ms on 1,000 lines, <= 250 ms on 10,000 lines; <= 150 MB RSS with 100 documents.

    python bench/lsp_latency.py [--edits 30] [--docs 100] [--fixit-python PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import textwrap
import time
from dataclasses import dataclass, field

import psutil
from lsprotocol import types
from pygls.lsp.client import LanguageClient

BLOCK = textwrap.dedent(
    '''
    class Block{i}(nn.Module):
        """A residual MLP block."""

        def __init__(self, dim: int, hidden: int = 4) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.fc1 = nn.Linear(dim, dim * hidden)
            self.fc2 = nn.Linear(dim * hidden, dim)
            self.drop = nn.Dropout(0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            # step {i}
            h = self.fc2(F.gelu(self.fc1(self.norm(x))))
            return x + self.drop(h)


    def train_{i}(model, loader, optimizer, device, epochs=2):
        model.train()
        for epoch in range(epochs):
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = F.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
        torch.save(model.state_dict(), "block{i}.pt")
        return torch.load("block{i}.pt")


    def evaluate_{i}(model, loader, device):
        model.eval()
        total = 0.0
        with torch.no_grad():
            for x, y in loader:
                total += F.mse_loss(model(x.to(device)), y.to(device)).item()
        return total / max(len(loader), 1)

    '''
)
HEAD = (
    '"""Generated training script."""\n\nimport torch\nimport torch.nn as nn\n'
    "import torch.nn.functional as F\nfrom torch.utils.data import DataLoader, TensorDataset\n"
)


def generate(lines: int) -> str:
    parts = [HEAD]
    count, i = HEAD.count("\n"), 0
    while count < lines:
        block = BLOCK.format(i=i)
        parts.append(block)
        count += block.count("\n")
        i += 1
    return "".join(parts)


def edit_points(text: str) -> list[tuple[int, int]]:
    """(line, column) just after the `0.1` of every `nn.Dropout(0.1)`: typing a digit there
    changes the code (the server must re-analyse) and keeps it valid."""
    return [
        (n, line.index("0.1)") + 3)
        for n, line in enumerate(text.split("\n"))
        if "nn.Dropout(0.1)" in line
    ]


@dataclass
class Session:
    client: LanguageClient
    published: dict[str, list[tuple[float, int | None, int]]] = field(default_factory=dict)
    waiters: dict[str, asyncio.Event] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.client._server.pid  # type: ignore[union-attr]

    def cpu_s(self) -> float:
        """CPU seconds the server has used so far (less sensitive to a busy machine than wall
        time)."""
        proc = psutil.Process(self.pid)
        times = [p.cpu_times() for p in [proc, *proc.children(recursive=True)]]
        return sum(t.user + t.system for t in times)

    def rss_mb(self) -> float:
        proc = psutil.Process(self.pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


async def start(command: list[str], options: dict[str, object]) -> Session:
    client = LanguageClient("bench", "1")
    session = Session(client)

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: types.PublishDiagnosticsParams) -> None:
        session.published.setdefault(params.uri, []).append(
            (time.perf_counter(), params.version, len(params.diagnostics))
        )
        event = session.waiters.get(params.uri)
        if event is not None:
            event.set()

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        pass

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def on_configuration(params: types.ConfigurationParams) -> list[object]:
        return [None for _ in params.items]

    await client.start_io(*command)
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                text_document=types.TextDocumentClientCapabilities(
                    publish_diagnostics=types.PublishDiagnosticsClientCapabilities(
                        version_support=True
                    )
                )
            ),
            initialization_options=options,
        )
    )
    client.initialized(types.InitializedParams())
    return session


async def wait_publish(
    session: Session, uri: str, version: int, since: int, timeout: float = 60
) -> float:
    """Time of the first publish for ``uri`` after index ``since`` (of ``version`` if given)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for when, got, _n in session.published.get(uri, [])[since:]:
            if got is None or got == version:
                return when
        event = session.waiters.setdefault(uri, asyncio.Event())
        event.clear()
        try:
            await asyncio.wait_for(event.wait(), max(0.0, deadline - time.perf_counter()))
        except asyncio.TimeoutError:
            break
    raise TimeoutError(f"no diagnostics for {uri} version {version}")


def open_doc(session: Session, uri: str, text: str) -> None:
    session.client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
    )


async def timed_insert(
    session: Session, uri: str, version: int, line: int, col: int, text: str
) -> float:
    """Insert ``text`` at (line, col) as ``version`` and return the ms until its publish."""
    since = len(session.published.get(uri, []))
    sent = time.perf_counter()
    at = types.Position(line, col)
    session.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)],
        )
    )
    received = await wait_publish(session, uri, version, since)
    return (received - sent) * 1000


async def edit_latencies(session: Session, uri: str, text: str, edits: int) -> list[float]:
    """Make ``edits`` one-character code edits and time the publish of each new version."""
    rows = edit_points(text)
    out = []
    for n in range(edits):
        line, col = rows[(n * 7) % len(rows)]
        out.append(await timed_insert(session, uri, n + 2, line, col, "1"))
        # Keep our copy of the columns in step with the document.
        rows = [(r, c + 1) if r == line else (r, c) for r, c in rows]
    return out


async def row_latencies(
    session: Session, uri: str, text: str, edits: int, first: int
) -> list[float]:
    """Make ``edits`` edits that each add a row near the top of the file (an empty row before
    the first ``nn.Dropout`` row) and time the publish of each new version: every statement
    below moves down a row."""
    line, _ = edit_points(text)[0]
    return [await timed_insert(session, uri, first + n, line, 0, "\n") for n in range(edits)]


def engine_alone(text: str, runs: int = 5) -> float:
    """Median time of the engine's check of the whole of ``text`` from scratch in this process
    (no server, nothing reused from an earlier version), in ms."""
    from torchdoctor.linter.runner import check_text

    check_text(text, "bench.py")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        check_text(text, "bench.py")
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {p50:7.1f} ms   p95 {p95:7.1f} ms"


async def run(
    name: str,
    command: list[str],
    options: dict[str, object],
    args: argparse.Namespace,
    *,
    sizes: tuple[int, ...] = (1_000, 10_000),
    many: bool = True,
    engine: bool = True,
) -> None:
    print(f"== {name}: {' '.join(command)}")
    session = await start(command, options)
    try:
        for lines in sizes:
            text = generate(lines)
            uri = f"file:///bench/train_{lines}.py"
            since = len(session.published.get(uri, []))
            opened = time.perf_counter()
            open_doc(session, uri, text)
            first = await wait_publish(session, uri, 1, since)
            findings = session.published[uri][-1][2]
            cpu = session.cpu_s()
            result = await edit_latencies(session, uri, text, args.edits)
            cpu_per_edit = (session.cpu_s() - cpu) * 1000 / args.edits
            alone = f"   (whole check from scratch: {engine_alone(text):.1f} ms)" if engine else ""
            print(
                f"{text.count(chr(10)):6d} lines  open {1000 * (first - opened):7.1f} ms  "
                f"{findings:4d} findings  {args.edits} edits: {summary(result)}  "
                f"server CPU/edit {cpu_per_edit:6.1f} ms{alone}"
            )
            rows = await row_latencies(session, uri, text, args.edits, args.edits + 2)
            print(f"{'':6s}        {args.edits} edits adding a row near the top: {summary(rows)}")
        print(f"server RSS with {len(sizes)} documents: {session.rss_mb():6.1f} MB")
        if not many:
            return
        text = generate(1_000)
        uris = [f"file:///bench/many/doc_{i}.py" for i in range(args.docs)]
        for uri in uris:
            open_doc(session, uri, text)
        for uri in uris:
            await wait_publish(session, uri, 1, 0, timeout=300)
        result = await edit_latencies(session, uris[0], text, args.edits)
        print(
            f"{args.docs} documents of {text.count(chr(10))} lines open: RSS "
            f"{session.rss_mb():6.1f} MB; {args.edits} edits: {summary(result)}"
        )
    finally:
        try:
            await asyncio.wait_for(session.client.shutdown_async(None), 10)
            session.client.exit(None)
        except Exception:
            pass
        await session.client.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edits", type=int, default=30)
    parser.add_argument("--docs", type=int, default=100)
    parser.add_argument(
        "--fixit-python",
        help="A Python with `fixit[lsp]` installed (default: this one, when it has fixit).",
    )
    parser.add_argument(
        "--fixit-full",
        action="store_true",
        help="Also run fixit on the 10,000-line file and with 100 documents (slow).",
    )
    args = parser.parse_args()
    print(
        f"load average: {', '.join(f'{v:.1f}' for v in psutil.getloadavg())} on {psutil.cpu_count()} CPUs"
    )
    await run(
        "torchdoctor",
        [sys.executable, "-m", "torchdoctor", "server"],
        {"debounceMs": 0, "logLevel": "error"},
        args,
    )
    fixit_python = args.fixit_python
    if fixit_python is None and importlib.util.find_spec("fixit") is not None:
        fixit_python = sys.executable
    if fixit_python:
        command = [fixit_python, "-m", "fixit", "lsp", "--debounce-interval", "0"]
        # fixit re-parses with libcst on every change: by default only the 1,000-line file.
        full = args.fixit_full
        sizes = (1_000, 10_000) if full else (1_000,)
        await run("fixit", command, {}, args, sizes=sizes, many=full, engine=False)
    else:
        print("fixit is not installed here: no side-by-side figures (pip install 'fixit[lsp]')")


if __name__ == "__main__":
    asyncio.run(main())
