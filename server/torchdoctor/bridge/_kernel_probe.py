"""Kernel-side probe: reads metadata of live objects in a Jupyter kernel.

This file is not imported by torchdoctor. Its source text is sent to the kernel once and
installed there as a private module in ``sys.modules`` (never in the user's namespace); the
client then calls ``probe(request_json)`` through a silent ``user_expressions`` entry.

Rules kept here (each one was shown to matter):
- stdlib and an already imported ``torch`` only; if torch is not imported, answer "no torch"
  and import nothing;
- names are resolved by dictionary lookups only (the namespace dict, instance ``__dict__`` read
  through the C-level descriptor, ``nn.Module._parameters/_buffers/_modules``), never
  ``getattr``, so no user ``__getattr__``/``__class__``/property ever runs;
- metadata only: no data, no ``repr``/``str`` of objects, no ``.item()``/``.cpu()``, no CUDA sync,
  CUDA never initialised;
- every field is read in its own ``try`` under ``torch._C.DisableTorchFunctionSubclass()``.
"""

import json
import os
import sys

_DICT_DESCRIPTOR = type.__dict__["__dict__"]
_MRO = type.__dict__["__mro__"]
_QUALNAME = type.__dict__["__qualname__"]
_MODULE_ATTR = type.__dict__["__module__"]
_GETSET = type(type.__dict__["__dict__"])
_MAX_NAMES = 256
_MAX_DEPTH = 8
_MAX_MODULES = 200_000
_FLOATING = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")


def _torch():
    return sys.modules.get("torch")


def _mro(cls):
    try:
        return _MRO.__get__(cls)
    except Exception:
        return ()


def _is_sub(cls, base):
    return base is not None and base in _mro(cls)


def _type_name(cls):
    try:
        module = _MODULE_ATTR.__get__(cls)
    except Exception:
        module = None
    try:
        name = _QUALNAME.__get__(cls)
    except Exception:
        name = "?"
    if not isinstance(name, str):
        name = "?"
    if isinstance(module, str) and module not in ("builtins", "__main__"):
        return module + "." + name
    return name


def _instance_dict(obj):
    """The instance ``__dict__`` through the C-level descriptor, or None.

    A class that defines ``__dict__`` itself (a property, say) is not read at all.
    """
    for klass in _mro(type(obj)):
        try:
            cls_dict = _DICT_DESCRIPTOR.__get__(klass)
        except Exception:
            return None
        if "__dict__" in cls_dict:
            descriptor = cls_dict["__dict__"]
            if type(descriptor) is not _GETSET:
                return None
            try:
                value = descriptor.__get__(obj)
            except Exception:
                return None
            return value if type(value) is dict else None
    return None


def _namespace():
    # The caller is the ``eval`` frame of ``user_expressions``: its locals are the user namespace.
    frame = sys._getframe(2)
    ns = frame.f_locals
    return ns if isinstance(ns, dict) else frame.f_globals


def _lookup(mapping, key):
    if type(mapping) is not dict:
        return False, None
    try:
        value = dict.get(mapping, key, _MISSING)
    except Exception:
        return False, None
    return (value is not _MISSING), value


_MISSING = object()


def _resolve(ns, dotted, torch):
    parts = dotted.split(".")
    found, obj = _lookup(ns, parts[0])
    if not found:
        return False, None
    module_cls = torch.nn.Module if torch is not None else None
    for part in parts[1:]:
        inst = _instance_dict(obj)
        if inst is None:
            return False, None
        if module_cls is not None and _is_sub(type(obj), module_cls):
            hit = False
            for slot in ("_parameters", "_buffers", "_modules"):
                ok, sub = _lookup(inst, slot)
                if ok:
                    ok, value = _lookup(sub, part)
                    if ok:
                        obj, hit = value, True
                        break
            if hit:
                continue
        ok, value = _lookup(inst, part)
        if not ok:
            return False, None
        obj = value
    return True, obj


def _read(out, key, fn):
    try:
        out[key] = fn()
    except Exception:
        out[key] = None


def _tensor_facts(t, torch):
    out = {"kind": "tensor"}
    cls = type(t)
    if cls is not torch.Tensor:
        out["type"] = _type_name(cls)
    with torch._C.DisableTorchFunctionSubclass():
        _read(out, "shape", lambda: [int(s) for s in t.shape])
        _read(out, "dtype", lambda: str(t.dtype))
        _read(out, "device", lambda: str(t.device))
        _read(out, "layout", lambda: str(t.layout))
        strided = out.get("layout") == "torch.strided"
        _read(out, "stride", lambda: [int(s) for s in t.stride()] if strided else None)
        _read(out, "storage_offset", lambda: int(t.storage_offset()) if strided else None)
        _read(out, "is_contiguous", lambda: bool(t.is_contiguous()) if strided else None)

        def channels_last():
            ndim = t.dim()
            if not strided or ndim not in (4, 5):
                return None
            fmt = torch.channels_last if ndim == 4 else torch.channels_last_3d
            return bool(t.is_contiguous(memory_format=fmt))

        _read(out, "channels_last", channels_last)
        _read(out, "is_view", lambda: bool(t._is_view()))
        _read(out, "nbytes", lambda: int(t.numel()) * int(t.element_size()))
        _read(out, "storage_nbytes", lambda: int(t.untyped_storage().nbytes()) if strided else None)
        _read(out, "requires_grad", lambda: bool(t.requires_grad))
        _read(out, "is_leaf", lambda: bool(t.is_leaf))

        def grad_fn():
            node = t.grad_fn
            return None if node is None else _type_name(type(node)).rsplit(".", 1)[-1]

        _read(out, "grad_fn", grad_fn)
        _read(out, "retains_grad", lambda: bool(t.retains_grad))

        def has_grad():
            # ``.grad`` only for leaves or retains_grad tensors (else PyTorch warns).
            if out.get("is_leaf") or out.get("retains_grad"):
                return t.grad is not None
            return None

        _read(out, "has_grad", has_grad)
        _read(out, "is_inference", lambda: bool(t.is_inference()))

        def pinned():
            # Only ask on CPU tensors once CUDA is initialised: never initialise CUDA.
            if out.get("device") != "cpu" or not strided:
                return False
            if not torch.cuda.is_initialized():
                return False
            return bool(t.is_pinned())

        _read(out, "is_pinned", pinned)
        _read(out, "is_quantized", lambda: bool(t.is_quantized))
        _read(out, "is_nested", lambda: bool(t.is_nested))
    return out


def _module_facts(m, torch):
    out = {"kind": "module", "type": _type_name(type(m))}
    params: list = []
    buffers: list = []
    seen_modules: set = set()
    seen_tensors: set = set()
    stack = [m]
    training = None
    while stack and len(seen_modules) < _MAX_MODULES:
        mod = stack.pop()
        if id(mod) in seen_modules:
            continue
        seen_modules.add(id(mod))
        inst = _instance_dict(mod)
        if inst is None:
            continue
        if mod is m:
            ok, value = _lookup(inst, "training")
            training = bool(value) if ok and type(value) is bool else None
        for slot, sink in (("_parameters", params), ("_buffers", buffers)):
            ok, tensors = _lookup(inst, slot)
            if ok and type(tensors) is dict:
                for value in tensors.values():
                    if value is not None and id(value) not in seen_tensors:
                        if _is_sub(type(value), torch.Tensor):
                            seen_tensors.add(id(value))
                            sink.append(value)
        ok, children = _lookup(inst, "_modules")
        if ok and type(children) is dict:
            # Reversed so that the first child is visited first (the "first parameter").
            for child in reversed(list(children.values())):
                if child is not None and _is_sub(type(child), torch.nn.Module):
                    stack.append(child)
    out["training"] = training
    with torch._C.DisableTorchFunctionSubclass():
        total = trainable = 0
        devices = []
        dtypes = []
        first_device = first_dtype = None
        for p in params:
            try:
                n = int(p.numel())
                total += n
                if p.requires_grad:
                    trainable += n
                device, dtype = str(p.device), str(p.dtype)
            except Exception:
                continue
            if first_device is None:
                first_device, first_dtype = device, dtype
            if device not in devices:
                devices.append(device)
            if dtype not in dtypes:
                dtypes.append(dtype)
        for b in buffers:
            try:
                device, dtype = str(b.device), str(b.dtype)
            except Exception:
                continue
            if device not in devices:
                devices.append(device)
            if not params and dtype in _FLOATING and dtype not in dtypes:
                dtypes.append(dtype)
    out["num_parameters"] = total
    out["trainable_parameters"] = trainable
    out["num_buffers"] = len(buffers)
    out["devices"] = devices
    out["dtypes"] = dtypes
    out["first_device"] = first_device
    out["first_dtype"] = first_dtype
    return out


def _view(facts, spec, resolved, torch):
    """Replay ``view(shape)`` on a meta tensor with the same sizes, strides and dtype."""
    shape = []
    for item in spec:
        if type(item) is int:
            shape.append(item)
            continue
        name, dim = item
        other = resolved.get(name)
        if other is None or other.get("kind") != "tensor" or other.get("shape") is None:
            return {"spec": spec, "shape": None, "ok": None, "error": None}
        dims = other["shape"]
        if not -len(dims) <= dim < len(dims):
            return {"spec": spec, "shape": None, "ok": None, "error": None}
        shape.append(dims[dim])
    result = {"spec": spec, "shape": shape, "ok": None, "error": None}
    if facts.get("layout") != "torch.strided" or facts.get("stride") is None:
        return result
    dtype = _dtype_of(torch, facts.get("dtype"))
    if dtype is None:
        return result
    try:
        with torch._C.DisableTorchFunctionSubclass():
            base = torch.empty_strided(facts["shape"], facts["stride"], dtype=dtype, device="meta")
            base.view(shape)
        result["ok"] = True
    except RuntimeError as exc:
        result["ok"] = False
        result["error"] = str(exc)
    except Exception as exc:
        result["ok"] = False
        result["error"] = type(exc).__name__ + ": " + str(exc)
    return result


def _dtype_of(torch, name):
    # ``torch`` is the library itself, not a user object: reading its dtype constants is safe.
    if not isinstance(name, str) or not name.startswith("torch."):
        return None
    value = torch.__dict__.get(name[len("torch.") :])
    return value if isinstance(value, torch.dtype) else None


def _kernel_facts(ns, torch):
    out: dict = {"pid": os.getpid(), "torch": None, "cuda_initialized": None}
    ok, nb = _lookup(ns, "__vsc_ipynb_file__")
    out["vscode_notebook"] = nb if ok and type(nb) is str else None
    out["session_name"] = os.environ.get("JPY_SESSION_NAME")
    mp = sys.modules.get("multiprocessing")
    method = None
    if mp is not None:
        try:
            method = mp.get_start_method(allow_none=True) or mp.get_all_start_methods()[0]
        except Exception:
            method = None
    out["start_method"] = method
    out["platform"] = sys.platform
    if torch is not None:
        try:
            out["torch"] = str(torch.__version__)
        except Exception:
            out["torch"] = "?"
        try:
            out["cuda_initialized"] = bool(torch.cuda.is_initialized())
        except Exception:
            out["cuda_initialized"] = None
    return out


def _facts_for(obj, torch):
    if torch is None:
        return {"kind": "no-torch"}
    cls = type(obj)
    if _is_sub(cls, torch.Tensor):
        return _tensor_facts(obj, torch)
    if _is_sub(cls, torch.nn.Module):
        return _module_facts(obj, torch)
    return {"kind": "other", "type": _type_name(cls)}


def probe(request):
    """Answer one request (a JSON string) with a JSON string."""
    req = json.loads(request)
    ns = _namespace()
    torch = _torch()
    names = [n for n in req.get("names", ()) if type(n) is str][:_MAX_NAMES]
    facts: dict = {}
    for name in names:
        try:
            found, obj = _resolve(ns, name, torch)
            if not found:
                facts[name] = {"kind": "missing"}
            else:
                facts[name] = _facts_for(obj, torch)
        except Exception as exc:
            facts[name] = {"kind": "error", "error": type(exc).__name__}
        obj = None
    if torch is not None:
        for entry in req.get("views", ()):
            try:
                name, spec = entry[0], entry[1]
                target = facts.get(name)
                if target is None or target.get("kind") != "tensor":
                    continue
                target.setdefault("views", {})[json.dumps(spec)] = _view(target, spec, facts, torch)
            except Exception:
                continue
    reply = {"v": 1, "facts": facts}
    if req.get("kernel"):
        reply["kernel"] = _kernel_facts(ns, torch)
    return json.dumps(reply)
