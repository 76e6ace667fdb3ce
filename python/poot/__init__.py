"""poot's runtime from Python: ctypes over libpoot's C API (include/poot/poot.h).

    plan = poot.Plan("model.plan")
    s = poot.Session(plan, backend="vulkan")
    s.bind_weights("model.safetensors")        # or {name: array}
    out = s.step(tokens=np.array([[5]], np.int32), pos=7)
    logits = out["logits"]; cache = s.state("k_cache")

    e = poot.Engine("prefill.plan", "decode.plan", weights="model.safetensors")
    r = e.submit([128000, 9906], max_new=32, stop=[128001])
    for request, token, finish in e.stream():   # steps until every request is done
        ...                                     # e.cancel(r) ends one between steps

Arrays go in with their own dtype, never converted: float32, float16,
int32, int64 and bool are those dtypes, uint16 is bf16 (its bits), so an
array of another dtype or shape than the plan's is refused by the runtime's
bind checks, as `poot run` refuses it. A Python int for an input or slot is
broadcast to its declared dtype and shape, as `poot run --slot pos=7` does.
Every failure raises poot.Error, whose kind is the C API's status name
("bind", "range", "capability", ...) and whose message is the runtime's.
The library is the one _library.PATH names (the build tree's or the
installed one), or $POOT_LIBRARY when set.
"""
import ctypes
import os

import numpy as np

from . import _library

__all__ = ["Engine", "Error", "Plan", "Session"]

_KINDS = ["ok", "io", "syntax", "verify", "profile", "format", "usage", "bind", "range", "capability", "memory", "trust"]
# poot_dtype codes, in order.
_DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint16), np.dtype(np.int32),
           np.dtype(np.int64), np.dtype(np.bool_)]
_INPUT, _WEIGHT, _STATE, _SLOT, _OUTPUT = range(5)
# poot_finish codes, in order.
_FINISH = [None, "length", "stop", "cancelled"]


class Error(Exception):
    """A failed call: kind is the status's name, code its number."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.kind = _KINDS[code] if 0 <= code < len(_KINDS) else str(code)


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


class _Request(ctypes.Structure):
    _fields_ = [("prompt", ctypes.POINTER(ctypes.c_int32)), ("length", ctypes.c_size_t), ("max_new", ctypes.c_int32),
                ("stop", ctypes.POINTER(ctypes.c_int32)), ("stop_count", ctypes.c_size_t),
                ("temperature", ctypes.c_double), ("top_p", ctypes.c_double), ("top_k", ctypes.c_int32),
                ("min_p", ctypes.c_double), ("repetition_penalty", ctypes.c_double),
                ("frequency_penalty", ctypes.c_double), ("presence_penalty", ctypes.c_double), ("seed", ctypes.c_uint64),
                ("adapter", ctypes.c_char_p)]


class _Event(ctypes.Structure):
    _fields_ = [("request", ctypes.c_int64), ("token", ctypes.c_int32), ("finish", ctypes.c_int)]


def _open():
    lib = ctypes.CDLL(os.environ.get("POOT_LIBRARY") or _library.PATH)
    P, T, S = ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_char_p
    for name, args in {
        "poot_plan_load": [S, ctypes.POINTER(P)],
        "poot_plan_load_trusted": [S, ctypes.POINTER(S), ctypes.c_size_t, ctypes.POINTER(P)],
        "poot_plan_count": [P, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)],
        "poot_plan_param": [P, ctypes.c_int, ctypes.c_size_t, T],
        "poot_session_create": [P, S, S, ctypes.c_int, ctypes.POINTER(P)],
        "poot_session_bind_weights_file": [P, S],
        "poot_session_bind_weights": [P, T, ctypes.c_size_t],
        "poot_session_set_state": [P, T],
        "poot_session_step": [P, T, ctypes.c_size_t],
        "poot_session_output": [P, S, T],
        "poot_session_read_state": [P, S, T],
        "poot_engine_create": [P, P, P, S, S, ctypes.c_int, S, ctypes.c_int, ctypes.POINTER(P)],
        "poot_engine_load_adapter": [P, S, S],
        "poot_engine_submit": [P, ctypes.POINTER(_Request), ctypes.POINTER(ctypes.c_int64)],
        "poot_engine_step": [P, ctypes.POINTER(ctypes.c_int)],
        "poot_engine_cancel": [P, ctypes.c_int64, ctypes.POINTER(ctypes.c_int)],
        "poot_engine_poll": [P, ctypes.POINTER(_Event), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)],
    }.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    for name in ("poot_plan_free", "poot_session_free", "poot_engine_free"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [P], None
    for name in ("poot_plan_target", "poot_plan_device"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [P], S
    lib.poot_session_plan.argtypes, lib.poot_session_plan.restype = [P], P
    lib.poot_last_error.argtypes, lib.poot_last_error.restype = [], S
    return lib


_lib = _open()


def _check(status):
    if status != 0:
        raise Error(status, _lib.poot_last_error().decode())


def _shape(t):
    return tuple(t.shape[i] for i in range(t.rank))


def _array(t):
    """A copy of a tensor the library holds."""
    raw = ctypes.string_at(t.data, t.bytes) if t.bytes else b""
    return np.frombuffer(raw, dtype=_DTYPES[t.dtype]).reshape(_shape(t)).copy()


def _params(handle, kind):
    count = ctypes.c_size_t()
    _check(_lib.poot_plan_count(handle, kind, ctypes.byref(count)))
    out = {}
    for i in range(count.value):
        t = _Tensor()
        _check(_lib.poot_plan_param(handle, kind, i, ctypes.byref(t)))
        out[t.name.decode()] = (_DTYPES[t.dtype], _shape(t))
    return out


class _Args:
    """C tensors over numpy arrays, kept alive as long as this object."""

    def __init__(self, arrays, declared):
        self.arrays, self.shapes = [], []
        self.tensors = (_Tensor * max(len(arrays), 1))()
        for i, (name, value) in enumerate(arrays.items()):
            # A name reaches C as a NUL-terminated string, so one holding a
            # NUL would bind its prefix; a Python integer is checked against
            # its dtype's range before numpy could wrap it.
            if not isinstance(name, str) or "\0" in name:
                raise Error(_KINDS.index("bind"), "%r is not a parameter name (a string without NUL)" % (name,))
            if isinstance(value, int) and not isinstance(value, bool) and name in declared:
                dtype, shape = declared[name]
                if np.issubdtype(dtype, np.integer):
                    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
                    if not lo <= value <= hi:
                        raise Error(_KINDS.index("range"), "%%%s: %d is outside %s's range [%d, %d]" %
                                    (name, value, np.dtype(dtype).name, lo, hi))
                value = np.full(shape, value, dtype=dtype)
            a = np.asarray(value, order="C")  # ascontiguousarray would make a 0-d array 1-d
            code = next((c for c, d in enumerate(_DTYPES) if d == a.dtype), None)
            if code is None:
                raise Error(_KINDS.index("bind"), "%%%s is a numpy %s array, which no poot dtype is" % (name, a.dtype))
            shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
            self.arrays.append(a)
            self.shapes.append(shape)
            self.tensors[i] = _Tensor(name.encode(), code, a.ndim, shape, a.ctypes.data, a.nbytes)
        self.count = len(arrays)


def _path(p):
    """A file path as C takes it: bytes without NUL (which would cut it short)."""
    b = os.fsencode(p)
    if b"\0" in b:
        raise Error(_KINDS.index("usage"), "%r is not a file path (it holds a NUL)" % (p,))
    return b


class Plan:
    """A verified plan file: its target, device, and the name, numpy dtype
    and shape of every input, weight, state, slot and output. With `trust`
    (a public key file of pootc keygen, or a list of them) the plan must be
    signed by one of them (PATH.sig), or poot.Error of kind "trust" is
    raised before anything in the plan is read."""

    def __init__(self, path, trust=None, _handle=None, _owner=None):
        if _handle is None:
            handle = ctypes.c_void_p()
            if trust is None:
                _check(_lib.poot_plan_load(_path(path), ctypes.byref(handle)))
            else:
                keys = [_path(k) for k in ([trust] if isinstance(trust, (str, bytes, os.PathLike)) else trust)]
                array = (ctypes.c_char_p * len(keys))(*keys)
                _check(_lib.poot_plan_load_trusted(_path(path), array, len(keys), ctypes.byref(handle)))
            _handle = handle.value
        self._handle, self._owner = _handle, _owner
        self.target = _lib.poot_plan_target(_handle).decode()
        self.device = _lib.poot_plan_device(_handle).decode()
        self.inputs = _params(_handle, _INPUT)
        self.weights = _params(_handle, _WEIGHT)
        self.states = _params(_handle, _STATE)
        self.slots = _params(_handle, _SLOT)
        self.outputs = _params(_handle, _OUTPUT)

    def __del__(self):
        if getattr(self, "_handle", None) and self._owner is None:
            _lib.poot_plan_free(self._handle)


class Session:
    """One plan running on a backend's device (the plan against the device
    checked when it starts). States start as zeros."""

    def __init__(self, plan, backend="vulkan", device="", allow_other_device=False):
        if not isinstance(plan, Plan):
            plan = Plan(plan)
        handle = ctypes.c_void_p()
        _check(_lib.poot_session_create(plan._handle, backend.encode(), device.encode(), int(allow_other_device),
                                        ctypes.byref(handle)))
        self._handle = handle.value
        self.plan = Plan(None, _handle=_lib.poot_session_plan(self._handle), _owner=self)

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.poot_session_free(self._handle)

    def bind_weights(self, weights):
        """A checkpoint path (as poot run --weights takes) or {name: array}."""
        if isinstance(weights, (str, os.PathLike)):
            _check(_lib.poot_session_bind_weights_file(self._handle, os.fsencode(weights)))
            return
        args = _Args(weights, self.plan.weights)
        _check(_lib.poot_session_bind_weights(self._handle, args.tensors, args.count))

    def set_state(self, name, value):
        args = _Args({name: value}, self.plan.states)
        _check(_lib.poot_session_set_state(self._handle, args.tensors))

    def step(self, inputs=None, **named):
        """Runs one step with every input and slot, by name; returns every output."""
        args = _Args(dict(inputs or {}, **named), {**self.plan.inputs, **self.plan.slots})
        _check(_lib.poot_session_step(self._handle, args.tensors, args.count))
        out = {}
        for name in self.plan.outputs:
            t = _Tensor()
            _check(_lib.poot_session_output(self._handle, name.encode(), ctypes.byref(t)))
            out[name] = _array(t)
        return out

    def state(self, name):
        """A state's current value, read back from the device."""
        t = _Tensor()
        _check(_lib.poot_session_read_state(self._handle, name.encode(), ctypes.byref(t)))
        return _array(t)


def _ids(values, what):
    """A list of token ids as a C int32 array, each checked to fit."""
    ids = [int(v) for v in values]
    for v in ids:
        if not -2**31 <= v < 2**31:
            raise Error(_KINDS.index("range"), "%s: %d is outside int32's range" % (what, v))
    return (ctypes.c_int32 * max(len(ids), 1))(*ids), len(ids)


class Engine:
    """One model's paged prefill and decode plans (and optionally a mixed
    plan: generated tokens beside prompt chunks) served on one device, as
    `poot generate` serves them: one copy of the weights and the KV pools
    shared by the plans, prefix caching and continuous batching. Requests
    go in with submit(); step() runs one step; poll() returns the tokens
    generated since, as (request, token, finish) with finish None while the
    request goes on, else "length", "stop" or "cancelled" (token -1)."""

    def __init__(self, prefill, decode, weights=None, backend="vulkan", device="", allow_other_device=False,
                 prefix_cache=True, mixed=None):
        plans = [p if p is None or isinstance(p, Plan) else Plan(p) for p in (prefill, decode, mixed)]
        handle = ctypes.c_void_p()
        _check(_lib.poot_engine_create(plans[0]._handle, plans[1]._handle, None if plans[2] is None else plans[2]._handle,
                                       backend.encode(), device.encode(),
                                       int(allow_other_device), None if weights is None else _path(weights),
                                       int(prefix_cache), ctypes.byref(handle)))
        self._handle = handle.value

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.poot_engine_free(self._handle)

    def load_adapter(self, name, path):
        """A LoRA adapter as PEFT saves it, under a name requests give as adapter=."""
        _check(_lib.poot_engine_load_adapter(self._handle, name.encode(), _path(path)))

    def submit(self, prompt, max_new=16, stop=(), temperature=0.0, top_p=1.0, top_k=0, min_p=0.0,
               repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0, seed=0, adapter=None):
        """Queues a request of token ids; returns its number (from 0)."""
        ids, n = _ids(prompt, "a prompt token")
        stops, k = _ids(stop, "a stop id")
        if not -2**31 <= max_new < 2**31:
            raise Error(_KINDS.index("range"), "max_new: %d is outside int32's range" % max_new)
        if not 0 <= top_k < 2**31:
            raise Error(_KINDS.index("usage"), "top_k: %d is outside [0, 2^31)" % top_k)
        request = _Request(ids, n, max_new, stops, k, temperature, top_p, top_k, min_p, repetition_penalty,
                           frequency_penalty, presence_penalty, seed,
                           None if adapter is None else adapter.encode())
        out = ctypes.c_int64()
        _check(_lib.poot_engine_submit(self._handle, ctypes.byref(request), ctypes.byref(out)))
        return out.value

    def step(self):
        """Runs one step; False when no request was queued or running."""
        ran = ctypes.c_int()
        _check(_lib.poot_engine_step(self._handle, ctypes.byref(ran)))
        return bool(ran.value)

    def cancel(self, request):
        """Ends a request; False when it had already ended."""
        cancelled = ctypes.c_int()
        _check(_lib.poot_engine_cancel(self._handle, request, ctypes.byref(cancelled)))
        return bool(cancelled.value)

    def poll(self):
        """The events since the last poll, oldest first."""
        out, events, count = [], (_Event * 64)(), ctypes.c_size_t()
        while True:
            _check(_lib.poot_engine_poll(self._handle, events, 64, ctypes.byref(count)))
            out += [(e.request, e.token, _FINISH[e.finish]) for e in events[:count.value]]
            if count.value < 64:
                return out

    def stream(self):
        """Steps until nothing is queued or running, yielding each event as
        its step ends (a request may be cancelled in between)."""
        while True:
            yield from self.poll()
            if not self.step():
                yield from self.poll()
                return
