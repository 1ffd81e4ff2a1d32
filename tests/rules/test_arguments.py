"""``core.arguments``: a call's positional and keyword arguments bound to the real signature of
the torch API it calls; ``*args`` / ``**kwargs`` make a parameter unknown, never a guess."""

from __future__ import annotations

import ast
import inspect

import pytest

from torchdoctor.core import arguments


def _call(code: str) -> ast.Call:
    node = ast.parse(code, mode="eval").body
    assert isinstance(node, ast.Call)
    return node


def _text(expr: ast.AST | None) -> str | None:
    return None if expr is None else ast.unparse(expr)


@pytest.mark.parametrize(
    ("api", "code", "name", "value", "given"),
    [
        (
            arguments.DATALOADER,
            "DataLoader(ds, 10, False, None, None, 2)",
            "num_workers",
            "2",
            True,
        ),
        (arguments.DATALOADER, "DataLoader(ds, num_workers=2)", "num_workers", "2", True),
        (arguments.DATALOADER, "DataLoader(ds, 10)", "num_workers", None, False),
        (arguments.DATALOADER, "DataLoader(ds, 10, *rest)", "num_workers", None, None),
        (arguments.DATALOADER, "DataLoader(ds, **kw)", "num_workers", None, None),
        # After a spread, positions are unknown: the `2` binds to nothing.
        (arguments.DATALOADER, "DataLoader(*a, 2)", "batch_size", None, None),
        # Keyword-only parameters are not reached by a positional spread.
        (arguments.DATALOADER, "DataLoader(ds, *rest)", "persistent_workers", None, False),
        (arguments.LOAD, "torch.load(f, 'cpu')", "map_location", "'cpu'", True),
        (arguments.LOAD, "torch.load(f, 'cpu', dill)", "pickle_module", "dill", True),
        (arguments.LOAD, "torch.load(f, encoding='latin1')", "weights_only", None, False),
        (arguments.SAVE, "torch.save(sd, path)", "f", "path", True),
        # checkpoint's extra positional arguments are the function's.
        (arguments.CHECKPOINT, "checkpoint(fn, x, False)", "use_reentrant", None, False),
        (arguments.CHECKPOINT, "checkpoint(fn, x, **kw)", "use_reentrant", None, None),
        (arguments.CHECKPOINT_SEQUENTIAL, "cs(fs, 2, x, False)", "use_reentrant", "False", True),
        (arguments.ZERO_GRAD, "opt.zero_grad(False)", "set_to_none", "False", True),
        (arguments.DDP, "DDP(m, [rank])", "device_ids", "[rank]", True),
        (arguments.SUM, "torch.sum(e, 1, True)", "keepdim", "True", True),
    ],
)
def test_bind(api: str, code: str, name: str, value: str | None, given: bool | None) -> None:
    bound = arguments.bind(_call(code), api)
    assert _text(bound.value(name)) == value
    assert bound.given(name) is given


def test_bind_as_unknown_api_reads_keywords_only() -> None:
    bound = arguments.bind_as(_call("f(a, b, enabled=False)"), "mylib.f")
    assert _text(bound.value("enabled")) == "False"
    assert bound.value("a") is None


def test_autocast_positional_enabled_differs_by_api() -> None:
    assert (
        _text(arguments.bind_as(_call("a('cuda', None, False)"), "torch.autocast").value("enabled"))
        == "False"
    )
    assert (
        _text(arguments.bind_as(_call("a(False)"), "torch.cuda.amp.autocast").value("enabled"))
        == "False"
    )


def test_signatures_match_the_installed_torch() -> None:
    """The table's parameter order is torch's own (checked where torch is installed)."""
    torch = pytest.importorskip("torch")
    import torch.utils.checkpoint as checkpoint
    import torch.utils.data as data

    real = {
        arguments.DATALOADER: data.DataLoader.__init__,
        arguments.LOAD: torch.load,
        arguments.SAVE: torch.save,
        arguments.CLIP_GRAD_NORM: torch.nn.utils.clip_grad_norm_,
        arguments.CLIP_GRAD_VALUE: torch.nn.utils.clip_grad_value_,
        arguments.CHECKPOINT_SEQUENTIAL: checkpoint.checkpoint_sequential,
        arguments.DISTRIBUTED_SAMPLER: data.distributed.DistributedSampler.__init__,
        arguments.ZERO_GRAD: torch.optim.Optimizer.zero_grad,
        arguments.LOAD_STATE_DICT: torch.nn.Module.load_state_dict,
        arguments.GRAD_SCALER: torch.amp.GradScaler.__init__,
        arguments.AUTOCAST: torch.autocast.__init__,
    }
    for api, func in real.items():
        params = [
            p.name
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
        ]
        assert list(arguments.SIGNATURES[api].positional) == params, api
