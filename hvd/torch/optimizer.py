"""hvd/torch/optimizer.py: Horovod's DistributedOptimizer for PyTorch.

It wraps any torch.optim optimizer (the object it returns is an instance
of that optimizer's class, so state_dict, param_groups and schedulers
work as before). A hook on each parameter's gradient accumulator starts
the gradient's allreduce as soon as backward has made it final, so the
engine reduces (and fuses) while backward goes on; step() waits for them
and then takes the wrapped optimizer's step on the averaged gradients.
A sparse gradient (nn.Embedding(sparse=True)) is gathered instead, or
with sparse_as_dense reduced as a dense one, as Horovod does."""

import contextlib
import warnings

import torch

import hvd as _basics
from hvd.torch import mpi_ops
from hvd.torch.compression import Compression


class _DistributedOptimizer(torch.optim.Optimizer):
    # Not a base class: DistributedOptimizer copies these methods into a
    # subclass of the wrapped optimizer's class.

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step, op, gradient_predivide_factor,
                 sparse_as_dense):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._sparse_as_dense = sparse_as_dense
        self._sparse_dims = {}  # p -> sparse_dim() of its gathered gradient
        self._passes = backward_passes_per_step
        self._op = op
        self._predivide = gradient_predivide_factor
        self._params = [p for group in self.param_groups
                        for p in group["params"] if p.requires_grad]
        self._names = self._parameter_names(named_parameters)
        self._delay = {p: self._passes for p in self._params}
        self._handles = {}  # p -> (handle or None, compression context)
        self._hooks = []
        self._synchronized = False
        self._should_synchronize = True
        if _basics.size() > 1:
            self._register_hooks()

    def _parameter_names(self, named_parameters):
        mine = {id(p) for group in self.param_groups for p in group["params"]}
        if named_parameters is None:
            return {p: "allreduce.noname.%d" % i
                    for i, p in enumerate(self._params)}
        pairs = list(named_parameters)
        if any(not isinstance(pair, tuple) or len(pair) != 2
               for pair in pairs):
            raise ValueError("DistributedOptimizer: named_parameters must "
                             "be (name, parameter) pairs, e.g. "
                             "model.named_parameters()")
        names = [name for name, _ in pairs]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError("DistributedOptimizer: parameter names must be "
                             "unique; repeated: %s" % ", ".join(repeated))
        by_id = {id(p): name for name, p in pairs}
        unnamed = [p for p in self._params if id(p) not in by_id]
        if unnamed:
            raise ValueError("DistributedOptimizer: %d of the optimizer's "
                             "parameters are not in named_parameters"
                             % len(unnamed))
        foreign = [name for name, p in pairs if id(p) not in mine]
        if foreign:
            warnings.warn("DistributedOptimizer: named_parameters holds "
                          "parameters the optimizer does not: %s"
                          % ", ".join(foreign[:5]))
        return {p: "allreduce." + by_id[id(p)] for p in self._params}

    def _register_hooks(self):
        for p in self._params:
            # The AccumulateGrad node of p: its hook runs once p.grad
            # holds this backward pass's gradient.
            accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
            accumulator.register_hook(self._make_hook(p))
            self._hooks.append(accumulator)  # keeps the node alive

    def _make_hook(self, p):
        def hook(*_):
            if self._handles.get(p, (None,))[0] is not None:
                raise AssertionError(
                    "Gradients were computed more than "
                    "backward_passes_per_step times before call to step(). "
                    "Increase backward_passes_per_step to accumulate "
                    "gradients locally.")
            self._delay[p] -= 1
            handle, ctx = None, None
            if self._delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def _allreduce_grad_async(self, p):
        grad = p.grad
        if grad.is_sparse:
            if not self._sparse_as_dense:
                self._sparse_dims[p] = grad.sparse_dim()
                return self._sparse_allgather_async(p), (None, None)
            grad = grad.to_dense()
        compressed, ctx = self._compression.compress(grad)
        prescale = postscale = 1.0
        if self._op == mpi_ops.Average:
            # hvd divides by size() after the sum; the predivide factor
            # moves part of that before it (against overflow in fp16).
            prescale, postscale = 1.0 / self._predivide, self._predivide
        handle = mpi_ops.allreduce_async_(compressed, name=self._names[p],
                                          op=self._op,
                                          prescale_factor=prescale,
                                          postscale_factor=postscale)
        return handle, (compressed, ctx)

    def _sparse_allgather_async(self, p):
        """Horovod's sparse_allreduce_async: every rank's indices and
        values of p's sparse gradient gathered (ranks may hold different
        counts) and made one sparse gradient (duplicates are summed where
        it is used), its values divided by size() for Average. Not
        compressed. Returns what gives it."""
        grad, name = p.grad, self._names[p]
        # allgather concatenates rows: an index per row, not per column.
        indices = mpi_ops.allgather_async(grad._indices().t().contiguous(),
                                          name=name + ".indices")
        values = mpi_ops.allgather_async(grad._values(),
                                         name=name + ".values")

        def gathered():
            everyone = mpi_ops.synchronize(values)
            if self._op == mpi_ops.Average:
                everyone = everyone / _basics.size()
            return torch.sparse_coo_tensor(
                mpi_ops.synchronize(indices).t(), everyone, grad.shape)
        return gathered

    def _zero_grad_of(self, p):
        """A zero gradient for p, which this rank's backward did not reach:
        an empty sparse one where p's was gathered before, so that this
        rank gathers as the others do (a dense one reduced, where they
        gathered, left every rank waiting)."""
        dims = self._sparse_dims.get(p)
        if dims is None:
            return torch.zeros_like(p)
        return torch.sparse_coo_tensor(
            torch.empty((dims, 0), dtype=torch.long, device=p.device),
            p.new_empty((0,) + tuple(p.shape[dims:])), p.shape)

    def set_backward_passes_per_step(self, passes):
        self._passes = passes
        for p in self._params:
            self._delay[p] = passes

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose
        hook has not fired: unused parameters get zero gradients, as
        every rank must reduce every tensor) and writes the averages into
        the gradients; a sparse gradient stays sparse (Horovod's)."""
        if not self._hooks:  # one rank: nothing to average
            self._synchronized = True
            return
        for p in self._params:
            handle, _ = self._handles.get(p, (None, None))
            if handle is None:
                if p.grad is None:
                    p.grad = self._zero_grad_of(p)
                self._handles[p] = self._allreduce_grad_async(p)
        first_error = None
        for p, (handle, (compressed, ctx)) in list(self._handles.items()):
            try:
                reduced = (handle() if callable(handle)
                           else mpi_ops.synchronize(handle))
                if p.grad.is_sparse:
                    reduced = self._compression.decompress(reduced, ctx)
                    if not reduced.is_sparse:  # sparse_as_dense
                        reduced = reduced.to_sparse(p.grad.sparse_dim())
                    p.grad.zero_().add_(reduced)
                elif compressed is not p.grad:
                    p.grad.copy_(self._compression.decompress(reduced, ctx))
            except Exception as e:  # pylint: disable=broad-except
                first_error = first_error or e
            self._delay[p] = self._passes
        self._handles.clear()
        self._synchronized = True
        if first_error is not None:
            raise first_error

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For a step after an explicit synchronize() (e.g. to clip the
        averaged gradients in between): step() then does not wait again."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def _hvd_local_step(self, closure=None):
        return super(self.__class__, self).step(closure)

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(): the gradients are "
                              "averaged again. Wrap the step in "
                              "`with optimizer.skip_synchronize():`.")
            self.synchronize()
        self._synchronized = False
        return self._hvd_local_step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError(
                "optimizer.zero_grad() was called after loss.backward() but "
                "before optimizer.step() or optimizer.synchronize(). This is "
                "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=mpi_ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=None):
    """Horovod's DistributedOptimizer: optimizer's parameters, state and
    hyperparameters, with gradients averaged (op=Average, or summed with
    op=Sum) across ranks before each step, through compression. With
    backward_passes_per_step k the gradients of k backward passes
    accumulate locally and are reduced once, on the k-th. A sparse
    gradient is gathered from every rank, or with sparse_as_dense made
    dense and reduced as the others; it is sparse again after. num_groups
    and groups are taken and ignored (hvd fuses whatever is ready);
    process_set is not supported."""
    del num_groups, groups  # fusion is the engine's
    if process_set is not None:
        raise ValueError("DistributedOptimizer: process_set is not "
                         "supported by hvd")
    if op not in (mpi_ops.Average, mpi_ops.Sum):
        raise ValueError("DistributedOptimizer: op must be Average or Sum")
    if gradient_predivide_factor != 1.0 and op != mpi_ops.Average:
        raise ValueError("DistributedOptimizer: gradient_predivide_factor "
                         "needs op=Average")
    if backward_passes_per_step < 1:
        raise ValueError("DistributedOptimizer: backward_passes_per_step "
                         "must be at least 1")
    mpi_ops._require_init()
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    distributed = cls(optimizer.param_groups, named_parameters, compression,
                      backward_passes_per_step, op, gradient_predivide_factor,
                      sparse_as_dense)
    if optimizer.state:
        distributed.load_state_dict(optimizer.state_dict())
    return distributed
