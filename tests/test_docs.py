"""The documentation site: generated pages are current, every rule has its pages in both
languages, the TorchFix mapping is complete, the site builds and rule links resolve."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from torchdoctor.linter.registry import ALIASES, all_rules
from torchdoctor.rules.docs import packaged_docs_dir, rule_doc, rule_url

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def torchdoctor(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def url_path(url: str) -> Path:
    assert url.startswith("file:"), url
    return Path(url2pathname(urlparse(url).path))


def test_generated_pages_are_up_to_date() -> None:
    result = torchdoctor("generate-docs", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_every_rule_has_an_english_and_a_chinese_page(rule: type) -> None:
    en = (DOCS / "rules" / f"{rule.code}.md").read_text(encoding="utf-8")
    zh = (DOCS / "rules" / f"{rule.code}.zh.md").read_text(encoding="utf-8")
    assert en.startswith(f"# {rule.code}: {rule.name}\n")
    assert zh.startswith(f"# {rule.code}: {rule.name}\n")
    assert "## Why is this bad?" in en and "## Fix safety" in en
    for heading, body in rule_doc(rule, "en").sections.items():
        assert f"## {heading}\n\n{body.strip()}\n" in en, heading
    assert "## 为什么不好？" in zh and "## 修复安全性" in zh
    for heading, body in rule_doc(rule, "zh").sections.items():
        assert f"## {heading}\n\n{body.strip()}\n" in zh, heading
    default = "| Default | on |" if rule.default else "| Default | off"
    assert default in en
    assert f"| Severity | {rule.severity.value} |" in en


def test_rule_index_lists_every_rule() -> None:
    for name in ("index.md", "index.zh.md"):
        text = (DOCS / "rules" / name).read_text(encoding="utf-8")
        for rule in all_rules():
            assert f"[{rule.code}]({rule.code}.md)" in text, (name, rule.code)


def test_mapping_page_lists_every_alias() -> None:
    all_rules()  # fills ALIASES
    assert ALIASES, "no TorchFix aliases are declared"
    for name in ("torchfix.md", "torchfix.zh.md"):
        text = (DOCS / name).read_text(encoding="utf-8")
        for alias, target in ALIASES.items():
            row = next(
                (line for line in text.splitlines() if line.startswith(f"| `{alias}` |")), ""
            )
            assert row, (name, alias)
            targets = target if isinstance(target, tuple) else (target,)
            for code in targets:
                assert code in row, (name, alias, code)


def test_configuration_page_lists_every_key() -> None:
    from torchdoctor.linter.configuration import KEYS

    for name in ("configuration.md", "configuration.zh.md"):
        text = (DOCS / name).read_text(encoding="utf-8")
        for key in KEYS:
            assert f"| `{key}` |" in text, (name, key)


def test_every_language_server_setting_is_described() -> None:
    for name in ("configuration.md", "configuration.zh.md"):
        text = (DOCS / name).read_text(encoding="utf-8")
        block = text.split("<!-- generated: server-settings -->")[1].split("<!-- /generated -->")[0]
        rows = [line for line in block.splitlines() if line.startswith("| `")]
        assert rows, name
        for row in rows:
            cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
            assert cells[-1].strip(), (name, row)


def test_every_page_exists_in_both_languages() -> None:
    english = {p for p in DOCS.rglob("*.md") if not p.name.endswith(".zh.md")}
    for page in english:
        assert page.with_name(page.stem + ".zh.md").is_file(), page.relative_to(DOCS)


def test_check_names_stale_and_obsolete_files_and_generation_fixes_them(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    rule = all_rules()[0]
    page = docs / "rules" / f"{rule.code}.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nedited by hand\n", encoding="utf-8")
    (docs / "rules" / "TDR999.zh.md").write_text("# TDR999: gone\n", encoding="utf-8")
    config = docs / "configuration.md"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("| `select` |", "| `selected` |"), encoding="utf-8")

    stale = torchdoctor("generate-docs", "--check", "--docs-dir", str(docs))
    assert stale.returncode == 1
    named = set(re.findall(r"^stale: (.+)$", stale.stdout, re.M))
    assert {Path(n).name for n in named} == {page.name, "TDR999.zh.md", "configuration.md"}

    fixed = torchdoctor("generate-docs", "--docs-dir", str(docs))
    assert fixed.returncode == 0, fixed.stderr
    assert page.read_text(encoding="utf-8") == (DOCS / "rules" / page.name).read_text("utf-8")
    assert config.read_text(encoding="utf-8") == text
    assert not (docs / "rules" / "TDR999.zh.md").exists()
    assert torchdoctor("generate-docs", "--check", "--docs-dir", str(docs)).returncode == 0


def test_unknown_generated_block_is_an_error(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text(
        "# Page\n\n<!-- generated: no-such-block -->\n<!-- /generated -->\n", encoding="utf-8"
    )
    result = torchdoctor("generate-docs", "--check", "--docs-dir", str(docs))
    assert result.returncode == 2
    assert "no-such-block" in result.stderr


def test_docs_command_prints_the_rule_page() -> None:
    base = "https://docs.example.org/td"
    result = torchdoctor("docs", "TDR602", "--no-browser", "--base-url", base)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{base}/rules/TDR602/"
    zh = torchdoctor("docs", "load-without-map-location", "--locale", "zh", "--no-browser",
                     "--base-url", base)  # fmt: skip
    assert zh.stdout.strip() == f"{base}/zh/rules/TDR602/"
    home = torchdoctor("docs", "--no-browser", "--base-url", base)
    assert home.stdout.strip() == f"{base}/"


def test_docs_command_rejects_an_unknown_rule() -> None:
    result = torchdoctor("docs", "TDR000", "--no-browser", "--base-url", "https://x.org/")
    assert result.returncode == 2
    assert "TDR000" in result.stderr


# Rebuilds the HTML docs installed with the package, which other tests read: not in parallel.
@pytest.mark.docs_build
@pytest.mark.serial
def test_site_builds_strict_and_rule_links_resolve(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    for rule in all_rules():
        for locale in ("en", "zh"):
            url = rule_url(rule.code, site.as_uri(), locale)
            assert (url_path(url) / "index.html").is_file(), url
    # A rule code written as inline code in prose links to the rule's page.
    topic = (site / "topics" / "save-load" / "index.html").read_text(encoding="utf-8")
    assert 'href="../../rules/TDR602/"' in topic
    # Nothing is fetched from the network when a page is shown.
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index
    # The language switcher links to the other language's page by a relative link to a file,
    # which a browser follows under file:// (the HTML docs installed with the package).
    pages = sorted(site.rglob("index.html"))
    assert len(pages) > 100
    for page in pages:
        links = re.findall(r'href="([^"]*)"\s+hreflang="', page.read_text(encoding="utf-8"))
        assert len(links) >= 2, page
        for link in links:
            assert not link.startswith("/") and ":" not in link, (page, link)
            assert link.endswith("index.html") and (page.parent / link).is_file(), (page, link)

    # The docs installed with the package: what findings link to by default.
    packaged = torchdoctor("generate-docs", "--build")
    assert packaged.returncode == 0, packaged.stdout + packaged.stderr
    for rule in all_rules():
        for locale in ("en", "zh"):
            url = rule_url(rule.code, None, locale)
            path = url_path(url)
            assert path.is_relative_to(packaged_docs_dir().resolve()), url
            assert path.is_file(), url
