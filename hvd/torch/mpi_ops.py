"""hvd/torch/mpi_ops.py: Horovod's tensor collectives (horovod.torch's
mpi_ops) over hvd's engine: allreduce, grouped allreduce, broadcast and
allgather of CPU and CUDA tensors, their asynchronous forms and the
handles that complete them.

A tensor's data pointer goes to the engine as it is; the tensor (and any
copy made for it) is kept alive by its handle until synchronize. A CUDA
tensor takes the engine's stream variants: its input is what PyTorch's
current stream will have written, and the result is ordered on that
stream, so neither side waits for the other's queued work (hvd/hvd.h)."""

import ctypes
import hashlib
import itertools

import torch

import hvd as _basics
from hvd import _lib, _check, _error_text, _require_init

# Horovod's reduction constants, and hvd's hvd_op_t for each.
Average, Sum, Adasum, Min, Max, Product = range(6)
_C_OPS = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4}
_OP_NAMES = {Average: "Average", Sum: "Sum", Adasum: "Adasum", Min: "Min",
             Max: "Max", Product: "Product"}

# The dtypes hvd.torch takes, by code: first hvd's own, whose code is
# their hvd_dtype_t; then those hvd has no arithmetic for, reduced in
# int32 (a sum or a product wraps on the way back as it would have in its
# own dtype; bool's Sum and Max come back as or, Min and Product as and)
# and moved by broadcast and allgather as hvd's dtype of their size (a
# view, bit for bit); their codes only name them in allgather's exchange.
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
           torch.int32, torch.int64, torch.uint8,
           torch.int8, torch.int16, torch.bool]
_CODES = {dtype: code for code, dtype in enumerate(_DTYPES)}
_OWN = frozenset(_DTYPES[:7])
_WIDER = {torch.int8: torch.int32, torch.int16: torch.int32,
          torch.bool: torch.int32}
# An integer Average sums wider still, so that the sum of values whose
# average fits does not wrap (hvd averages floats only).
_AVERAGE_WIDER = {torch.uint8: torch.int32, torch.int8: torch.int32,
                  torch.int16: torch.int32, torch.int32: torch.int64}
_SAME_BYTES = {torch.int8: torch.uint8, torch.int16: torch.float16,
               torch.bool: torch.uint8}
_NAME_MAX = 199  # bytes of a name hvd takes (hvd/hvd.h)

_STATUS_ARG = -1  # HVD_ERR_ARG: hvd refused a call's arguments


class _Pending:
    """One collective in flight: the engine's handle, the stream it was
    submitted on (CUDA; the result is ordered on it), what synchronize
    returns, and what it does to it first."""
    __slots__ = ("c_handle", "stream", "output", "finish")

    def __init__(self, c_handle, stream, output, finish):
        self.c_handle, self.stream = c_handle, stream
        self.output, self.finish = output, finish


_handles = {}            # Horovod's int handles: a _Pending or a list
_next_handle = itertools.count(1)


def _register(entry):
    handle = next(_next_handle)
    _handles[handle] = entry
    return handle


def _reduce_op(op, average, what):
    if average is not None:
        if op is not None:
            raise ValueError("%s: give op or average, not both" % what)
        op = Average if average else Sum
    op = Average if op is None else op
    if op == Adasum:
        raise ValueError("%s: op=Adasum is not supported by hvd" % what)
    if op not in _C_OPS:
        raise ValueError("%s: unknown op %r (Average, Sum, Min, Max or "
                         "Product)" % (what, op))
    return op


def _c_name(name, what):
    """name for hvd; one longer than hvd takes (a deep module's parameter
    names, with broadcast_parameters' prefix) is cut, and told apart from
    others cut alike by a digest of the whole."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError("%s: name must be a str, got %s" %
                        (what, type(name).__name__))
    encoded = name.encode()
    if len(encoded) > _NAME_MAX:
        digest = hashlib.sha1(encoded).hexdigest().encode()
        encoded = encoded[:_NAME_MAX - len(digest) - 1] + b"#" + digest
    return encoded


# The memory formats besides torch's contiguous one that an elementwise
# collective (allreduce, broadcast) takes as they lie: every element once,
# from data_ptr() on. A channels_last model's parameters and gradients
# are in them (Horovod refuses them; DDP takes them). Every rank's tensor
# of a name must be in the same one, as its shape is the same.
_ELEMENTWISE_FORMATS = {4: torch.channels_last, 5: torch.channels_last_3d}


def _check_buffer(tensor, what, elementwise=True):
    """hvd's dtype of tensor (of _DTYPES) and, for a CUDA tensor, the
    stream to order its collective on (torch's current one); raises for
    what hvd cannot take (an allgather, not elementwise, concatenates
    rows: contiguous only)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("%s: expected a torch.Tensor, got %s" %
                        (what, type(tensor).__name__))
    dtype = _CODES.get(tensor.dtype)
    if dtype is None:
        raise TypeError("%s: unsupported dtype %s (hvd takes %s)" %
                        (what, tensor.dtype,
                         ", ".join(str(t) for t in _DTYPES)))
    if tensor.layout != torch.strided:
        raise ValueError("%s: a %s tensor; hvd takes dense tensors" %
                         (what, tensor.layout))
    if not tensor.is_contiguous() and not (
            elementwise and tensor.dim() in _ELEMENTWISE_FORMATS and
            tensor.is_contiguous(
                memory_format=_ELEMENTWISE_FORMATS[tensor.dim()])):
        raise ValueError("%s: the tensor is not contiguous (shape %s, "
                         "strides %s)%s; pass tensor.contiguous()" %
                         (what, tuple(tensor.shape), tensor.stride(),
                          " nor channels_last" if elementwise else ""))
    if not tensor.is_cuda:  # (is_cuda and is_cpu are cheaper than device)
        if tensor.is_cpu:
            return dtype, None
        raise ValueError("%s: a tensor on %s; hvd takes cpu and cuda "
                         "tensors" % (what, tensor.device))
    kind = _lib.ring_is_device_memory(tensor.data_ptr()) if tensor.numel() \
        else 1
    if kind < 0:
        raise RuntimeError("%s: a tensor on %s whose memory kind CUDA "
                           "cannot tell (its error is in the log)" %
                           (what, tensor.device))
    if kind == 0:
        raise ValueError("%s: a tensor on %s, but libhvd.so sees no device "
                         "memory there (a build without CUDA?)" %
                         (what, tensor.device))
    return dtype, torch.cuda.current_stream(tensor.device)


def _as_hvd(tensor, wider):
    """tensor as hvd's call takes it: itself, a view in a dtype of its size
    (_SAME_BYTES, moved only: _start names it to hvd as that), or a copy
    in torch's contiguous layout (channels_last: so that every rank's
    elements meet in one order, whatever each rank's layout) and in the
    dtype wider gives (a reduction's: _WIDER or _AVERAGE_WIDER; {} for a
    move). Returns it and whether it is a copy (the result is copied
    back). A copy is out of autograd's sight, as hvd's writes are."""
    dtype = tensor.dtype
    if dtype in _OWN and dtype not in wider and tensor.is_contiguous():
        return tensor, False  # the common case, first
    dtype = wider.get(dtype, dtype)
    if dtype == tensor.dtype and tensor.is_contiguous():
        view = _SAME_BYTES.get(dtype)
        return (tensor if view is None else tensor.view(view)), False
    return tensor.detach().to(dtype=dtype,
                              memory_format=torch.contiguous_format), True


def _c_stream(stream):
    """The cudaStream_t of a torch stream, for hvd's stream variants: the
    legacy default stream is NULL to PyTorch, cudaStreamLegacy (0x1) to
    the runtime, and the variants refuse NULL."""
    return stream.cuda_stream or 1


def _start(buf, code, stream, submit, finish=None):
    """Submits one in-place collective on buf (from _as_hvd; code its
    hvd_dtype_t, or None to look it up; on the stream _check_buffer gave)
    through submit(ptr, dtype, stream, handle_ref) and returns its
    _Pending, which holds buf."""
    if code is None:
        code = _CODES[_SAME_BYTES.get(buf.dtype, buf.dtype)]
    c_handle = ctypes.c_void_p()
    status = submit(buf.data_ptr(), code,
                    None if stream is None else _c_stream(stream),
                    ctypes.byref(c_handle))
    if status < 0:
        error = (ValueError if status == _STATUS_ARG
                 else _basics.HorovodInternalError)
        raise error(_error_text(status))
    return _Pending(c_handle, stream, buf, finish)


def _complete(entry):
    """Waits for one _Pending; returns (result, None) or (None, message)."""
    if entry.stream is None:
        status = _lib.hvd_wait(entry.c_handle)
    else:
        status = _lib.hvd_wait_stream(entry.c_handle,
                                      _c_stream(entry.stream))
    if status < 0:
        return None, _error_text(status)
    if entry.stream is not None:
        # What the caller does next (finish below included) runs on the
        # stream current now, which may not be the one it was submitted
        # on: ordered after the result as well.
        current = torch.cuda.current_stream(entry.stream.device)
        if current != entry.stream:
            current.wait_stream(entry.stream)
            # A copy made for hvd (_as_hvd) is read there by finish: not
            # the allocator's again before that stream is through with it.
            entry.output.record_stream(current)
    output = entry.output
    return (entry.finish(output) if entry.finish else output), None


def _scale(tensor, factor, divisor=1):
    """tensor times factor over divisor, in place; an integer tensor's
    rounded toward zero once (Horovod scales integers too): exactly
    without a factor, else through float64 (exact below 2^53)."""
    if tensor.is_floating_point():
        tensor.mul_(factor / divisor)
    elif factor == 1.0:
        tensor.copy_(torch.div(tensor, divisor, rounding_mode="trunc"))
    else:
        tensor.copy_(tensor.double().mul_(factor).div_(divisor))


def _allreduce_pending(tensor, output, name, op, prescale, postscale, what):
    """The allreduce of tensor into output (tensor itself for the in-place
    forms, None for a new tensor), through a buffer (_as_hvd) where hvd
    cannot reduce tensor as it lies. Integers' Average is their Sum
    divided after (toward zero), as hvd averages floats only."""
    _require_init()
    c_name = _c_name(name, what)
    code, stream = _check_buffer(tensor, what)
    int_average = op == Average and not tensor.is_floating_point()
    if int_average and tensor.dtype == torch.bool:
        raise ValueError("%s: Average of a bool tensor (Sum, Min or Max "
                         "reduce them)" % what)
    c_op = _C_OPS[Sum if int_average else op]
    # Each step here is on the path of every gradient: torch.no_grad()
    # only where needed (half a microsecond, of 3 a small tensor takes).
    buf, copied = _as_hvd(tensor, _AVERAGE_WIDER if int_average else _WIDER)
    if not copied and output is None:
        buf = tensor.detach().clone()
    if prescale != 1.0:
        with torch.no_grad():  # buf may be a leaf that requires grad
            _scale(buf, prescale)

    def submit(ptr, dtype, stream, handle):
        if stream is None:
            return _lib.hvd_allreduce_async(ptr, ptr, buf.numel(), dtype,
                                            c_op, c_name, handle)
        return _lib.hvd_allreduce_async_stream(ptr, ptr, buf.numel(), dtype,
                                               c_op, c_name, stream, handle)

    if not copied and postscale == 1.0 and not int_average:
        return _start(buf, code, stream, submit)  # the common case

    def finish(result):
        with torch.no_grad():
            if postscale != 1.0 or int_average:
                _scale(result, postscale,
                       _basics.size() if int_average else 1)
            if not copied:
                return result
            return (torch.empty_like(tensor) if output is None
                    else output).copy_(result)

    return _start(buf, None, stream, submit, finish)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing tensor across ranks in place; returns a handle for
    poll and synchronize (which returns tensor)."""
    op = _reduce_op(op, average, "allreduce_async_")
    return _register(_allreduce_pending(tensor, tensor, name, op,
                                        prescale_factor, postscale_factor,
                                        "allreduce_async_"))


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0):
    """As allreduce_async_, into a new tensor; tensor is not changed. The
    result has no gradient (allreduce's has)."""
    op = _reduce_op(op, average, "allreduce_async")
    return _register(_allreduce_pending(tensor, None, name, op,
                                        prescale_factor, postscale_factor,
                                        "allreduce_async"))


def allreduce_(tensor, average=None, name=None, op=None,
               prescale_factor=1.0, postscale_factor=1.0):
    return synchronize(allreduce_async_(tensor, average, name, op,
                                        prescale_factor, postscale_factor))


class _Allreduce(torch.autograd.Function):
    """allreduce as a differentiable function: the gradient is reduced
    the same way (Horovod's HorovodAllreduce)."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale, postscale):
        ctx.args = op, prescale, postscale
        return synchronize(allreduce_async(tensor, None, name, op, prescale,
                                           postscale))

    @staticmethod
    def backward(ctx, grad):
        op, prescale, postscale = ctx.args
        return (synchronize(allreduce_async(grad.contiguous(), None, None, op,
                                            prescale, postscale)),
                None, None, None, None)


def allreduce(tensor, average=None, name=None, compression=None, op=None,
              prescale_factor=1.0, postscale_factor=1.0):
    """The reduction of tensor across ranks, as a new tensor (through
    compression when given: e.g. Compression.fp16)."""
    op = _reduce_op(op, average, "allreduce")
    if compression is None:
        return _Allreduce.apply(tensor, name, op, prescale_factor,
                                postscale_factor)
    compressed, ctx = compression.compress(tensor)
    reduced = _Allreduce.apply(compressed, name, op, prescale_factor,
                               postscale_factor)
    return compression.decompress(reduced, ctx)


def _grouped(tensors, name, start):
    names = ([None] * len(tensors) if name is None else
             ["%s.%d" % (name, i) for i in range(len(tensors))])
    entries = []
    try:
        for tensor, member in zip(tensors, names):
            entries.append(start(tensor, member))
    except Exception:
        _complete_all(entries)  # the ones already started
        raise
    return _register(entries)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0):
    """allreduce_async_ of each tensor, as one handle (synchronize
    returns the list); the engine fuses them as it fuses any others."""
    op = _reduce_op(op, average, "grouped_allreduce_async_")
    return _grouped(tensors, name, lambda t, n: _allreduce_pending(
        t, t, n, op, prescale_factor, postscale_factor,
        "grouped_allreduce_async_"))


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0):
    op = _reduce_op(op, average, "grouped_allreduce_async")
    return _grouped(tensors, name, lambda t, n: _allreduce_pending(
        t, None, n, op, prescale_factor, postscale_factor,
        "grouped_allreduce_async"))


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0):
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor))


class _GroupedAllreduce(torch.autograd.Function):
    """grouped_allreduce as a differentiable function (Horovod's
    HorovodGroupedAllreduce): the gradients are reduced as a group too."""

    @staticmethod
    def forward(ctx, name, op, prescale, postscale, *tensors):
        ctx.args = op, prescale, postscale
        return tuple(synchronize(grouped_allreduce_async(
            list(tensors), None, name, op, prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        op, prescale, postscale = ctx.args
        return (None, None, None, None) + tuple(synchronize(
            grouped_allreduce_async([g.contiguous() for g in grads], None,
                                    None, op, prescale, postscale)))


def grouped_allreduce(tensors, average=None, name=None, compression=None,
                      op=None, prescale_factor=1.0, postscale_factor=1.0):
    """The reductions of tensors, as new tensors (through compression when
    given); tensors are not changed."""
    op = _reduce_op(op, average, "grouped_allreduce")
    if compression is None:
        return list(_GroupedAllreduce.apply(name, op, prescale_factor,
                                            postscale_factor, *tensors))
    packed = [compression.compress(t) for t in tensors]
    reduced = _GroupedAllreduce.apply(name, op, prescale_factor,
                                      postscale_factor,
                                      *[c for c, _ in packed])
    return [compression.decompress(t, ctx)
            for t, (_, ctx) in zip(reduced, packed)]


def _broadcast_pending(tensor, output, root_rank, name, what):
    """root_rank's tensor into output (tensor itself in place, None for a
    new tensor), through a buffer (_as_hvd) where hvd cannot move tensor
    as it lies."""
    _require_init()
    c_name = _c_name(name, what)
    _, stream = _check_buffer(tensor, what)
    if output is None:
        output = tensor.detach().clone()
    buf, copied = _as_hvd(output, {})

    def submit(ptr, dtype, stream, handle):
        if stream is None:
            return _lib.hvd_broadcast_async(ptr, buf.numel(), dtype,
                                            root_rank, c_name, handle)
        return _lib.hvd_broadcast_async_stream(ptr, buf.numel(), dtype,
                                               root_rank, c_name, stream,
                                               handle)

    def finish(result):
        with torch.no_grad():
            return output.copy_(result) if copied else output

    # The handle holds buf until synchronize: hvd writes there.
    return _start(buf, None, stream, submit,
                  None if buf is output else finish)


def broadcast_async_(tensor, root_rank, name=None):
    """Starts overwriting tensor with root_rank's, in place."""
    return _register(_broadcast_pending(tensor, tensor, root_rank, name,
                                        "broadcast_async_"))


def broadcast_async(tensor, root_rank, name=None):
    return _register(_broadcast_pending(tensor, None, root_rank, name,
                                        "broadcast_async"))


def broadcast_(tensor, root_rank, name=None):
    return synchronize(broadcast_async_(tensor, root_rank, name))


class _Broadcast(torch.autograd.Function):
    """Horovod's HorovodBroadcast: the gradient is the ranks' average on
    the root and zero elsewhere."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name):
        ctx.root_rank = root_rank
        return synchronize(broadcast_async(tensor, root_rank, name))

    @staticmethod
    def backward(ctx, grad):
        reduced = synchronize(allreduce_async(grad.contiguous(), op=Average))
        if _basics.rank() != ctx.root_rank:
            reduced.zero_()
        return reduced, None, None


def broadcast(tensor, root_rank, name=None):
    """root_rank's tensor, as a new tensor on every rank."""
    return _Broadcast.apply(tensor, root_rank, name)


# Dimensions an allgather's shape exchange carries.
_MAX_DIMS = 16


def _gather_fixed(tensor, output, name, what):
    _require_init()
    dtype, stream = _check_buffer(tensor, what, elementwise=False)
    if stream is not None:
        # hvd_allgather is blocking and streamless: the input must be
        # written before it reads it.
        torch.cuda.current_stream(tensor.device).synchronize()
    _check(_lib.hvd_allgather(tensor.data_ptr(), tensor.numel(),
                              output.data_ptr(), dtype, _c_name(name, what)))
    return output


def _gathered_shapes(tensor, name, what):
    """Every rank's (dtype code, device type, shape) of its tensor; raises
    on every rank alike when they cannot be gathered together, a rank
    that cannot take its tensor included (ndim -2: the others raise
    HorovodInternalError naming it, where they waited in the exchange)."""
    meta = torch.zeros(3 + _MAX_DIMS, dtype=torch.int64)
    try:
        dtype, _ = _check_buffer(tensor, what, elementwise=False)
    except (TypeError, ValueError, RuntimeError) as e:
        refused, meta[2] = e, -2
    else:
        refused, ndim = None, tensor.dim()
        meta[0], meta[1] = dtype, int(tensor.is_cuda)
        meta[2] = ndim if 1 <= ndim <= _MAX_DIMS else -1
        if meta[2] > 0:
            meta[3:3 + ndim] = torch.tensor(tensor.shape, dtype=torch.int64)
    everyone = torch.empty(_basics.size() * meta.numel(), dtype=torch.int64)
    _gather_fixed(meta, everyone, None if name is None else name + ".shape",
                  what)
    rows = everyone.view(_basics.size(), -1).tolist()
    if refused is not None:
        raise refused
    shapes = [tuple(row[3:3 + row[2]]) if row[2] > 0 else None
              for row in rows]
    for r, row in enumerate(rows):
        if row[2] == -2:
            raise _basics.HorovodInternalError(
                "%s: rank %d could not take its tensor (its error says "
                "why)" % (what, r))
        if row[2] < 0:
            raise ValueError("%s: rank %d gave a tensor of %s dimensions; "
                             "allgather takes 1 to %d" % (what, r, "0 or "
                             "too many", _MAX_DIMS))
        if row[:2] != rows[0][:2] or shapes[r][1:] != shapes[0][1:]:
            kinds = ["rank %d: %s %s %s" % (
                q, _DTYPES[rows[q][0]],
                "cuda" if rows[q][1] else "cpu", list(shapes[q]))
                for q in range(len(rows))]
            raise _basics.HorovodInternalError(
                "%s: ranks disagree on the dtype, device or the dimensions "
                "after the first (%s)" % (what, "; ".join(kinds)))
    return [shape[0] for shape in shapes]


def _allgather(tensor, name, what="allgather"):
    """The ranks' tensors concatenated along the first dimension (which
    may differ across ranks), and those first dimensions."""
    firsts = _gathered_shapes(tensor, name, what)
    dtype, rest = tensor.dtype, tuple(tensor.shape[1:])
    tensor = tensor.view(_SAME_BYTES.get(dtype, dtype))
    widest = max(firsts)
    if widest == min(firsts):
        out = tensor.new_empty((len(firsts) * widest,) + rest)
        return _gather_fixed(tensor, out, name, what).view(dtype), firsts
    # hvd's allgather takes equal counts: pad each rank's to the widest.
    padded = tensor.new_zeros((widest,) + rest)
    padded[:tensor.shape[0]] = tensor
    out = _gather_fixed(padded, padded.new_empty((len(firsts) * widest,) +
                                                 rest), name, what)
    parts = [out[r * widest:r * widest + n] for r, n in enumerate(firsts)]
    return torch.cat(parts).view(dtype), firsts


class _Allgather(torch.autograd.Function):
    """Horovod's HorovodAllgather: the gradient of each rank's part is its
    slice of the ranks' averaged gradient."""

    @staticmethod
    def forward(ctx, tensor, name):
        out, ctx.firsts = _allgather(tensor, name)
        return out

    @staticmethod
    def backward(ctx, grad):
        reduced = synchronize(allreduce_async(grad.contiguous(), op=Average))
        offset = sum(ctx.firsts[:_basics.rank()])
        return reduced.narrow(0, offset, ctx.firsts[_basics.rank()]), None


class _Done:
    """A handle's result that is there already (allgather_async)."""
    __slots__ = ("result",)

    def __init__(self, result):
        self.result = result


def allgather_async(tensor, name=None):
    """allgather's result behind a handle, for code written against
    Horovod's asynchronous form. hvd's allgather is blocking: the gather
    happens here, and synchronize returns its result."""
    return _register(_Done(_allgather(tensor, name)[0]))


def allgather(tensor, name=None):
    """Every rank's tensor concatenated along the first dimension, in rank
    order; the first dimension may differ across ranks, the others (and
    the dtype) may not. Blocking."""
    return _Allgather.apply(tensor, name)


def _complete_all(entries):
    """Waits for every entry; returns the results and the first error."""
    results, first_error = [], None
    for entry in entries:
        result, error = _complete(entry)
        results.append(result)
        first_error = first_error or error
    return results, first_error


def poll(handle):
    """True when the collective(s) of handle are done (synchronize then
    returns at once)."""
    entry = _handles.get(handle)
    if entry is None:
        raise ValueError("hvd.poll: unknown handle %r" % (handle,))
    if isinstance(entry, _Done):
        return True
    entries = entry if isinstance(entry, list) else [entry]
    return all(_lib.hvd_poll(e.c_handle) != 0 for e in entries)


def synchronize(handle):
    """Waits for handle's collective(s) and returns the result (a list for
    a grouped handle); raises HorovodInternalError with hvd's message when
    it failed. A handle is synchronized once."""
    entry = _handles.pop(handle, None)
    if entry is None:
        raise ValueError("hvd.synchronize: unknown handle %r (never "
                         "returned, or already synchronized)" % (handle,))
    if isinstance(entry, _Done):
        return entry.result
    if isinstance(entry, list):
        results, error = _complete_all(entry)
    else:
        results, error = _complete(entry)
    if error is not None:
        raise _basics.HorovodInternalError(error)
    return results


def join(device=-1):
    """This rank has no more batches: it takes part in the others'
    collectives with zeros (averages still divide by size()) until every
    rank has joined. Returns the rank that joined last."""
    _require_init()
    _check(_lib.hvd_join())
    return _check(_lib.hvd_last_joined())


def barrier():
    _require_init()
    _check(_lib.hvd_barrier())
