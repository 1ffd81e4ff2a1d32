"""Registration of the language server with jupyter-lsp (JupyterLab's language-server proxy).

jupyter-lsp looks up the entry-point group ``jupyter_lsp_spec_v1`` when it starts and calls each
entry with its language-server manager; ``spec`` below answers with how to start
``torchdoctor server`` from the Python environment of the Jupyter server. Nothing from
jupyter-lsp is imported here, so this module costs nothing where JupyterLab is not installed.
"""

from __future__ import annotations

from typing import Any

from .launch import server_command

#: The spec format version that jupyter-lsp 2.x expects.
SPEC_VERSION = 2

KEY = "torchdoctor"


def spec(manager: Any = None) -> dict[str, dict[str, Any]]:
    """Return the jupyter-lsp spec of the torchdoctor language server, keyed by its name.

    ``manager`` is jupyter-lsp's ``LanguageServerManager``; the spec does not depend on it.
    """
    return {
        KEY: {
            "version": SPEC_VERSION,
            # Started so that no module of the Jupyter root (its working folder) can be imported.
            "argv": server_command(),
            "languages": ["python"],
            "mime_types": ["text/python", "text/x-python", "text/x-ipython"],
            "display_name": "torchdoctor",
            # The server works on the documents the editor sends; unsaved cells need no copy on disk.
            "requires_documents_on_disk": False,
            "env": {"PYTHONUNBUFFERED": "1"},
            "urls": {"home": "https://torchdoctor.dev/"},
            "install": {"pip": "pip install torchdoctor"},
        }
    }
