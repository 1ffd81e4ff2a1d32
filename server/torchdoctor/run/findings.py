"""From what the instrumented process measured to findings: the rule code, English and Chinese."""

from __future__ import annotations

from typing import Any

from .report import MeasuredFinding

#: A code that no static rule has: host-device synchronisations in the training loop are only
#: ever measured (a static rule cannot know which tensor lives on the GPU).
SYNC_CODE = "TDR408"

#: Measured-only codes, with a name and a one-line description (English, Chinese).
MEASURED_ONLY = {
    SYNC_CODE: (
        "host-device-sync-in-loop",
        "A call in the training loop copies a tensor's value to the host: on a GPU, every such "
        "call waits for all queued kernels.",
        "训练循环中的调用把张量的值复制到主机：在 GPU 上，每次这样的调用都要等待所有排队的内核。",
    )
}


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _sync_call(what: str) -> str:
    return {
        "__format__": "formatting a tensor (f-string)",
        "__repr__": "printing a tensor",
        "__bool__": "a tensor used as a condition",
        "cuda": "a synchronising CUDA operation",
    }.get(what, f"`.{what}()`")


def _sync_call_zh(what: str) -> str:
    return {
        "__format__": "格式化张量（f-string）",
        "__repr__": "打印张量",
        "__bool__": "把张量用作条件",
        "cuda": "同步的 CUDA 操作",
    }.get(what, f"`.{what}()`")


def build(raw: dict[str, Any]) -> list[MeasuredFinding]:
    """The findings of one run, from the ``findings`` the bootstrap wrote."""
    device = str(raw.get("device") or "cpu")
    out: list[MeasuredFinding] = []
    for item in raw.get("findings") or []:
        made = _one(item, device)
        if made is not None:
            out.append(made)
    out.sort(key=lambda f: (f.path, f.row, f.col, f.code))
    return out


def _one(item: dict[str, Any], device: str) -> MeasuredFinding | None:
    kind = item.get("kind")
    m = dict(item.get("measured") or {})
    where: dict[str, Any] = {
        "path": str(item["path"]),
        "row": int(item["row"]),
        "col": int(item.get("col") or 1),
        "end_row": item.get("end_row"),
        "end_col": item.get("end_col"),
    }
    if kind == "forward-not-backpropagated":
        size, calls = human_bytes(m.get("bytes", 0)), int(m.get("calls", 0))
        return MeasuredFinding(
            code="TDR105",
            message=f"Measured: {_plural(calls, 'forward call', 'forward calls')} here built an "
            f"autograd graph that was never backpropagated, saving {size} of activations; run it "
            "under `torch.inference_mode()` or `torch.no_grad()`",
            message_zh=f"实测：此处 {calls} 次前向调用构建了从未反向传播的计算图，保存了 {size} 的"
            "激活值；请在 `torch.inference_mode()` 或 `torch.no_grad()` 下运行",
            summary=f"{size} of activations over {_plural(calls, 'call', 'calls')}, never "
            "backpropagated",
            summary_zh=f"{calls} 次调用共 {size} 激活值，从未反向传播",
            measured=m,
            **where,
        )
    if kind == "forward-under-no-grad":
        calls, seconds = int(m.get("calls", 0)), float(m.get("seconds", 0.0))
        return MeasuredFinding(
            code="TDR106",
            message=f"Measured: {_plural(calls, 'forward call', 'forward calls')} here ran under "
            f"`torch.no_grad()` ({seconds:.3f} s); if their outputs never enter autograd, "
            "`torch.inference_mode()` also skips view and version tracking",
            message_zh=f"实测：此处 {calls} 次前向调用在 `torch.no_grad()` 下运行（{seconds:.3f} 秒）；"
            "若输出从不进入自动求导，`torch.inference_mode()` 还能省去视图与版本计数的跟踪",
            summary=f"{_plural(calls, 'call', 'calls')} under no_grad, {seconds:.3f} s",
            summary_zh=f"no_grad 下 {calls} 次调用，{seconds:.3f} 秒",
            measured=m,
            **where,
        )
    if kind == "graph-kept":
        count, steps, name = int(m.get("count", 0)), int(m.get("steps", 0)), item.get("name", "")
        held = f"`{name}`" if name else "a variable"
        return MeasuredFinding(
            code="TDR103",
            message=f"Measured: {held} kept the autograd graphs of {count} earlier iterations "
            f"alive (after {_plural(steps, 'step', 'steps')}), so memory grows every iteration; "
            "accumulate `loss.item()` or `loss.detach()`",
            message_zh=f"实测：{held} 使之前 {count} 次迭代的计算图一直存活（共 {steps} 步），"
            "内存每次迭代都在增长；请累加 `loss.item()` 或 `loss.detach()`",
            summary=f"graphs of {count} earlier iterations kept alive",
            summary_zh=f"之前 {count} 次迭代的计算图仍存活",
            measured=m,
            **where,
        )
    if kind == "gradients-wiped":
        count = int(m.get("count", 0))
        return MeasuredFinding(
            code="TDR107",
            message=f"Measured: this call wiped gradients {_plural(count, 'time', 'times')} "
            "before any optimizer step used them: gradient accumulation accumulates nothing",
            message_zh=f"实测：此调用 {count} 次在优化器更新之前清空了梯度：梯度累积没有累积任何东西",
            summary=f"gradients wiped {_plural(count, 'time', 'times')} before a step",
            summary_zh=f"{count} 次在更新前清空梯度",
            measured=m,
            **where,
        )
    if kind == "sync":
        count, per_step = int(m.get("count", 0)), float(m.get("per_step", 0.0))
        what = str(item.get("what") or "item")
        on_gpu = int(m.get("cuda", 0)) > 0
        tail = (
            "each one waited for the GPU"
            if on_gpu
            else "on a GPU each one would wait for all queued kernels"
        )
        tail_zh = "每次都在等待 GPU" if on_gpu else "在 GPU 上每次都会等待所有排队的内核"
        return MeasuredFinding(
            code=SYNC_CODE,
            message=f"Measured: {_sync_call(what)} ran {_plural(count, 'time', 'times')} in the "
            f"training loop ({per_step:g} per optimizer step); {tail}",
            message_zh=f"实测：训练循环中{_sync_call_zh(what)}执行了 {count} 次（每个优化器步 "
            f"{per_step:g} 次）；{tail_zh}",
            summary=f"{_plural(count, 'host-device sync', 'host-device syncs')}, "
            f"{per_step:g} per step",
            summary_zh=f"{count} 次主机-设备同步，每步 {per_step:g} 次",
            measured=m,
            **where,
        )
    if kind == "graph-breaks":
        count, graphs = int(m.get("count", 0)), int(m.get("graphs", 0))
        recompiles = int(m.get("recompiles", 0))
        reasons = [str(r[0]) for r in item.get("reasons") or []]
        why = "; ".join(reasons[:3])
        return MeasuredFinding(
            code="TDR202",
            message=f"Measured: the code compiled here broke its graph "
            f"{_plural(count, 'time', 'times')} ({_plural(graphs, 'graph', 'graphs')}, "
            f"{_plural(recompiles, 'recompilation', 'recompilations')})"
            + (f": {why}" if why else ""),
            message_zh=f"实测：此处编译的代码发生 {count} 次图中断（{graphs} 个图，"
            f"{recompiles} 次重新编译）" + (f"：{why}" if why else ""),
            summary=f"{_plural(count, 'graph break', 'graph breaks')}, "
            f"{_plural(recompiles, 'recompilation', 'recompilations')}",
            summary_zh=f"{count} 次图中断，{recompiles} 次重新编译",
            measured=m,
            **where,
        )
    if kind == "data-stall":
        share, seconds = float(m.get("share", 0.0)), float(m.get("seconds", 0.0))
        workers, pinned = int(item.get("num_workers", 0)), bool(item.get("pin_memory"))
        pct = f"{share * 100:.0f}%"
        if workers == 0:
            code = "TDR310"
            advice, advice_zh = "set `num_workers`", "请设置 `num_workers`"
        elif device.startswith("cuda") and not pinned:
            code = "TDR303"
            advice, advice_zh = "set `pin_memory=True`", "请设置 `pin_memory=True`"
        else:
            return None
        return MeasuredFinding(
            code=code,
            message=f"Measured: waiting for the next batch took {pct} of the training loop's "
            f"time ({seconds:.2f} s, num_workers={workers}, pin_memory={pinned}); {advice}",
            message_zh=f"实测：等待下一个批次占训练循环时间的 {pct}（{seconds:.2f} 秒，"
            f"num_workers={workers}，pin_memory={pinned}）；{advice_zh}",
            summary=f"{pct} of step time waiting for data",
            summary_zh=f"{pct} 的步时间在等待数据",
            measured=m,
            **where,
        )
    if kind == "sampler-repeats":
        count = int(m.get("count", 0))
        return MeasuredFinding(
            code="TDR502",
            message=f"Measured: the DistributedSampler gave the same order in {count} iterations "
            "over this loader; call `sampler.set_epoch(epoch)` at the start of each epoch",
            message_zh=f"实测：DistributedSampler 在遍历此 loader 的 {count} 次中给出相同顺序；"
            "请在每个 epoch 开始时调用 `sampler.set_epoch(epoch)`",
            summary=f"same sample order in {count} epochs",
            summary_zh=f"{count} 个 epoch 的样本顺序相同",
            measured=m,
            **where,
        )
    if kind == "scheduler-granularity":
        count, steps = int(m.get("count", 0)), int(m.get("steps", 0))
        scheduler = str(item.get("scheduler") or "scheduler")
        if item.get("per_iteration"):
            expect, expect_zh = "it expects one per optimizer step", "它应每个优化器步调用一次"
        else:
            expect, expect_zh = "it expects one per epoch", "它应每个 epoch 调用一次"
        return MeasuredFinding(
            code="TDR703",
            message=f"Measured: `{scheduler}.step()` ran {_plural(count, 'time', 'times')} for "
            f"{_plural(steps, 'optimizer step', 'optimizer steps')}; {expect}",
            message_zh=f"实测：`{scheduler}.step()` 执行了 {count} 次，优化器步数为 {steps}；"
            f"{expect_zh}",
            summary=f"{count} scheduler steps for {steps} optimizer steps",
            summary_zh=f"{steps} 个优化器步对应 {count} 次调度器步",
            measured=m,
            **where,
        )
    return None
