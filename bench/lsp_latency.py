"""Latency of the language server as an editor sees it: didChange -> publishDiagnostics.

A real LSP client talks to ``python -m torchdoctor server`` over stdio, opens generated
~1,000-line and ~10,000-line PyTorch training files, makes small edits one at a time with
``debounceMs: 0`` and waits for the diagnostics of each new version: one character typed inside
a row, then rows added near the top (every statement below moves); then asks for the quick
fixes of a finding (the server builds fixes when asked). The files are dense with findings of
the default rules (one every 12 rows, half of them with a fix) or sparse (one every 20); the
counts ``torchdoctor check`` gives on each are printed. Prints p50/p95 per file, the server's
resident memory, and the same with 100 documents open. When ``fixit`` is importable (or
``--fixit-python`` names a Python that has ``fixit[lsp]``), ``fixit lsp`` runs through the same
steps for comparison.

Goals: p50 <= 30 ms on the dense 1,000-line file (issue #15), <= 250 ms on 10,000 lines;
<= 150 MB RSS with 100 documents open (issue #4), measured in a fresh server.

    python bench/lsp_latency.py [--edits 30] [--docs 100] [--densities dense,sparse]
                                [--fixit-python PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import statistics
import subprocess
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
            {a_fixable}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            # step {i}
            h = self.fc2(F.gelu(self.fc1(self.norm(x))))
            return x + self.drop(h)


    def train_{i}(model, loader, optimizer, device, epochs=2):
        model.train()
        {b_fixable}
        for epoch in range(epochs):
            {a_other}
            for x, y in loader:
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad(set_to_none=True)
                loss = F.mse_loss(step(x), y)
                loss.backward()
                optimizer.step()
        torch.save(model.state_dict(), "block{i}.pt")
        return torch.load("block{i}.pt", map_location="cpu")


    def evaluate_{i}(model, loader, device):
        model.eval()
        total = 0.0
        with torch.no_grad():
            for x, y in loader:
                total += F.mse_loss(model(x.to(device)), y.to(device)).item()
        return total / max(len(loader), 1)


    def solve_{i}(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Least squares for block {i}."""
        {b_other}

    '''
)
# Rows of the block that hold a finding of a default rule, or the same row without one: two pairs
# of a finding with a fix and one without (TDR802 and TDR201; TDR401, a safe fix, and TDR801).
SLOTS = {
    "a_fixable": ("self.fc2.bias.require_grad = False", "self.fc2.bias.requires_grad_(True)"),
    "a_other": ("step = torch.compile(model)", "step = model"),
    "b_fixable": (
        "scaler = torch.cuda.amp.GradScaler(enabled=False)",
        'scaler = torch.amp.GradScaler("cuda", enabled=False)',
    ),
    "b_other": ("return torch.solve(b, a).solution", "return torch.linalg.solve(a, b)"),
}
FIXABLE = ("TDR802", "TDR401")  # the codes of the ``*_fixable`` rows
HEAD = (
    '"""Generated training script."""\n\nimport torch\nimport torch.nn as nn\n'
    "import torch.nn.functional as F\nfrom torch.utils.data import DataLoader, TensorDataset\n"
)
# One finding every this many rows: "dense" and "sparse" files (issue #15).
DENSITIES = {"dense": 12, "sparse": 20}


def generate(lines: int, every: int = DENSITIES["dense"]) -> str:
    """A training script of about ``lines`` rows with one finding every ``every`` rows, half of
    them with a fix. Each block of the script has two pairs of rows that hold a finding (one
    with a fix, one without) or not; a pair holds them while the findings so far stay within
    one every ``every`` rows of the text up to the block's end."""
    parts = [HEAD]
    count, i, pairs = HEAD.count("\n"), 0, 0
    size = BLOCK.format(i=0, **{k: v[1] for k, v in SLOTS.items()}).count("\n")
    while count < lines:
        values = {}
        for pair in ("a", "b"):
            on = (pairs + 1) * 2 * every <= count + size
            pairs += on
            for slot in (f"{pair}_fixable", f"{pair}_other"):
                values[slot] = SLOTS[slot][0 if on else 1]
        block = BLOCK.format(i=i, **values)
        parts.append(block)
        count += block.count("\n")
        i += 1
    return "".join(parts)


def cli_findings(text: str) -> tuple[int, int]:
    """How many findings ``torchdoctor check`` (the default rules) reports on ``text``, and how
    many of them have a fix."""
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "torchdoctor", "check", "-", "--stdin-filename", "bench.py"),
            *("--output-format", "json", "--exit-zero", "--no-cache"),
        ],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(proc.stdout)
    return len(found), sum(1 for f in found if f.get("fix"))


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
    diagnostics: dict[str, list[types.Diagnostic]] = field(default_factory=dict)  # the last
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
        session.diagnostics[params.uri] = list(params.diagnostics)
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
                    ),
                    # As VS Code: fix-all actions get their edits when resolved.
                    code_action=types.CodeActionClientCapabilities(
                        code_action_literal_support=types.ClientCodeActionLiteralOptions(
                            code_action_kind=types.ClientCodeActionKindOptions(
                                value_set=["", "quickfix", "source", "source.fixAll"]
                            )
                        ),
                        data_support=True,
                        resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"]),
                    ),
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


def close_doc(session: Session, uri: str) -> None:
    session.client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
    )


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


async def quick_fix_latency(session: Session, uri: str) -> tuple[float, float]:
    """ms of a ``textDocument/codeAction`` (quick fixes) for the last diagnostic published for
    ``uri`` of a finding with a fix, twice: the server builds the fixes for the first, on
    request (a server that publishes them with the diagnostics has them already)."""
    published = session.diagnostics.get(uri, [])
    target = next((d for d in reversed(published) if d.code in FIXABLE), None)
    if target is None:
        return float("nan"), float("nan")
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=target.range,
        context=types.CodeActionContext(diagnostics=[target], only=["quickfix"]),
    )
    out = []
    for _ in range(2):
        start = time.perf_counter()
        await session.client.text_document_code_action_async(params)
        out.append((time.perf_counter() - start) * 1000)
    return out[0], out[1]


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
        for density in args.densities:
            every = DENSITIES[density]
            for lines in sizes:
                text = generate(lines, every)
                uri = f"file:///bench/train_{density}_{lines}.py"
                total, fixable = cli_findings(text)
                print(
                    f"{density} file, {text.count(chr(10))} lines: `torchdoctor check` finds "
                    f"{total} (one every {text.count(chr(10)) / max(total, 1):.1f} rows), "
                    f"{fixable} with a fix"
                )
                since = len(session.published.get(uri, []))
                opened = time.perf_counter()
                open_doc(session, uri, text)
                first = await wait_publish(session, uri, 1, since)
                findings = session.published[uri][-1][2]
                cpu = session.cpu_s()
                result = await edit_latencies(session, uri, text, args.edits)
                cpu_per_edit = (session.cpu_s() - cpu) * 1000 / args.edits
                alone = (
                    f"   (whole check from scratch: {engine_alone(text):.1f} ms)" if engine else ""
                )
                print(
                    f"{text.count(chr(10)):6d} lines  open {1000 * (first - opened):7.1f} ms  "
                    f"{findings:4d} findings  {args.edits} edits: {summary(result)}  "
                    f"server CPU/edit {cpu_per_edit:6.1f} ms{alone}"
                )
                rows = await row_latencies(session, uri, text, args.edits, args.edits + 2)
                print(
                    f"{'':6s}        {args.edits} edits adding a row near the top: {summary(rows)}"
                )
                if engine:
                    built, again = await quick_fix_latency(session, uri)
                    print(
                        f"{'':6s}        quick fixes of a finding: {built:6.1f} ms "
                        f"(the first after the edits), {again:6.1f} ms (again)"
                    )
        opened = len(sizes) * len(args.densities)
        print(f"server RSS with {opened} documents: {session.rss_mb():6.1f} MB")
        if not many:
            return
        # A fresh server for the many documents: its memory is theirs, not what the largest
        # files above left allocated.
        await stop(session)
        session = await start(command, options)
        text = generate(1_000, DENSITIES[args.densities[0]])
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
        # What closed documents leave: all closed, then opened and closed again twice. The RSS
        # after each round stays where the first left it (memory the allocator keeps for the
        # next documents), it does not grow with the documents opened over the session.
        after = []
        for round_ in range(3):
            if round_:
                seen = {uri: len(session.published.get(uri, [])) for uri in uris}
                for uri in uris:
                    open_doc(session, uri, text)
                for uri in uris:
                    await wait_publish(session, uri, 1, seen[uri], timeout=300)
            for uri in uris:
                close_doc(session, uri)
            await asyncio.sleep(3)  # the collector runs when the server is idle
            after.append(session.rss_mb())
        print(
            f"all {args.docs} closed (3 rounds of open and close): RSS "
            + ", ".join(f"{mb:.1f}" for mb in after)
            + " MB"
        )
    finally:
        await stop(session)


async def stop(session: Session) -> None:
    """Shut the server down (politely, then by stopping the client)."""
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
        "--densities",
        type=lambda v: [d.strip() for d in v.split(",") if d.strip()],
        default=list(DENSITIES),
        help="comma-separated: dense (a finding every 12 rows), sparse (every 20); default both",
    )
    parser.add_argument(
        "--fixit-python",
        help="A Python with `fixit[lsp]` installed (default: this one, when it has fixit).",
    )
    parser.add_argument(
        "--fixit-full",
        action="store_true",
        help="Also run fixit on the 10,000-line file and with 100 documents (slow).",
    )
    parser.add_argument(
        "--many-only",
        action="store_true",
        help="Only the many-documents part (memory with --docs open, and after closing them).",
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
        sizes=() if args.many_only else (1_000, 10_000),
    )
    if args.many_only:
        return
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
