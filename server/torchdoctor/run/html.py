"""The HTML page of a run: one self-contained file (inline SVG and CSS, no script, nothing fetched)."""

from __future__ import annotations

import html
import os
from typing import Any

from ..core.model import is_chinese
from .findings import human_bytes, profile_note
from .report import Report

PARTS = (
    ("data_s", "#4e79a7", "data", "数据"),
    ("forward_s", "#f28e2b", "forward", "前向"),
    ("backward_s", "#e15759", "backward", "反向"),
    ("optimizer_s", "#76b7b2", "optimizer", "优化器"),
    ("other_s", "#bab0ac", "other", "其他"),
)
_W, _H, _PAD = 760, 220, 40


def _t(locale: str, en: str, zh: str) -> str:
    return zh if is_chinese(locale) else en


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _sampled(timeline: list[dict[str, Any]], limit: int = 300) -> list[dict[str, Any]]:
    if len(timeline) <= limit:
        return timeline
    stride = len(timeline) / limit
    return [timeline[int(i * stride)] for i in range(limit)]


def step_chart(timeline: list[dict[str, Any]], locale: str) -> str:
    """Stacked bars: each step's time split into data, forward, backward, optimizer, other."""
    steps = _sampled(timeline)
    if not steps:
        return f"<p>{_t(locale, 'No optimizer step was observed.', '未观察到优化器步。')}</p>"
    totals = [sum(float(s.get(k, 0.0)) for k, *_ in PARTS) for s in steps]
    top = max(totals) or 1.0
    width = (_W - 2 * _PAD) / len(steps)
    out = [
        f'<svg viewBox="0 0 {_W} {_H + 30}" width="100%" role="img" '
        f'aria-label="{_esc(_t(locale, "step time", "步时间"))}">'
    ]
    for i, s in enumerate(steps):
        y = float(_H)
        x = _PAD + i * width
        tip = ", ".join(f"{k[:-2]} {float(s.get(k, 0.0)) * 1000:.2f} ms" for k, *_ in PARTS)
        for key, color, *_names in PARTS:
            h = float(s.get(key, 0.0)) / top * (_H - 20)
            if h <= 0:
                continue
            y -= h
            out.append(
                f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(width - 1, 0.5):.2f}" '
                f'height="{h:.2f}" fill="{color}"><title>step {_esc(s.get("step"))}: '
                f"{_esc(tip)}</title></rect>"
            )
    out.append(
        f'<text x="{_PAD}" y="12" font-size="11">{top * 1000:.1f} ms</text>'
        f'<line x1="{_PAD}" y1="{_H}" x2="{_W - _PAD}" y2="{_H}" stroke="#888"/>'
    )
    legend_x = _PAD
    for _key, color, en, zh in PARTS:
        out.append(
            f'<rect x="{legend_x}" y="{_H + 12}" width="10" height="10" fill="{color}"/>'
            f'<text x="{legend_x + 14}" y="{_H + 21}" font-size="11">{_esc(_t(locale, en, zh))}'
            "</text>"
        )
        legend_x += 100
    out.append("</svg>")
    return "".join(out)


def memory_chart(timeline: list[dict[str, Any]], locale: str) -> str:
    points = [
        (int(s.get("step", i)), int(s.get("memory_bytes") or 0)) for i, s in enumerate(timeline)
    ]
    points = [p for p in points if p[1] > 0]
    if len(points) < 2:
        return f"<p>{_t(locale, 'Not enough steps to plot.', '步数不足，无法绘图。')}</p>"
    if len(points) > 300:
        points = [points[int(i * len(points) / 300)] for i in range(300)]
    low = min(p[1] for p in points)
    high = max(p[1] for p in points)
    span = (high - low) or 1
    first, last = points[0][0], points[-1][0]
    xspan = (last - first) or 1
    coords = " ".join(
        f"{_PAD + (step - first) / xspan * (_W - 2 * _PAD):.1f},"
        f"{_H - (value - low) / span * (_H - 30) - 5:.1f}"
        for step, value in points
    )
    return (
        f'<svg viewBox="0 0 {_W} {_H + 20}" width="100%" role="img" '
        f'aria-label="{_esc(_t(locale, "memory", "内存"))}">'
        f'<polyline points="{coords}" fill="none" stroke="#4e79a7" stroke-width="2"/>'
        f'<text x="{_PAD}" y="14" font-size="11">{_esc(human_bytes(high))}</text>'
        f'<text x="{_PAD}" y="{_H + 12}" font-size="11">{_esc(human_bytes(low))} '
        f"({_esc(_t(locale, 'step', '步'))} {first}–{last})</text>"
        "</svg>"
    )


def render(report: Report, locale: str = "en") -> str:
    zh = is_chinese(locale)
    rows = []
    for f in report.findings:
        where = f"{os.path.basename(f.path)}:{f.row}:{f.col}"
        rows.append(
            f"<tr><td><code>{_esc(f.code)}</code></td><td title='{_esc(f.path)}'>"
            f"<code>{_esc(where)}</code></td><td>{_esc(f.summary_zh if zh else f.summary)}</td>"
            f"<td>{_esc(f.message_zh if zh else f.message)}</td></tr>"
        )
    table = (
        "<table><tr>"
        + "".join(
            f"<th>{_esc(_t(locale, en, cn))}</th>"
            for en, cn in (
                ("code", "代码"),
                ("where", "位置"),
                ("measured", "实测"),
                ("message", "说明"),
            )
        )
        + "</tr>"
        + "".join(rows)
        + "</table>"
        if rows
        else f"<p>{_esc(_t(locale, 'Nothing measured.', '未测得问题。'))}</p>"
    )
    peak = report.peak_memory or {}
    peak_text = human_bytes(int(peak.get("bytes") or 0))
    if peak.get("path"):
        peak_text += f" ({os.path.basename(str(peak['path']))}:{peak.get('row')})"
    facts = [
        (_t(locale, "script", "脚本"), report.script + " " + " ".join(report.argv)),
        (_t(locale, "started", "开始"), report.started),
        (_t(locale, "duration", "时长"), f"{report.duration_s:.2f} s"),
        (_t(locale, "optimizer steps", "优化器步"), str(report.steps)),
        (_t(locale, "stopped", "停止原因"), report.stopped),
        (_t(locale, "exit status", "退出状态"), str(report.exit_code)),
        ("torch", str(report.torch)),
        (_t(locale, "device", "设备"), report.device),
        (_t(locale, "peak memory", "峰值内存"), peak_text),
    ]
    facts_html = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in facts)
    title = _t(locale, "torchdoctor run", "torchdoctor run 报告")
    note = profile_note(report, locale)
    profile_html = f"<p>{_esc(note)}</p>" if note else ""
    return f"""<!doctype html>
<html lang="{"zh-CN" if zh else "en"}"><head><meta charset="utf-8">
<title>{_esc(title)}: {_esc(os.path.basename(report.script))}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }}
th {{ background: #f6f6f6; }}
</style></head><body>
<h1>{_esc(title)}: <code>{_esc(os.path.basename(report.script))}</code></h1>
<table>{facts_html}</table>
<h2>{_esc(_t(locale, "Findings", "实测问题"))}</h2>
{table}
{profile_html}
<h2>{_esc(_t(locale, "Step time", "每步耗时"))}</h2>
{step_chart(report.timeline, locale)}
<h2>{_esc(_t(locale, "Memory over steps", "各步内存"))}</h2>
{memory_chart(report.timeline, locale)}
<p><small>{
        _esc(
            _t(
                locale,
                "Written by torchdoctor run; nothing was uploaded.",
                "由 torchdoctor run 生成；未上传任何数据。",
            )
        )
    }</small></p>
</body></html>
"""
