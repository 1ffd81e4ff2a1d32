"""Binding a call's arguments to the real signature of the torch API it calls.

``DataLoader(ds, 10, False, None, None, 2)`` and ``DataLoader(ds, num_workers=2, batch_size=10)``
pass the same ``num_workers``: every rule asks ``bind(call, DATALOADER).value("num_workers")``
and gets the same answer for both. A parameter that ``*args`` or ``**kwargs`` may hold is
*unknown*: the rule is told so (``Bound.unknown``) rather than handed a guess.

The signatures are those of torch 2.13 (read with ``inspect.signature``), keyed by the qualified
name rules resolve calls to; methods (``zero_grad``, ``load_state_dict``) are keyed by a name of
their own and bound without ``self``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Signature:
    """Parameters that may be passed by position, in order; keyword-only ones; and whether the
    function takes ``*args`` (extra positional arguments then bind to nothing known) and
    ``**kwargs`` (an unknown keyword is then accepted, not an error)."""

    positional: tuple[str, ...]
    keyword_only: tuple[str, ...] = ()
    var_positional: bool = False
    var_keyword: bool = False

    def accepts(self, name: str) -> bool:
        return name in self.positional or name in self.keyword_only


def _sig(text: str) -> Signature:
    """``"a, b, *, c, **"`` -> a Signature (``*args`` spelled ``*`` followed by parameters,
    ``*args`` alone as ``*args``)."""
    positional: list[str] = []
    keyword_only: list[str] = []
    var_positional = var_keyword = False
    after_star = False
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == "**":
            var_keyword = True
        elif part in ("*", "*args"):
            after_star = True
            var_positional = var_positional or part == "*args"
        elif after_star:
            keyword_only.append(part)
        else:
            positional.append(part)
    return Signature(tuple(positional), tuple(keyword_only), var_positional, var_keyword)


DATALOADER = "torch.utils.data.DataLoader"
DISTRIBUTED_SAMPLER = "torch.utils.data.distributed.DistributedSampler"
DDP = "torch.nn.parallel.DistributedDataParallel"
DATA_PARALLEL = "torch.nn.parallel.DataParallel"
LOAD = "torch.load"
SAVE = "torch.save"
CHECKPOINT = "torch.utils.checkpoint.checkpoint"
CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"
CLIP_GRAD_NORM = "torch.nn.utils.clip_grad_norm_"
CLIP_GRAD_VALUE = "torch.nn.utils.clip_grad_value_"
ONNX_EXPORT = "torch.onnx.export"
EXPORT = "torch.export.export"
GRAD_SCALER = "torch.amp.GradScaler"
CUDA_GRAD_SCALER = "torch.cuda.amp.GradScaler"
AUTOCAST = "torch.autocast"
CUDA_AUTOCAST = "torch.cuda.amp.autocast"
JIT_TRACE = "torch.jit.trace"
COMPILE = "torch.compile"
SUM = "torch.sum"
# Methods, bound without ``self``.
TENSOR_BACKWARD = "backward"  # torch.Tensor.backward
ZERO_GRAD = "zero_grad"  # torch.optim.Optimizer.zero_grad, torch.nn.Module.zero_grad
LOAD_STATE_DICT = "load_state_dict"  # torch.nn.Module.load_state_dict
MODULE_TRAIN = "train"  # torch.nn.Module.train

SIGNATURES: dict[str, Signature] = {
    DATALOADER: _sig(
        "dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, "
        "pin_memory, drop_last, timeout, worker_init_fn, multiprocessing_context, generator, "
        "*, prefetch_factor, persistent_workers, pin_memory_device, in_order"
    ),
    DISTRIBUTED_SAMPLER: _sig("dataset, num_replicas, rank, shuffle, seed, drop_last"),
    DDP: _sig(
        "module, device_ids, output_device, dim, broadcast_buffers, init_sync, process_group, "
        "bucket_cap_mb, find_unused_parameters, check_reduction, gradient_as_bucket_view, "
        "static_graph, delay_all_reduce_named_params, param_to_hook_all_reduce, "
        "mixed_precision, device_mesh, skip_all_reduce_unused_params, bucket_cap_mb_list, "
        "batched_grad_copy, forward_sync_buffers"
    ),
    DATA_PARALLEL: _sig("module, device_ids, output_device, dim"),
    LOAD: _sig("f, map_location, pickle_module, *, weights_only, mmap, **"),
    SAVE: _sig(
        "obj, f, pickle_module, pickle_protocol, _use_new_zipfile_serialization, "
        "_disable_byteorder_record"
    ),
    # ``*args`` and ``**kwargs`` go to ``function``: no positional argument after it is one of
    # checkpoint's own parameters, and ``**kwargs`` may still hold ``use_reentrant``.
    CHECKPOINT: _sig(
        "function, *args, use_reentrant, context_fn, determinism_check, debug, early_stop, **"
    ),
    CHECKPOINT_SEQUENTIAL: _sig("functions, segments, input, use_reentrant, **"),
    CLIP_GRAD_NORM: _sig("parameters, max_norm, norm_type, error_if_nonfinite, foreach"),
    CLIP_GRAD_VALUE: _sig("parameters, clip_value, foreach"),
    ONNX_EXPORT: _sig(
        "model, args, f, *, kwargs, verbose, input_names, output_names, opset_version, dynamo, "
        "external_data, dynamic_shapes, custom_translation_table, report, optimize, verify, "
        "profile, dump_exported_program, artifacts_dir, export_params, "
        "keep_initializers_as_inputs, dynamic_axes, training, operator_export_type, "
        "do_constant_folding, custom_opsets, export_modules_as_functions, autograd_inlining"
    ),
    EXPORT: _sig(
        "mod, args, kwargs, *, dynamic_shapes, strict, preserve_module_call_signature, "
        "prefer_deferred_runtime_asserts_over_guards"
    ),
    GRAD_SCALER: _sig(
        "device, init_scale, growth_factor, backoff_factor, growth_interval, enabled"
    ),
    CUDA_GRAD_SCALER: _sig("init_scale, growth_factor, backoff_factor, growth_interval, enabled"),
    AUTOCAST: _sig("device_type, dtype, enabled, cache_enabled"),
    CUDA_AUTOCAST: _sig("enabled, dtype, cache_enabled"),
    JIT_TRACE: _sig(
        "func, example_inputs, optimize, check_trace, check_inputs, check_tolerance, strict, "
        "_force_outplace, _module_class, _compilation_unit, example_kwarg_inputs, _store_inputs"
    ),
    "torch.optim.lr_scheduler.StepLR": _sig("optimizer, step_size, gamma, last_epoch"),
    "torch.optim.lr_scheduler.MultiStepLR": _sig("optimizer, milestones, gamma, last_epoch"),
    COMPILE: _sig("model, *, fullgraph, dynamic, backend, mode, options, name, disable"),
    # torch.sum(input, dim, keepdim=False, *, dtype=None); torch.sum(input, *, dtype=None).
    SUM: _sig("input, dim, keepdim, *, dtype, out"),
    "torch.autograd.backward": _sig(
        "tensors, grad_tensors, retain_graph, create_graph, grad_variables, inputs"
    ),
    "torch.autograd.grad": _sig(
        "outputs, inputs, grad_outputs, retain_graph, create_graph, only_inputs, allow_unused, "
        "is_grads_batched, materialize_grads"
    ),
    TENSOR_BACKWARD: _sig("gradient, retain_graph, create_graph, inputs"),
    "torch.inference_mode": _sig("mode"),
    "torch.set_grad_enabled": _sig("mode"),
    ZERO_GRAD: _sig("set_to_none"),
    LOAD_STATE_DICT: _sig("state_dict, strict, assign"),
    MODULE_TRAIN: _sig("mode"),
}
# Other names of the same callables.
SIGNATURES["torch.utils.data.dataloader.DataLoader"] = SIGNATURES[DATALOADER]
SIGNATURES["torch.utils.data.DistributedSampler"] = SIGNATURES[DISTRIBUTED_SAMPLER]
SIGNATURES["torch.serialization.load"] = SIGNATURES[LOAD]
SIGNATURES["torch.serialization.save"] = SIGNATURES[SAVE]
SIGNATURES["torch.nn.DataParallel"] = SIGNATURES[DATA_PARALLEL]
SIGNATURES["torch.nn.parallel.distributed.DistributedDataParallel"] = SIGNATURES[DDP]
SIGNATURES["torch.nn.utils.clip_grad.clip_grad_norm_"] = SIGNATURES[CLIP_GRAD_NORM]
SIGNATURES["torch.nn.utils.clip_grad.clip_grad_value_"] = SIGNATURES[CLIP_GRAD_VALUE]
SIGNATURES["torch.nn.utils.clip_grad_norm"] = SIGNATURES[CLIP_GRAD_NORM]
SIGNATURES["torch.amp.autocast"] = SIGNATURES[AUTOCAST]
SIGNATURES["torch.amp.autocast_mode.autocast"] = SIGNATURES[AUTOCAST]
SIGNATURES["torch.cpu.amp.autocast"] = SIGNATURES[CUDA_AUTOCAST]
SIGNATURES["torch.cpu.amp.GradScaler"] = SIGNATURES[CUDA_GRAD_SCALER]


@dataclass
class Bound:
    """What a call passes, bound to a signature."""

    signature: Signature
    values: dict[str, ast.expr] = field(default_factory=dict)
    keywords: dict[str, ast.keyword] = field(default_factory=dict)
    # Parameters (``*``: every parameter not given) that ``*args``/``**kwargs`` may hold.
    maybe: set[str] = field(default_factory=set)
    spread_keywords: bool = False

    def value(self, name: str) -> ast.expr | None:
        """The expression passed for ``name`` (by position or keyword); None when not given
        explicitly (left out, or possibly inside ``*args``/``**kwargs``: see ``unknown``)."""
        return self.values.get(name)

    def keyword(self, name: str) -> ast.keyword | None:
        """The ``name=...`` keyword of the call, when the parameter is passed by keyword."""
        return self.keywords.get(name)

    def node(self, name: str) -> ast.AST | None:
        """What to point at or remove for ``name``: its keyword, else its positional value."""
        return self.keywords.get(name) or self.values.get(name)

    def unknown(self, name: str) -> bool:
        """Whether ``*args`` or ``**kwargs`` may pass ``name`` (it is not given explicitly)."""
        if name in self.values:
            return False
        return name in self.maybe or "*" in self.maybe

    def given(self, name: str) -> bool | None:
        """True when passed explicitly, False when surely left out, None when unknown."""
        if name in self.values:
            return True
        return None if self.unknown(name) else False

    def may_pass(self, name: str) -> bool:
        """Passed explicitly, or possibly through ``*args``/``**kwargs``."""
        return self.given(name) is not False


def bind(call: ast.Call, api: str | Signature) -> Bound:
    """Bind ``call``'s arguments to ``api`` (a key of ``SIGNATURES``, or a Signature).
    Positional arguments fill the positional parameters in order; an argument after a
    ``*spread`` binds to nothing known, and every parameter it could reach is unknown."""
    signature = api if isinstance(api, Signature) else SIGNATURES[api]
    bound = Bound(signature)
    spread_at: int | None = None
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            spread_at = index if spread_at is None else spread_at
            continue
        if spread_at is not None or index >= len(signature.positional):
            continue  # after a spread (position unknown) or into *args
        bound.values[signature.positional[index]] = arg
    if spread_at is not None:
        bound.maybe.update(signature.positional[spread_at:])
    for kw in call.keywords:
        if kw.arg is None:
            bound.spread_keywords = True
            bound.maybe.add("*")
        else:
            bound.keywords[kw.arg] = kw
            bound.values[kw.arg] = kw.value
    return bound


def value(call: ast.Call, api: str | Signature, name: str) -> ast.expr | None:
    """Shorthand for ``bind(call, api).value(name)``."""
    return bind(call, api).value(name)


def signature_of(func: ast.FunctionDef | ast.AsyncFunctionDef, method: bool = False) -> Signature:
    """The signature of a function defined in the analysed code; ``method``: called through
    an instance or class, so its first parameter (``self``/``cls``) is not passed."""
    args = func.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    if method and positional:
        positional = positional[1:]
    return Signature(
        tuple(positional),
        tuple(a.arg for a in args.kwonlyargs),
        var_positional=args.vararg is not None,
        var_keyword=args.kwarg is not None,
    )


def bind_as(call: ast.Call, qualname: str | None) -> Bound:
    """Bind ``call`` to the signature of ``qualname`` when the table has it; otherwise only
    its keywords are known (a positional argument binds to nothing)."""
    signature = SIGNATURES.get(qualname or "")
    if signature is None:
        signature = Signature((), var_positional=True, var_keyword=True)
    return bind(call, signature)
