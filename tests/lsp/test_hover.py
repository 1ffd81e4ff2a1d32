"""Hover over a finding and over a code in `# noqa:`: what is wrong, why, the fix, before/after
and the link, in the client's locale (zh* -> Chinese, anything else -> English)."""

from __future__ import annotations

import pytest
from lsp_helpers import initialize, lsp_client, open_doc, published
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEXT = 'import torch\nstate = torch.load("x", weights_only=True)\nother = 1  # noqa: TDR602\n'


async def hover(client: LanguageClient, uri: str, line: int, col: int) -> types.Hover | None:
    return await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line, col),
        )
    )


def markdown(result: types.Hover | None) -> str:
    assert result is not None
    assert isinstance(result.contents, types.MarkupContent)
    assert result.contents.kind == types.MarkupKind.Markdown
    return result.contents.value


@lsp_client(scope="module")
async def english(lsp_client: LanguageClient):
    await initialize(lsp_client, locale="en-US")
    yield
    await lsp_client.shutdown_session()


@lsp_client(scope="module")
async def chinese(lsp_client: LanguageClient):
    await initialize(lsp_client, locale="zh-cn")
    yield
    await lsp_client.shutdown_session()


async def test_hover_on_finding_in_english(english: LanguageClient) -> None:
    uri = "file:///tmp/td_hover/en.py"
    open_doc(english, uri, TEXT)
    await published(english, uri)
    result = await hover(english, uri, 1, 12)
    text = markdown(result)
    assert text.startswith("**TDR602** `load-without-map-location`: `torch.load` without")
    assert "**Why it matters**" in text
    assert '**Fix**: Add `map_location="cpu"`' in text
    assert "**Example**" in text and "**Use instead**" in text
    assert 'torch.load("checkpoint.pt", map_location="cpu", weights_only=True)' in text
    assert "[Open the guide for TDR602](" in text
    assert result is not None and result.range == types.Range(
        types.Position(1, 8), types.Position(1, 42)
    )


async def test_hover_on_noqa_code(english: LanguageClient) -> None:
    uri = "file:///tmp/td_hover/noqa.py"
    open_doc(english, uri, TEXT)
    await published(english, uri)
    result = await hover(english, uri, 2, 22)
    text = markdown(result)
    assert text.startswith("**TDR602** `load-without-map-location`")
    assert "[Open the guide for TDR602](" in text
    assert result is not None and result.range == types.Range(
        types.Position(2, 19), types.Position(2, 25)
    )


async def test_no_hover_elsewhere(english: LanguageClient) -> None:
    uri = "file:///tmp/td_hover/none.py"
    open_doc(english, uri, TEXT)
    await published(english, uri)
    assert await hover(english, uri, 0, 3) is None


async def test_hover_and_messages_in_chinese(chinese: LanguageClient) -> None:
    uri = "file:///tmp/td_hover/zh.py"
    open_doc(chinese, uri, TEXT)
    [d] = (await published(chinese, uri)).diagnostics
    assert d.message.startswith("`torch.load` 未指定 `map_location`")
    assert d.data["fixesOnRequest"] is True  # built when asked for: the hover names it
    assert d.code_description is not None and "/zh/" in d.code_description.href
    text = markdown(await hover(chinese, uri, 1, 12))
    assert "**为什么不好**" in text
    assert '**修复**：添加 `map_location="cpu"`' in text
    assert "**示例**" in text and "**改为**" in text
    assert "[查看 TDR602 的指南](" in text
    noqa = markdown(await hover(chinese, uri, 2, 22))
    assert "查看 TDR602 的指南" in noqa


def why_section(text: str, title: str) -> str:
    start = text.index(f"**{title}**\n\n") + len(title) + 6
    ends = [
        text.find(f"\n\n**{t}", start) for t in ("Example", "Fix", "示例", "修复", "Use", "改为")
    ]
    return text[start : min(e for e in ends if e >= 0)]


@pytest.mark.parametrize(
    ("locale", "title", "more"), [("en", "Why it matters", "More"), ("zh", "为什么不好", "更多")]
)
async def test_a_long_why_is_cut_at_a_sentence_with_a_more_link(
    english: LanguageClient, chinese: LanguageClient, locale: str, title: str, more: str
) -> None:
    from torchdoctor.linter.registry import all_rules
    from torchdoctor.rules.base import DOC_SECTIONS, DOC_SECTIONS_ZH
    from torchdoctor.rules.docs import rule_doc

    client = english if locale == "en" else chinese
    names = DOC_SECTIONS_ZH if locale == "zh" else DOC_SECTIONS
    long_why = {}
    for rule in all_rules():
        doc = rule_doc(rule, locale)
        why = doc.sections.get(names[1], "").strip()
        if doc.locale == locale and why.count("\n") >= 10:
            long_why[rule.code] = why
    assert len(long_why) >= 3
    text = "\n".join(f"x{i} = 1  # noqa: {code}" for i, code in enumerate(long_why)) + "\n"
    uri = f"file:///tmp/td_hover/long_why_{locale}.py"
    open_doc(client, uri, text)
    await published(client, uri)
    for line, (code, why) in enumerate(long_why.items()):
        shown = why_section(markdown(await hover(client, uri, line, 18)), title)
        if shown == why:
            continue
        prose, _, link = shown.rpartition(f"[{more}…](")
        prose = prose.rstrip()
        assert link and code in link, (code, shown[-200:])
        assert why.startswith(prose), code
        # Cut at the end of a paragraph or of a sentence.
        rest = why[len(prose) :]
        assert rest.startswith("\n\n") or prose.endswith((".", "。", "!", "?", "！", "？")), (
            code,
            prose[-80:],
        )
