"""hvd/torch/functions.py: starting and resuming training alike on every
rank (Horovod's horovod.torch.functions): the root's parameters,
optimizer state and any picklable object to every rank, and every
rank's objects to all. Objects are pickled with cloudpickle when it is
installed (as Horovod does: lambdas and local classes too), else with
pickle."""

import pickle

import torch

try:
    import cloudpickle as _pickler
except ImportError:
    _pickler = pickle

import hvd as _basics
from hvd.torch import mpi_ops


def _wait_all(handles):
    """Synchronizes every handle, also after one failed, then raises the
    first failure: no collective is left running on a tensor."""
    first = None
    for handle in handles:
        try:
            mpi_ops.synchronize(handle)
        except Exception as e:  # pylint: disable=broad-except
            first = first or e
    if first is not None:
        raise first


def broadcast_parameters(params, root_rank):
    """Overwrites each tensor with root_rank's, in place. params is a
    model's state_dict() (or any dict: taken in key order), or an
    iterable of tensors or of (name, tensor) pairs such as
    named_parameters()."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    handles = []
    try:
        for name, tensor in items:
            handles.append(mpi_ops.broadcast_async_(
                tensor.data, root_rank,
                None if name is None else "broadcast." + name))
    finally:
        _wait_all(handles)


# An object travels as one status byte and then its pickle, or, from a
# rank that could not pickle it, the error's text: every rank learns of
# the failure from the collective it is waiting in, and raises.
_PICKLED, _UNPICKLABLE = b"\0", b"\1"


def _dumps(obj):
    """(what obj travels as, None), or (the error's text as it travels,
    the error) when obj cannot be pickled."""
    try:
        return _PICKLED + _pickler.dumps(obj), None
    except Exception as e:  # pylint: disable=broad-except
        return (_UNPICKLABLE + ("%s: %s" % (type(e).__name__, e)).encode(),
                e)


def _loads(data, what, error):
    """Every rank's object of data (rank -> what it travelled as); raises
    PicklingError, the same on every rank, naming the ranks that could
    not pickle theirs (from error on such a rank)."""
    failed = {r: d[1:].decode("utf-8", "replace") for r, d in data.items()
              if d[:1] == _UNPICKLABLE}
    if failed:
        who = ("rank %d" % min(failed) if len(failed) == 1 else
               "ranks " + ", ".join(str(r) for r in sorted(failed)))
        raise pickle.PicklingError("%s: %s cannot pickle the object (%s)" % (
            what, who, "; ".join("rank %d: %s" % item
                                 for item in sorted(failed.items())))) \
            from error
    return {r: _pickler.loads(d[1:]) for r, d in data.items()}


def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's obj, pickled, on every rank (the root's own object on
    the root)."""
    prefix = "" if name is None else name + "."
    root = _basics.rank() == root_rank
    data, error = _dumps(obj) if root else (b"", None)
    length = torch.tensor([len(data)], dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, None if name is None
                       else prefix + "length")
    payload = (torch.frombuffer(bytearray(data), dtype=torch.uint8) if root
               else torch.empty(int(length), dtype=torch.uint8))
    mpi_ops.broadcast_(payload, root_rank, None if name is None
                       else prefix + "data")
    if root and error is None:
        return obj
    return _loads({root_rank: payload.numpy().tobytes()},
                  "broadcast_object", error)[root_rank]


def allgather_object(obj, name=None):
    """Every rank's obj, pickled, as a list in rank order."""
    data, error = _dumps(obj)
    payload = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    out, lengths = mpi_ops._allgather(payload, name, "allgather_object")
    parts, offset = {}, 0
    for rank, length in enumerate(lengths):
        parts[rank] = out[offset:offset + length].numpy().tobytes()
        offset += length
    objects = _loads(parts, "allgather_object", error)
    return [objects[r] for r in range(len(lengths))]


def _make_state(optimizer):
    """Creates an optimizer's state (momentum buffers...) by a local step
    on zero gradients, leaving the parameters and gradients as they were:
    a fresh optimizer has none until its first step."""
    params = [p for group in optimizer.param_groups for p in group["params"]
              if p.requires_grad]
    saved = [(p, p.detach().clone(), p.grad) for p in params]
    for p in params:
        p.grad = torch.zeros_like(p)
    # A DistributedOptimizer's step would reduce: take its class's own.
    step = getattr(optimizer, "_hvd_local_step", optimizer.step)
    step()
    with torch.no_grad():
        for p, value, grad in saved:
            p.copy_(value)
            p.grad = grad


def _state_layout(state_dict):
    """(parameter index, key, kind) of the state, in a fixed order: the
    tensors' shape and dtype, and the Python values' type."""
    layout = []
    for index in sorted(state_dict["state"]):
        for key, value in sorted(state_dict["state"][index].items()):
            kind = ((tuple(value.shape), str(value.dtype))
                    if torch.is_tensor(value) else type(value).__name__)
            layout.append((index, key, kind))
    return layout


def broadcast_optimizer_state(optimizer, root_rank):
    """Makes every rank's optimizer state and hyperparameters root_rank's
    (a resumed run's, loaded on the root). When the root has no state yet
    only the hyperparameters travel: no rank takes a step it would not
    have taken. Raises on every rank when an optimizer's state is laid
    out differently from the root's."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state: LBFGS is not supported")
    root = _basics.rank() == root_rank
    state_dict = optimizer.state_dict()
    root_has_state = broadcast_object(bool(state_dict["state"]), root_rank)
    if root_has_state and not state_dict["state"]:
        _make_state(optimizer)
        state_dict = optimizer.state_dict()
    groups = [{k: v for k, v in group.items() if k != "params"}
              for group in state_dict["param_groups"]]
    layout = _state_layout(state_dict) if root_has_state else []
    root_groups, root_layout = broadcast_object((groups, layout), root_rank)
    agreed = torch.tensor([int(len(root_groups) == len(groups) and
                               root_layout == layout)], dtype=torch.int32)
    mpi_ops.allreduce_(agreed, op=mpi_ops.Min)
    if not int(agreed):
        raise ValueError(
            "broadcast_optimizer_state: the optimizers differ across ranks "
            "(this rank: %d groups, state %s; rank %d: %d groups, state %s)"
            % (len(groups), layout[:4], root_rank, len(root_groups),
               root_layout[:4]))
    if not root:
        for group, values in zip(optimizer.param_groups, root_groups):
            group.update(values)
    # state_dict's parameter indices count over the groups in order.
    params = [p for group in optimizer.param_groups for p in group["params"]]
    scalars, handles = {}, []
    try:
        for index, key, _ in layout:
            value = optimizer.state[params[index]][key]
            if torch.is_tensor(value):
                handles.append(mpi_ops.broadcast_async_(
                    value, root_rank, "optimizer.%d.%s" % (index, key)))
            else:
                scalars[(index, key)] = value
    finally:
        _wait_all(handles)
    for (index, key), value in broadcast_object(scalars, root_rank).items():
        optimizer.state[params[index]][key] = value
