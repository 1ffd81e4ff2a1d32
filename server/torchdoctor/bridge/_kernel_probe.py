"""Kernel-side probe: reads metadata of live objects in a Jupyter kernel.

This file is not imported by torchdoctor. Its source text is sent to the kernel once and
installed there as a private module in ``sys.modules`` (never in the user's namespace); the
client then calls ``probe(request_json)`` through a silent ``user_expressions`` entry.

Rules kept here (each one was shown to matter):
- stdlib and an already imported ``torch`` only; if torch is not imported, answer "no torch"
  and import nothing;
- names are resolved by dictionary lookups only (the namespace dict, instance ``__dict__`` read
  through the C-level descriptor, ``nn.Module._parameters/_buffers/_modules``), never
  ``getattr``, so no user ``__getattr__``/``__class__``/property ever runs; only keys that are
  plain ``str`` are compared (a key's own ``__eq__``/``__hash__`` never runs);
- tensor facts are read through the C-level descriptors of ``torch._C.TensorBase``, never
  through the object's class, so a subclass's Python overrides (``shape``, ``stride``, ...)
  never run; a tensor whose class has ``__torch_dispatch__`` is not read at all (its metadata
  can call back into Python): its type is reported and the facts are marked ``unreadable``;
- metadata only: no data, no ``repr``/``str`` of objects, no ``.item()``/``.cpu()``, no CUDA sync,
  CUDA never initialised;
- every field is read in its own ``try``, with ``__torch_function__`` (subclasses and modes) and
  Python dispatch (modes) disabled;
- the probe's own work is bounded by the request's ``budget`` (seconds): names not reached
  answer ``{"kind": "error", "error": "time limit"}``, a module tree walked only in part is
  marked ``truncated``. A probe never holds a subshell much longer than its client waits;
- ``"scan": true`` (the JupyterLab panel's "Live tensors") also lists the namespace's own
  tensors and modules: top-level names not starting with ``_`` whose value's type is a
  ``torch.Tensor`` or ``torch.nn.Module`` subclass (``type()`` and the MRO only), at most
  ``_MAX_SCAN`` of them, in the namespace's order; the reply names them in ``"scanned"``.
"""

import json
import os
import sys
import time

_DICT_DESCRIPTOR = type.__dict__["__dict__"]
_MODULE_DICT = _DICT_DESCRIPTOR.__get__(type(sys))["__dict__"]  # a module's own __dict__
_MRO = type.__dict__["__mro__"]
_QUALNAME = type.__dict__["__qualname__"]
_MODULE_ATTR = type.__dict__["__module__"]
_FLAGS = type.__dict__["__flags__"]
_HEAPTYPE = 1 << 9
_GETSET = type(type.__dict__["__dict__"])
_MAPPINGPROXY = type(type.__dict__)
_MAX_NAMES = 256
_MAX_SCAN = 64
_MAX_DEPTH = 8
_MAX_MODULES = 200_000
_DEFAULT_BUDGET = 2.0
_MAX_BUDGET = 60.0
_CHECK_EVERY = 256  # items between two looks at the clock in the long loops
_FLOATING = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")
_TENSOR_API = (
    "shape", "dtype", "device", "layout", "requires_grad", "is_leaf", "grad_fn", "retains_grad",
    "grad", "is_quantized", "is_nested", "stride", "storage_offset", "is_contiguous", "dim",
    "numel", "element_size", "_is_view", "untyped_storage", "is_inference", "is_pinned",
)  # fmt: skip
_DISPATCH = "__torch_dispatch__"
_MISSING = object()


def _torch(modules):
    """The imported ``torch`` module; None while ``import torch`` still runs (a probe through a
    subshell can come in the middle of it: its tables, read then, would lack the dtypes)."""
    ok, torch = _lookup(modules, "torch")
    if not ok or type(torch) is not type(sys):
        return None
    found, spec = _lookup(_index(_MODULE_DICT.__get__(torch)), "__spec__")
    if found and spec is not None:
        inst = _index(_instance_dict(spec, {}))
        if inst is not None and _lookup(inst, "_initializing")[1] is True:
            return None
    return torch


def _mro(cls):
    try:
        return _MRO.__get__(cls)
    except Exception:
        return ()


def _is_sub(cls, base):
    # Identity only: ``in`` would call a metaclass's ``__eq__``.
    return base is not None and any(klass is base for klass in _mro(cls))


def _plain_str(value):
    """``value`` as an exact ``str`` (a subclass is copied at C level), else None."""
    if type(value) is str:
        return value
    if _is_sub(type(value), str):
        try:
            return str.__str__(value)
        except Exception:
            return None
    return None


def _pairs(mapping):
    """The (key, value) pairs of a dict or mappingproxy whose key is an exact ``str``.

    Nothing is hashed or compared on the way: a key with its own ``__eq__`` never runs.
    """
    if type(mapping) is dict:
        items = dict.items
    elif type(mapping) is _MAPPINGPROXY:
        items = _MAPPINGPROXY.items
    else:
        return None
    for _ in range(3):
        try:
            return [(k, v) for k, v in list(items(mapping)) if type(k) is str]
        except RuntimeError:  # changed size while it was copied (a cell is running)
            continue
    return None


def _index(mapping):
    """A new dict of ``mapping``'s exact-``str`` keys, safe for ``dict.get`` with a ``str``."""
    pairs = _pairs(mapping)
    return None if pairs is None else dict(pairs)


def _lookup(index, key):
    if type(index) is not dict:
        return False, None
    value = index.get(key, _MISSING)
    return (value is not _MISSING), value


def _class_entry(klass, key):
    for k, v in _pairs(_class_dict(klass)) or ():
        if k == key:
            return True, v
    return False, None


def _class_dict(klass):
    try:
        return _DICT_DESCRIPTOR.__get__(klass)
    except Exception:
        return None


def _type_name(cls):
    module = None
    try:
        if _FLAGS.__get__(cls) & _HEAPTYPE:
            module = _class_entry(cls, "__module__")[1]
        else:
            module = _MODULE_ATTR.__get__(cls)
    except Exception:
        module = None
    try:
        name = _plain_str(_QUALNAME.__get__(cls))
    except Exception:
        name = None
    module = _plain_str(module)
    name = "?" if name is None else name
    if module is not None and module not in ("builtins", "__main__"):
        return module + "." + name
    return name


def _dict_descriptor(cls):
    """The C-level ``__dict__`` descriptor that ``cls``'s instances use, or None (also where a
    class defines ``__dict__`` itself: a property, say)."""
    for klass in _mro(cls):
        if _class_dict(klass) is None:
            return None
        found, descriptor = _class_entry(klass, "__dict__")
        if found:
            return descriptor if type(descriptor) is _GETSET else None
    return None


def _instance_dict(obj, cache):
    """The instance ``__dict__`` through the C-level descriptor, or None. ``cache`` maps
    ``id(class)`` to its descriptor for the length of one probe (the objects keep their
    classes alive meanwhile)."""
    cls = type(obj)
    descriptor = cache.get(id(cls), _MISSING)
    if descriptor is _MISSING:
        descriptor = cache[id(cls)] = _dict_descriptor(cls)
    if descriptor is None:
        return None
    try:
        value = descriptor.__get__(obj)
    except Exception:
        return None
    return value if type(value) is dict else None


def _namespace():
    # The caller is the ``eval`` frame of ``user_expressions``: its locals are the user namespace.
    frame = sys._getframe(2)
    ns = frame.f_locals
    return ns if type(ns) is dict else frame.f_globals


def _resolve(ns_index, dotted, torch, cache):
    parts = dotted.split(".")
    found, obj = _lookup(ns_index, parts[0])
    if not found:
        return False, None
    module_cls = torch.nn.Module if torch is not None else None
    for part in parts[1:]:
        inst = _index(_instance_dict(obj, cache))
        if inst is None:
            return False, None
        if module_cls is not None and _is_sub(type(obj), module_cls):
            hit = False
            for slot in ("_parameters", "_buffers", "_modules"):
                ok, sub = _lookup(inst, slot)
                if ok:
                    ok, value = _lookup(_index(sub), part)
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


class _Clock:
    """The probe's deadline."""

    def __init__(self, budget):
        if type(budget) not in (int, float) or budget != budget:
            budget = _DEFAULT_BUDGET
        self.deadline = time.monotonic() + min(max(float(budget), 0.01), _MAX_BUDGET)

    def late(self):
        return time.monotonic() > self.deadline


def _read(out, key, fn):
    try:
        out[key] = fn()
    except Exception:
        out[key] = None


class _Tensors:
    """Reads tensor facts through ``torch._C.TensorBase``'s own descriptors (never the object's
    class, so no Python override runs)."""

    def __init__(self, torch, clock):
        self.torch = torch
        self.clock = clock
        self.classes = {}  # id(class) -> its instances' __dict__ descriptor (one probe)
        self._python_classes = {}  # id(class) -> whether it defines __torch_dispatch__
        library = _LIBRARY.get("torch")
        if library is None or library[0] is not torch:
            library = _LIBRARY["torch"] = (torch, *_library_tables(torch))
        _torch_obj, self.api, self.dtypes, self.storage_nbytes = library
        self.bases = (torch._C.TensorBase, torch.Tensor)
        keys = torch._C.DispatchKey
        self.python_keys = (keys.Python, keys.PythonTLSSnapshot)

    def get(self, t, name):
        return self.api[name].__get__(t)

    def call(self, t, name, *args, **kwargs):
        return self.api[name](t, *args, **kwargs)

    def dispatches_to_python(self, t):
        """Whether reading ``t``'s metadata may call its class's ``__torch_dispatch__``."""
        try:
            keys = self.torch._C._dispatch_keys(t)
            if any(keys.has(k) for k in self.python_keys):
                return True
        except Exception:
            return True
        cls = type(t)
        known = self._python_classes.get(id(cls))
        if known is None:
            known = False
            for klass in _mro(cls):
                if klass is self.bases[0] or klass is self.bases[1]:
                    break
                if _class_entry(klass, _DISPATCH)[0]:
                    known = True
                    break
            self._python_classes[id(cls)] = known
        return known


_LIBRARY: dict = {}  # "torch" -> (torch, TensorBase descriptors, dtypes, StorageBase.nbytes)


def _library_tables(torch):
    base = torch._C.TensorBase
    api = dict(p for p in _pairs(_class_dict(base)) or () if p[0] in _TENSOR_API)
    dtypes = {k: v for k, v in _pairs(torch.__dict__) or () if type(v) is torch.dtype}
    # A storage can be an instance of the user's subclass too: its C-level ``nbytes``.
    storage_nbytes = _class_entry(torch._C.StorageBase, "nbytes")[1]
    return api, dtypes, storage_nbytes


def _guards(torch):
    """Context managers that keep Python out of torch calls: ``__torch_function__`` of
    subclasses and modes, and Python dispatch modes."""
    out = [torch._C.DisableTorchFunction()]
    dispatch = getattr(torch._C, "_DisableTorchDispatch", None)
    if dispatch is not None:
        out.append(dispatch())
    return out


def _tensor_facts(t, api):
    torch = api.torch
    out = {"kind": "tensor"}
    cls = type(t)
    if cls is not torch.Tensor:
        out["type"] = _type_name(cls)
    if api.dispatches_to_python(t):
        # Sizes, strides, device and layout may be answered by its Python code: not read.
        out["unreadable"] = _DISPATCH
        _read(out, "dtype", lambda: str(api.get(t, "dtype")))
        _read(out, "requires_grad", lambda: bool(api.get(t, "requires_grad")))
        return out
    get, call = api.get, api.call
    _read(out, "shape", lambda: [int(s) for s in get(t, "shape")])
    _read(out, "dtype", lambda: str(get(t, "dtype")))
    _read(out, "device", lambda: str(get(t, "device")))
    _read(out, "layout", lambda: str(get(t, "layout")))
    strided = out.get("layout") == "torch.strided"
    _read(out, "stride", lambda: [int(s) for s in call(t, "stride")] if strided else None)
    _read(out, "storage_offset", lambda: int(call(t, "storage_offset")) if strided else None)
    _read(out, "is_contiguous", lambda: bool(call(t, "is_contiguous")) if strided else None)

    def channels_last():
        ndim = call(t, "dim")
        if not strided or ndim not in (4, 5):
            return None
        fmt = torch.channels_last if ndim == 4 else torch.channels_last_3d
        return bool(call(t, "is_contiguous", memory_format=fmt))

    _read(out, "channels_last", channels_last)
    _read(out, "is_view", lambda: bool(call(t, "_is_view")))
    _read(out, "nbytes", lambda: int(call(t, "numel")) * int(call(t, "element_size")))

    def storage_nbytes():
        return int(api.storage_nbytes(call(t, "untyped_storage"))) if strided else None

    _read(out, "storage_nbytes", storage_nbytes)
    _read(out, "requires_grad", lambda: bool(get(t, "requires_grad")))
    _read(out, "is_leaf", lambda: bool(get(t, "is_leaf")))

    def grad_fn():
        node = get(t, "grad_fn")
        return None if node is None else _type_name(type(node)).rsplit(".", 1)[-1]

    _read(out, "grad_fn", grad_fn)
    _read(out, "retains_grad", lambda: bool(get(t, "retains_grad")))

    def has_grad():
        # ``.grad`` only for leaves or retains_grad tensors (else PyTorch warns).
        if out.get("is_leaf") or out.get("retains_grad"):
            return get(t, "grad") is not None
        return None

    _read(out, "has_grad", has_grad)
    _read(out, "is_inference", lambda: bool(call(t, "is_inference")))

    def pinned():
        # Only ask on CPU tensors once CUDA is initialised: never initialise CUDA.
        if out.get("device") != "cpu" or not strided:
            return False
        if not torch.cuda.is_initialized():
            return False
        return bool(call(t, "is_pinned"))

    _read(out, "is_pinned", pinned)
    _read(out, "is_quantized", lambda: bool(get(t, "is_quantized")))
    _read(out, "is_nested", lambda: bool(get(t, "is_nested")))
    return out


def _module_tensors(m, api):
    """The module tree's parameters and buffers (each once), and its own ``training`` flag."""
    torch = api.torch
    params: list = []
    buffers: list = []
    seen_modules: set = set()
    seen_tensors: set = set()
    stack = [m]
    training = None
    truncated = False
    while stack:
        if len(seen_modules) >= _MAX_MODULES or (
            len(seen_modules) % _CHECK_EVERY == 0 and api.clock.late()
        ):
            truncated = True
            break
        mod = stack.pop()
        if id(mod) in seen_modules:
            continue
        seen_modules.add(id(mod))
        inst = _index(_instance_dict(mod, api.classes))
        if inst is None:
            continue
        if mod is m:
            ok, value = _lookup(inst, "training")
            training = bool(value) if ok and type(value) is bool else None
        for slot, sink in (("_parameters", params), ("_buffers", buffers)):
            ok, tensors = _lookup(inst, slot)
            if ok and type(tensors) is dict:
                for i, value in enumerate(list(dict.values(tensors))):
                    if i % _CHECK_EVERY == 0 and i and api.clock.late():
                        truncated = True
                        break
                    if value is not None and id(value) not in seen_tensors:
                        if _is_sub(type(value), torch.Tensor):
                            seen_tensors.add(id(value))
                            sink.append(value)
        ok, children = _lookup(inst, "_modules")
        if ok and type(children) is dict:
            # Reversed so that the first child is visited first (the "first parameter").
            for child in reversed(list(dict.values(children))):
                if child is not None and _is_sub(type(child), torch.nn.Module):
                    stack.append(child)
        if truncated:
            break
    return params, buffers, training, truncated


def _module_facts(m, api):
    out = {"kind": "module", "type": _type_name(type(m))}
    params, buffers, training, truncated = _module_tensors(m, api)
    out["training"] = training
    get = api.get
    total = trainable = 0
    devices = []
    dtypes = []
    first_device = first_dtype = None
    unreadable = {"unreadable_parameters": 0, "unreadable_buffers": 0}
    for i, p in enumerate(params):
        if i % _CHECK_EVERY == 0 and i and api.clock.late():
            truncated = True
            break
        if api.dispatches_to_python(p):
            unreadable["unreadable_parameters"] += 1
            continue
        try:
            n = int(api.call(p, "numel"))
            grad = bool(get(p, "requires_grad"))
            device, dtype = str(get(p, "device")), str(get(p, "dtype"))
        except Exception:
            continue
        total += n
        if grad:
            trainable += n
        if first_device is None:
            first_device, first_dtype = device, dtype
        if device not in devices:
            devices.append(device)
        if dtype not in dtypes:
            dtypes.append(dtype)
    for i, b in enumerate(buffers):
        if i % _CHECK_EVERY == 0 and i and api.clock.late():
            truncated = True
            break
        if api.dispatches_to_python(b):
            unreadable["unreadable_buffers"] += 1
            continue
        try:
            device, dtype = str(get(b, "device")), str(get(b, "dtype"))
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
    out.update(unreadable)
    if truncated:
        out["truncated"] = True  # stopped at the time limit: the counts are partial
    return out


def _view(facts, spec, resolved, api):
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
    torch = api.torch
    dtype = _dtype_of(api.dtypes, facts.get("dtype"))
    if dtype is None:
        return result
    try:
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


def _dtype_of(dtypes, name):
    if type(name) is not str or not name.startswith("torch."):
        return None
    return dtypes.get(name[len("torch.") :])


def _kernel_facts(ns_index, modules, torch):
    out: dict = {"pid": os.getpid(), "torch": None, "cuda_initialized": None}
    ok, nb = _lookup(ns_index, "__vsc_ipynb_file__")
    out["vscode_notebook"] = nb if ok and type(nb) is str else None
    out["session_name"] = os.environ.get("JPY_SESSION_NAME")
    found, mp = _lookup(modules, "multiprocessing")
    method = None
    if found and type(mp) is type(sys):
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


def _facts_for(obj, api):
    if api is None:
        return {"kind": "no-torch"}
    cls = type(obj)
    if _is_sub(cls, api.torch.Tensor):
        return _tensor_facts(obj, api)
    if _is_sub(cls, api.torch.nn.Module):
        return _module_facts(obj, api)
    return {"kind": "other", "type": _type_name(cls)}


def _scan(ns_index, torch, clock):
    """The namespace's own tensors and modules (names not starting with ``_``), in order."""
    found: list = []
    if type(ns_index) is not dict:
        return found
    bases = (torch.Tensor, torch.nn.Module)
    for i, (name, value) in enumerate(list(dict.items(ns_index))):
        if len(found) >= _MAX_SCAN or (i % _CHECK_EVERY == 0 and i and clock.late()):
            break
        if name.startswith("_") or not name.isidentifier():
            continue
        cls = type(value)
        if _is_sub(cls, bases[0]) or _is_sub(cls, bases[1]):
            found.append(name)
    return found


def _answer(req, ns_index, torch, scanned=None):
    clock = _Clock(req.get("budget"))
    api = _Tensors(torch, clock) if torch is not None else None
    names = [n for n in req.get("names", ()) if type(n) is str][:_MAX_NAMES]
    if scanned is not None and torch is not None:
        for name in _scan(ns_index, torch, clock):
            scanned.append(name)
            if name not in names:
                names.append(name)
    facts: dict = {}
    for name in names:
        if clock.late():
            facts[name] = {"kind": "error", "error": "time limit"}
            continue
        try:
            found, obj = _resolve(ns_index, name, torch, api.classes if api else {})
            if not found:
                facts[name] = {"kind": "missing"}
            else:
                facts[name] = _facts_for(obj, api)
        except Exception as exc:
            facts[name] = {"kind": "error", "error": type(exc).__name__}
        obj = None
    if torch is not None:
        for entry in req.get("views", ()):
            if clock.late():
                break
            try:
                name, spec = entry[0], entry[1]
                target = facts.get(name)
                if target is None or target.get("kind") != "tensor" or "unreadable" in target:
                    continue
                target.setdefault("views", {})[json.dumps(spec)] = _view(target, spec, facts, api)
            except Exception:
                continue
    return facts


def probe(request):
    """Answer one request (a JSON string) with a JSON string."""
    req = json.loads(request)
    ns_index = _index(_namespace())
    modules = _index(sys.modules)  # (looked up like the namespace: plain str keys only)
    torch = _torch(modules)
    scanned: list | None = [] if req.get("scan") is True else None
    if torch is None:
        facts = _answer(req, ns_index, None)
    else:
        guards = _guards(torch)
        for guard in guards:
            guard.__enter__()
        try:
            facts = _answer(req, ns_index, torch, scanned)
        finally:
            for guard in reversed(guards):
                guard.__exit__(None, None, None)
    reply = {"v": 1, "facts": facts}
    if scanned is not None:
        reply["scanned"] = scanned
    if req.get("kernel"):
        reply["kernel"] = _kernel_facts(ns_index, modules, torch)
    return json.dumps(reply)
