"""From what the instrumented process measured to findings: the rule code, English and Chinese."""

from __future__ import annotations

from typing import Any

from ..core.model import is_chinese
from .report import MeasuredFinding, Report

#: A code that no static rule has: host-device synchronisations in the training loop are only
#: ever measured (a static rule cannot know which tensor lives on the GPU).
SYNC_CODE = "TDR408"
#: PyTorch's profiler anti-patterns (``torchdoctor run --profile``) that no static rule has.
PROFILER_CODE = "TDR409"

#: Measured-only codes, with a name and a one-line description (English, Chinese).
MEASURED_ONLY = {
    SYNC_CODE: (
        "host-device-sync-in-loop",
        "A call in the training loop copies a tensor's value to the host: on a GPU, every such "
        "call waits for all queued kernels.",
        "训练循环中的调用把张量的值复制到主机：在 GPU 上，每次这样的调用都要等待所有排队的内核。",
    ),
    PROFILER_CODE: (
        "profiler-anti-pattern",
        "PyTorch's profiler matched one of its anti-patterns (a loop indexing a tensor element by "
        "element, a Conv2d with a bias followed by BatchNorm2d, a single-tensor optimizer, FP32 "
        "matmuls where TF32 is available, a tensor filled on the CPU and copied to the GPU, an "
        "FP16 matmul with dimensions not multiple of 8) in steps run under `torch.profiler`.",
        "PyTorch 性能分析器在 `torch.profiler` 下运行的步中匹配到它的一种反模式（逐元素索引张量的"
        "循环、带偏置且后接 BatchNorm2d 的 Conv2d、单张量实现的优化器、可用 TF32 时的 FP32 矩阵乘法、"
        "在 CPU 上填充再复制到 GPU 的张量、维度不是 8 的倍数的 FP16 矩阵乘法）。",
    ),
}

#: What each pattern of ``torch.profiler._pattern_matcher`` means, and what to do (English,
#: Chinese).
PATTERNS: dict[str, tuple[str, str, str, str]] = {
    # pattern: (what, what_zh, advice, advice_zh)
    "GradNotSetToNonePattern": (
        "`zero_grad` wrote zeros into the gradients",
        "`zero_grad` 向梯度写入了零",
        "drop `set_to_none=False` so that gradients are set to None",
        "去掉 `set_to_none=False`，让梯度置为 None",
    ),
    "ForLoopIndexingPattern": (
        "a loop indexed a tensor one element at a time",
        "循环逐个元素地索引张量",
        "vectorise it (one indexing with a tensor of indices, or a slice)",
        "请向量化（用索引张量或切片一次完成）",
    ),
    "Conv2dBiasFollowedByBatchNorm2dPattern": (
        "a Conv2d with a bias was followed by BatchNorm2d, which cancels the bias",
        "带偏置的 Conv2d 后接 BatchNorm2d，偏置被抵消",
        "pass `bias=False` to that Conv2d",
        "请给该 Conv2d 传入 `bias=False`",
    ),
    "OptimizerSingleTensorPattern": (
        "the optimizer ran its single-tensor implementation",
        "优化器使用了单张量实现",
        "pass `foreach=True` (or `fused=True`) to the optimizer",
        "请给优化器传入 `foreach=True`（或 `fused=True`）",
    ),
    "FP32MatMulPattern": (
        "matrix multiplications ran in FP32 on a GPU that supports TF32",
        "在支持 TF32 的 GPU 上以 FP32 做矩阵乘法",
        "allow TF32 (`torch.backends.cuda.matmul.allow_tf32 = True`) where its precision is enough",
        "在精度足够时允许 TF32（`torch.backends.cuda.matmul.allow_tf32 = True`）",
    ),
    "ExtraCUDACopyPattern": (
        "a tensor was filled on the CPU and then copied to the GPU",
        "张量先在 CPU 上填充再复制到 GPU",
        "create it on the GPU (`device=`)",
        "请直接在 GPU 上创建（`device=`）",
    ),
    "MatMulDimInFP16Pattern": (
        "FP16/BF16 matrix multiplications had dimensions not multiple of 8",
        "FP16/BF16 矩阵乘法的维度不是 8 的倍数",
        "pad the dimensions to multiples of 8",
        "请把维度补齐到 8 的倍数",
    ),
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
    if kind == "profiler-pattern":
        return _profiler_pattern(item, m, where)
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


def _profiler_pattern(
    item: dict[str, Any], m: dict[str, Any], where: dict[str, Any]
) -> MeasuredFinding | None:
    pattern = str(item.get("pattern") or "")
    text = PATTERNS.get(pattern)
    if text is None:
        return None
    what, what_zh, advice, advice_zh = text
    count, steps = int(m.get("count", 0)), int(m.get("steps", 0))
    code = str(item.get("code") or PROFILER_CODE)
    if code not in ("TDR111", PROFILER_CODE):
        code = PROFILER_CODE
    return MeasuredFinding(
        code=code,
        message=f"Measured by PyTorch's profiler ({pattern}): {what}, "
        f"{_plural(count, 'time', 'times')} in {_plural(steps, 'profiled step', 'profiled steps')}"
        f"; {advice}",
        message_zh=f"PyTorch 性能分析器实测（{pattern}）：{what_zh}，在 {steps} 个分析步中 "
        f"{count} 次；{advice_zh}",
        summary=f"profiler: {what} ({count}x in {steps} steps)",
        summary_zh=f"性能分析器：{what_zh}（{steps} 步中 {count} 次）",
        measured=m,
        **where,
    )


def profile_note(report: Report, locale: str) -> str | None:
    """One sentence on what ``--profile`` did, or why it could not."""
    p = report.profile
    if p is None:
        return None
    status, detail = str(p.get("status") or ""), str(p.get("detail") or "")
    steps, patterns = int(p.get("steps") or 0), [str(x) for x in p.get("patterns") or []]
    zh = is_chinese(locale)
    if status == "ok":
        names = ", ".join(patterns) or "-"
        if zh:
            text = f"性能分析：在 torch.profiler 下运行了 {steps} 步，检查了 PyTorch 的反模式：{names}。"
            return text + (f"（{detail}）" if detail else "")
        text = (
            f"Profiled {steps} {'step' if steps == 1 else 'steps'} under torch.profiler; "
            f"PyTorch's anti-patterns checked: {names}."
        )
        return text + (f" ({detail})" if detail else "")
    if status == "unavailable":
        if zh:
            return (
                "性能分析：此 torch 中 PyTorch 的反模式匹配器（私有模块 "
                f"torch.profiler._pattern_matcher）不可用（{detail}），未做匹配。"
            )
        return (
            "Profile: PyTorch's anti-pattern matcher (the private module "
            f"torch.profiler._pattern_matcher) is not usable with this torch ({detail}); "
            "nothing was matched."
        )
    if zh:
        return "性能分析：脚本的优化器步数太少（至少需要 2 步），未运行性能分析器。"
    return (
        "Profile: the script made too few optimizer steps (2 at least); the profiler did not run."
    )
