"""MkDocs hook: the language switcher (and its ``<link rel="alternate">`` tags) links to the other
language's page with a relative link to its ``index.html``, so that it works in the HTML docs
installed with the package, opened as ``file://`` pages, as well as on the web. (The theme writes
``/`` and ``/zh/`` on the home pages, and folder links that a browser shows as a folder listing
under ``file://``.)"""

from __future__ import annotations

import posixpath
import re
from typing import Any
from urllib.parse import urlsplit

_ALTERNATE = re.compile(r'href="([^"]*)"(\s+hreflang=")')


def _folder(url: str) -> str:
    """The folder of a page's URL relative to the site root ('' for the home page)."""
    if url in ("", ".", "./"):
        return ""
    if url.endswith("/"):
        return url
    folder = posixpath.dirname(url)
    return folder + "/" if folder else ""


def on_post_page(output: str, page: Any, config: Any) -> str:
    here = _folder(page.url)
    site_path = urlsplit(config.get("site_url") or "").path.rstrip("/") + "/"

    def relative(match: re.Match[str]) -> str:
        href = match.group(1)
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            return match.group(0)
        if href.startswith("/"):
            target = href[len(site_path) :] if href.startswith(site_path) else href.lstrip("/")
        else:
            target = posixpath.normpath(posixpath.join(here, href)) if href else here
            if target == ".":
                target = ""
            elif href.endswith("/") or href in ("", ".", ".."):
                target = target.rstrip("/") + "/"
        if target == "" or target.endswith("/"):
            target += "index.html"
        link = posixpath.relpath(target, here.rstrip("/") or ".")
        return f'href="{link}"{match.group(2)}'

    return _ALTERNATE.sub(relative, output)
