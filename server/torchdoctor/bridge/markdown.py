"""Hover text for a live name (Markdown, English or Simplified Chinese)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.model import is_chinese


def _bytes(n: object) -> str:
    if not isinstance(n, int):
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _short(value: object) -> str:
    return str(value).removeprefix("torch.") if value is not None else "?"


def _yes(value: object, zh: bool) -> str:
    if value is None:
        return "?"
    if zh:
        return "是" if value else "否"
    return "yes" if value else "no"


def _unreadable_tensor(facts: Mapping[str, Any], zh: bool) -> list[str]:
    """A tensor whose class has ``__torch_dispatch__``: its metadata may be answered by its own
    Python code, so it was not read."""
    kind = facts.get("type", "?")
    why = f"`{facts.get('unreadable')}`"
    if zh:
        lines = [
            f"`{kind}`（张量子类）",
            f"未读取其形状、设备与步长：该类定义了 {why}，读取会运行它的 Python 代码",
        ]
    else:
        lines = [
            f"`{kind}` (a tensor subclass)",
            f"shape, device and strides not read: the class defines {why}, so reading them "
            "would run its Python code",
        ]
    if facts.get("dtype"):
        lines.append(f"dtype: `{_short(facts['dtype'])}`")
    return lines


def _incomplete_module(facts: Mapping[str, Any], zh: bool) -> list[str]:
    lines = []
    for key, en, cn in (
        ("unreadable_parameters", "parameter", "个参数张量"),
        ("unreadable_buffers", "buffer", "个缓冲张量"),
    ):
        n = facts.get(key)
        if isinstance(n, int) and n > 0:
            if zh:
                lines.append(
                    f"{n} {cn}未读取（张量子类定义了 `__torch_dispatch__`），不计入上面的数字"
                )
            else:
                plural = "s" if n != 1 else ""
                lines.append(
                    f"{n} {en} tensor{plural} not read (a subclass with `__torch_dispatch__`), "
                    "not counted above"
                )
    if facts.get("truncated"):
        lines.append(
            "读取在时间限制处停止：数字只是一部分"
            if zh
            else "stopped at the time limit: the numbers are partial"
        )
    return lines


def hover_markdown(
    facts: Mapping[str, Any],
    locale: str | None = None,
    *,
    name: str | None = None,
    execution_count: int | None = None,
) -> str:
    """Markdown for one name's facts (as the probe reports them). Never shows data."""
    zh = is_chinese(locale)
    kind = facts.get("kind")
    title = f"`{name}` " if name else ""
    when = ""
    if execution_count is not None:
        when = f"（In [{execution_count}] 之后）" if zh else f" (after In [{execution_count}])"
    head = (f"**{title}实时**{when}" if zh else f"**{title}live**{when}").strip()
    lines: list[str] = []
    if kind == "tensor" and facts.get("unreadable"):
        lines.extend(_unreadable_tensor(facts, zh))
    elif kind == "tensor":
        shape = facts.get("shape")
        shape_text = (
            "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
            if isinstance(shape, list)
            else "?"
        )
        lines.append(
            f"`Tensor{shape_text}` · `{_short(facts.get('dtype'))}` · `{facts.get('device', '?')}`"
        )
        if facts.get("type"):
            lines.append(("类型" if zh else "type") + f": `{facts['type']}`")
        layout = facts.get("layout")
        if layout and layout != "torch.strided":
            lines.append(("布局" if zh else "layout") + f": `{_short(layout)}`")
        stride = facts.get("stride")
        if isinstance(stride, list):
            text = ", ".join(str(s) for s in stride)
            offset = facts.get("storage_offset")
            extra = f", offset {offset}" if offset else ""
            lines.append(("步长" if zh else "strides") + f": `({text})`{extra}")
        contiguous = facts.get("is_contiguous")
        parts = [("连续" if zh else "contiguous") + f": {_yes(contiguous, zh)}"]
        if facts.get("channels_last") is not None:
            parts.append(f"channels_last: {_yes(facts.get('channels_last'), zh)}")
        if facts.get("is_view") is not None:
            parts.append(("视图" if zh else "view") + f": {_yes(facts.get('is_view'), zh)}")
        lines.append(" · ".join(parts))
        lines.append(
            ("大小" if zh else "size")
            + f": {_bytes(facts.get('nbytes'))}"
            + (" · 存储" if zh else " · storage")
            + f": {_bytes(facts.get('storage_nbytes'))}"
        )
        grad = "requires_grad: " + _yes(facts.get("requires_grad"), zh)
        if facts.get("grad_fn"):
            grad += f" · grad_fn: `{facts['grad_fn']}`"
        if facts.get("is_leaf") is not None:
            grad += (" · 叶子: " if zh else " · leaf: ") + _yes(facts.get("is_leaf"), zh)
        lines.append(grad)
        flags = []
        if facts.get("is_inference"):
            flags.append("inference 张量" if zh else "inference tensor")
        if facts.get("is_pinned"):
            flags.append("锁页内存" if zh else "pinned memory")
        if facts.get("is_quantized"):
            flags.append("量化" if zh else "quantized")
        if facts.get("is_nested"):
            flags.append("嵌套" if zh else "nested")
        if flags:
            lines.append(" · ".join(flags))
    elif kind == "module":
        count = facts.get("num_parameters")
        count_text = f"{count:,}" if isinstance(count, int) else "?"
        lines.append(f"`{facts.get('type', 'Module')}`")
        lines.append(("参数" if zh else "parameters") + f": {count_text}")
        devices = ", ".join(f"`{d}`" for d in facts.get("devices") or ()) or "-"
        dtypes = ", ".join(f"`{_short(d)}`" for d in facts.get("dtypes") or ()) or "-"
        lines.append(("设备" if zh else "devices") + f": {devices}")
        lines.append("dtype: " + dtypes)
        lines.extend(_incomplete_module(facts, zh))
        training = facts.get("training")
        if training is not None:
            mode = (
                ("训练模式" if training else "评估模式")
                if zh
                else ("train mode" if training else "eval mode")
            )
            lines.append(mode)
    elif kind == "missing":
        lines.append("内核中没有这个名字" if zh else "not defined in the kernel")
    elif kind == "no-torch":
        lines.append("内核尚未导入 torch" if zh else "torch is not imported in the kernel")
    elif kind == "other":
        lines.append(("类型" if zh else "type") + f": `{facts.get('type', '?')}`")
    else:
        lines.append("无法读取" if zh else "could not be read")
    return head + "\n\n" + "  \n".join(lines)
