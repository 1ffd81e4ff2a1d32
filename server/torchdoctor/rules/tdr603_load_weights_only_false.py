from __future__ import annotations

import ast
import os
from functools import partial

from ..core import arguments, checkpoints, fixes, torch_version
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import is_false, is_none
from .base import Rule
from .examples import tdr603

LOADS = ("torch.load", "torch.serialization.load")


class LoadWeightsOnlyFalse(Rule):
    """## What it does
    Checks for `torch.load(..., weights_only=False)`, except a round trip, which cannot hold
    anyone else's pickle.

    A round trip loads the temporary file or in-memory buffer that the same function has just
    written with `torch.save` (tests that save a whole model and read it back), or any path
    that the same function, or the same module-level block (a `with` statement), has just
    written (a cache of dataset objects read back at once, where `weights_only=False` is
    needed).

    A `torch.load(...)` without `weights_only=` (TorchFix's TOR102) is reported by what it does
    on the target torch version (`target-version`, else the installed one):

    - before 2.6, where `weights_only` still defaults to `False`, as a warning;
    - from 2.6, where the default is `True`, only when the code shows that the load will
      **fail** (`UnpicklingError`) because the checkpoint holds objects the default refuses:
      the loaded value, or an item of it, is used as a module (`model = torch.load(p)` or
      `model = ckpt["model"]`, then `model.eval()` or `model(x)`, also after `model =
      model.cuda()`; only that variable's own uses count, not another value of the same
      name), a key of it is read through attributes (`ckpt["args"].lr`), or this file's own
      `torch.save` (or a saving helper of another module of the project it hands the
      checkpoint to, `save_checkpoint(state, path)`) writes such objects under the keys the load reads (`{"args": args}` with
      `args = parser.parse_args()`, a whole module, an optimizer object, a numpy array) or as
      the whole object to the path the load reads. The default refuses the **whole file**,
      whatever key the code reads afterwards: a load is also reported when any save of the
      project puts such an object (an `argparse.Namespace`, a yacs `CfgNode` or omegaconf
      config, a numpy array, an instance of a dataclass or another class of the project, a
      module, a dataset, an object whose attributes the code reads: `args.lr`,
      `self.cfg.model`) into the file it reads — this file's `torch.save` of the same path
      (keys added with `ckpt["args"] = args` count), a saving helper of another module
      (`save_on_master(*args, **kwargs)`), a save writing a checkpoint dict that holds every
      key the load reads (two at least: the same checkpoint format), or another script in
      the same folder writing the same file name (`train.py` saves what `test.py` loads).
      When nothing of these writes the file (its path comes from the command line), the
      keys the load reads may still tell which save of the project, in any of its modules,
      wrote it: a save that writes every key the load reads without testing for it first
      (keys tested with `"k" in ckpt` or read with `.get` may belong to other formats), and
      that shares two keys with it, or one that is not the weights (not a `state_dict()` at
      the save, not handed to `load_state_dict` at the load: `checkpoint["metric"]` of the
      checkpoints a `CheckpointSaver` class writes with the run's `args`). Every save of the
      project that writes those keys must hold such objects: a weights-only format writing
      the same keys leaves the load alone.
      These are errors: the load fails. Loads inside
      `torch.serialization.safe_globals([...])`, in a `try` whose handler loads the file again,
      or in a file that calls `add_safe_globals`,
      are left alone;
    - with a custom `pickle_module=`, where the default is `False` on every version, as a
      warning.

    Calls in code for other torch versions (an `except TypeError:` handler, a branch of an `if`
    that tests a version) are left alone.

    ## Why is this bad?
    With `weights_only=False`, `torch.load` runs Python's full unpickler: a checkpoint can name
    any importable function and have it called while loading. A model file downloaded from the
    internet, a shared drive or a colleague's bucket can then run arbitrary code on your
    machine, with your credentials.

    Since PyTorch 2.6 `weights_only` defaults to `True`: tensors, state dicts, dicts, lists,
    numbers and strings load without it, and anything else must be allowed by name. Passing
    `weights_only=False` switches that protection off for the whole file.

    ## Example
    ```python
    import torch

    checkpoint = torch.load("checkpoint.pt", map_location="cpu", weights_only=False)
    ```

    ## Use instead
    Leave the default (`weights_only=True`). When the checkpoint holds classes of your own,
    allow exactly those:
    ```python
    import torch

    from mylib.config import TrainConfig

    torch.serialization.add_safe_globals([TrainConfig])
    checkpoint = torch.load("checkpoint.pt", map_location="cpu")
    ```
    `torch.serialization.safe_globals([...])` does the same as a context manager, and
    `torch.serialization.get_unsafe_globals_in_checkpoint(path)` lists what a file needs.
    Better still, save only tensors and plain containers (`model.state_dict()`).

    ## Fix safety
    No fix is offered for `weights_only=False`: keeping it may be a deliberate choice for a file
    you trust, and the classes to allow can only be chosen by you. For a call without
    `weights_only=` before 2.6, the fix adds `weights_only=True`; it is unsafe because a
    checkpoint holding other objects then fails to load until they are allowed. A load that
    fails from 2.6 gets no fix: what to change (the save, the allowed classes, or trusting the
    file) is the user's choice, and `weights_only=True` is what already fails. No fix is offered
    with a custom `pickle_module=`: torch refuses `weights_only=True` together with it.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [`torch.serialization.add_safe_globals`](https://pytorch.org/docs/stable/notes/serialization.html#weights-only)
    - [Python `pickle` security warning](https://docs.python.org/3/library/pickle.html)
    """

    code = "TDR603"
    name = "load-weights-only-false"
    fix_safety = Applicability.UNSAFE

    VALID = tdr603.VALID
    INVALID = tdr603.INVALID

    def check(self, ctx: Context) -> None:
        old_default = torch_version.before(ctx.settings, "2.6")
        for call in ctx.sem.calls_to(*LOADS):
            bound = arguments.bind(call, arguments.LOAD)
            kw = bound.keyword("weights_only")
            if kw is None:
                if (
                    bound.unknown("weights_only")
                    or bound.unknown("pickle_module")
                    or checkpoints.round_trip(ctx.sem, call)
                    or ctx.sem.in_version_fallback(call, ("TypeError",))
                ):
                    continue  # the arguments may hold it, the file is the function's own, or
                    # the code is for a torch without `weights_only`
                pickler = bound.value("pickle_module")
                if pickler is not None and not is_none(pickler):
                    self._report_custom_pickler(ctx, call)
                elif old_default:
                    self._report_missing(ctx, call)
                elif not _allows_globals(ctx, call) and not _retried(ctx, call):
                    evidence = _unpicklable(ctx, call)
                    if evidence is not None:
                        self._report_fails(ctx, call, evidence)
                continue
            if not is_false(kw.value) or checkpoints.round_trip(ctx.sem, call, lasting=True):
                continue  # the function (or block) reads back the file it has just written
            ctx.report(
                kw,
                Text(
                    "`torch.load(..., weights_only=False)` unpickles arbitrary objects: a "
                    "malicious checkpoint can run code when it is loaded",
                    "`torch.load(..., weights_only=False)` 会反序列化任意对象：恶意检查点在加载时即可执行代码",
                ),
            )

    @staticmethod
    def _add_weights_only(ctx: Context, call: ast.Call) -> Fix:
        return Fix(
            Text("Add `weights_only=True`", "添加 `weights_only=True`"),
            (fixes.add_keyword(ctx.source, call, "weights_only=True"),),
            Applicability.UNSAFE,
        )

    def _report_missing(self, ctx: Context, call: ast.Call) -> None:
        ctx.report(
            call,
            Text(
                "`torch.load` without `weights_only=`: before PyTorch 2.6 it unpickles arbitrary "
                "objects by default; pass `weights_only=True`",
                "`torch.load` 未指定 `weights_only=`：在 PyTorch 2.6 之前默认会反序列化任意对象；"
                "请传入 `weights_only=True`",
            ),
            fixes=partial(self._add_weights_only, ctx, call),
        )

    @staticmethod
    def _report_fails(ctx: Context, call: ast.Call, evidence: tuple[ast.AST, Text]) -> None:
        where, what = evidence
        ctx.report(
            call,
            Text(
                f"`torch.load` fails on PyTorch 2.6+ (`UnpicklingError`): the checkpoint holds "
                f"{what.en}, which the default `weights_only=True` refuses; save "
                "`state_dict()` or `vars(args)` instead, or allow the classes with "
                "`torch.serialization.add_safe_globals([...])` (`weights_only=False` only for "
                "files you trust)",
                f"`torch.load` 在 PyTorch 2.6+ 上会失败（`UnpicklingError`）：检查点中含有"
                f"{what.zh}，默认的 `weights_only=True` 会拒绝加载；请改为保存 `state_dict()` 或 "
                "`vars(args)`，或用 `torch.serialization.add_safe_globals([...])` 放行这些类"
                "（只对可信文件使用 `weights_only=False`）",
            ),
            related=[ctx.related(where, Text("what shows it", "依据"))]
            if where is not call
            else [],
            severity=Severity.ERROR,
        )

    @staticmethod
    def _report_custom_pickler(ctx: Context, call: ast.Call) -> None:
        ctx.report(
            call,
            Text(
                "`torch.load(..., pickle_module=...)` without `weights_only=` unpickles arbitrary "
                "objects: with a custom pickle module the default is `weights_only=False`",
                "`torch.load(..., pickle_module=...)` 未指定 `weights_only=` 时会反序列化任意对象："
                "使用自定义 pickle 模块时默认值为 `weights_only=False`",
            ),
        )


_PLAIN_ATTRS = checkpoints.PLAIN_ATTRS
_MODULE_ATTRS = checkpoints.MODULE_ATTRS
_ARGS = Text("an `argparse.Namespace`", "`argparse.Namespace`")
_MODULE = Text("a whole module", "整个模块")
_OBJECT = Text(
    "a Python object other than tensors and plain containers", "张量和普通容器之外的 Python 对象"
)
_HELD = {
    checkpoints.NAMESPACE: _ARGS,
    checkpoints.CONFIG: Text(
        "a config object (yacs `CfgNode`, omegaconf)", "配置对象（yacs `CfgNode`、omegaconf）"
    ),
    checkpoints.NUMPY: Text("a numpy array", "numpy 数组"),
    checkpoints.MODULE: _MODULE,
    checkpoints.DATACLASS: Text("an instance of a class of the project", "项目中某个类的实例"),
    checkpoints.OBJECT: _OBJECT,
}


def _allows_globals(ctx: Context, call: ast.Call) -> bool:
    """The load runs inside ``torch.serialization.safe_globals([...])``, or the file allows
    classes with ``add_safe_globals``: the project already chose what to unpickle."""
    if any(ctx.sem.calls_to("torch.serialization.add_safe_globals")):
        return True
    for with_node in ctx.sem.enclosing_withs(call):
        for item in with_node.items:
            if ctx.qualname(getattr(item.context_expr, "func", item.context_expr)) == (
                "torch.serialization.safe_globals"
            ):
                return True
    return False


def _retried(ctx: Context, call: ast.Call) -> bool:
    """The load runs in a ``try`` whose handler loads again: a failure is caught."""
    child: ast.AST = call
    for anc in ctx.sem.ancestors(call):
        if isinstance(anc, ast.Try) and any(child is s for s in anc.body):
            for handler in anc.handlers:
                if any(
                    isinstance(n, ast.Call) and ctx.qualname(n.func) in LOADS
                    for n in ast.walk(handler)
                ):
                    return True
        child = anc
    return False


def _saved_objects(ctx: Context) -> dict[str, tuple[ast.AST, Text]]:
    """What this file's saves write into checkpoint dicts that ``weights_only=True``
    refuses, by the dict key it is saved under (computed once per file)."""
    known = ctx.sem.memo.get("tdr603-saved-objects")
    if isinstance(known, dict):
        return known
    out: dict[str, tuple[ast.AST, Text]] = {}
    ctx.sem.memo["tdr603-saved-objects"] = out
    for written in checkpoints.writes(ctx.sem):
        for held in written.held:
            if held.key is not None:
                out.setdefault(held.key, (held.node, _HELD[held.what]))
    return out


def _unpicklable(ctx: Context, call: ast.Call) -> tuple[ast.AST, Text] | None:
    """Where the code shows that what this load reads holds objects ``weights_only=True``
    refuses: the loaded value used as a module or an item of it read through attributes, the
    keys it reads saved with such objects by this file, or any such object put into the file
    it reads by a save of the project (this file's, a helper's, another script's)."""
    sem = ctx.sem
    used = checkpoints.module_use(sem, call)
    if used is not None:
        return used, _MODULE
    for use in checkpoints.value_uses(sem, call) or ():
        outer = sem.parent(use)
        if not (isinstance(outer, ast.Subscript) and outer.value is use):
            continue
        key, above = outer.slice, sem.parent(outer)
        if isinstance(above, ast.Assign):
            used = checkpoints.module_use(sem, outer)  # model = ckpt["model"]; model.eval()
            if used is not None:
                return used, _MODULE
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            saved = _saved_objects(ctx)
            if key.value in saved:
                return saved[key.value]
            if isinstance(above, ast.Attribute) and above.attr not in _PLAIN_ATTRS:
                return above, _MODULE if above.attr in _MODULE_ATTRS else _OBJECT
    found = checkpoints.writers_of(sem, call)
    for written in found or checkpoints.format_writers(sem, call):
        for held in written.held:
            what = _HELD[held.what]
            if written.sem is sem:
                return held.node, what
            name = os.path.basename(written.sem.path or "")
            return call, Text(f"{what.en} (saved by `{name}`)", f"{what.zh}（由 `{name}` 保存）")
    return None
