"""Kernel bridge: facts about live tensors and modules in a running Jupyter kernel.

Integration note for the language server
----------------------------------------
Importing this package (and ``markdown``) needs neither ``jupyter_client`` nor torch; ``client``,
``events`` and ``discovery`` import ``jupyter_client`` lazily (extra
``torchdoctor[bridge]``) and raise :class:`BridgeError` when it is missing.

1. Find the kernel::

       from torchdoctor.bridge.discovery import find_kernel_for_notebook, resolve_connection_file
       path = find_kernel_for_notebook("/abs/path/nb.ipynb")   # or resolve_connection_file(f)

2. Connect once per kernel (thread-safe, one probe at a time; blocking: run it off the event
   loop, e.g. ``asyncio.to_thread``)::

       from torchdoctor.bridge.client import KernelBridge, KernelBusy
       bridge = KernelBridge(path, timeout=0.5)     # uses a kernel subshell when offered

3. Per document, ask only for what the live rules need, then compute findings (pure, no
   kernel)::

       from torchdoctor.linter.probing import collect_request, live_findings
       request = collect_request(text, uri_path)    # names + view shapes (collect_names: names)
       facts = bridge.probe(request)                # LiveFacts; KernelBusy -> show "kernel busy"
       findings = live_findings(text, uri_path, facts, settings=settings)

   ``text`` is Python source, or the notebook's raw JSON when the path ends with ``.ipynb``.
   Findings are ordinary :class:`~torchdoctor.core.model.Finding` objects (codes TDR901-TDR904,
   "Live (after In [N])" in the message, ``extra["execution_count"]``); publish them next to
   the static ones. The normal ``check_*`` path reports them only when given the facts
   (``check_text(..., live=facts)``); without them, no findings.

4. Hovers: ``bridge.probe([name])`` then
   ``markdown.hover_markdown(facts.get(name), locale, name=name,
   execution_count=facts.execution_count)``.

5. Re-probe when the user ran a cell::

       from torchdoctor.bridge.events import IdleWatcher
       watcher = IdleWatcher(path)
       watcher.start(lambda done: schedule_reprobe(done.execution_count))   # daemon thread
       # or call watcher.poll(timeout) from your own loop

Close with ``bridge.close()`` / ``watcher.close()``. A kernel restart is handled inside
``probe`` (the helper is reinstalled). Errors are :class:`BridgeError` subclasses
(``KernelBusy``, ``KernelDead``) with one-line messages that never contain the HMAC key.
"""

from __future__ import annotations

from ..core.live_facts import LiveFacts, ProbeRequest
from .errors import BridgeError

__all__ = ["BridgeError", "LiveFacts", "ProbeRequest"]
