"""hvd/torch/sync_batch_norm.py: batch normalisation over the whole
batch of all ranks (Horovod's SyncBatchNorm), in plain tensor operations
so it runs on the CPU and on GPUs alike.

Forward gathers each rank's count, mean and sum of squared deviations
and combines them (Chan's parallel formula: no cancellation of large
sums of squares); backward reduces the two per-channel sums the input
gradient needs. The weight and bias gradients stay local, as in
PyTorch's SyncBatchNorm: the DistributedOptimizer averages them."""

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

import hvd as _basics
from hvd.torch import mpi_ops


def _channel_view(x, values):
    return values.view([1, -1] + [1] * (x.dim() - 2))


class _SyncBatchNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps,
                momentum):
        channels = x.shape[1]
        dims = [0] + list(range(2, x.dim()))
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32
        xa = x.to(acc)
        count = xa.numel() // channels
        mean = xa.mean(dims) if count else xa.new_zeros(channels)
        m2 = ((xa - _channel_view(xa, mean)) ** 2).sum(dims)
        local = torch.cat([xa.new_tensor([count]), mean, m2])
        everyone = mpi_ops._allgather(local.contiguous(), None,
                                      "SyncBatchNorm")[0]
        everyone = everyone.view(_basics.size(), -1)
        counts, means, m2s = (everyone[:, :1], everyone[:, 1:1 + channels],
                              everyone[:, 1 + channels:])
        total = counts.sum()
        if total < 2:
            raise ValueError("SyncBatchNorm: expected more than 1 value per "
                             "channel over all ranks, got %d" % int(total))
        global_mean = (counts * means).sum(0) / total
        global_m2 = (m2s + counts * (means - global_mean) ** 2).sum(0)
        var = global_m2 / total
        invstd = torch.rsqrt(var + eps)
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(
                    momentum * global_mean.to(running_mean.dtype))
                running_var.mul_(1 - momentum).add_(
                    momentum * (global_m2 / (total - 1)).to(running_var.dtype))
        xhat = (xa - _channel_view(xa, global_mean)) * _channel_view(xa,
                                                                     invstd)
        y = xhat
        if weight is not None:
            y = y * _channel_view(y, weight.to(acc)) + _channel_view(
                y, bias.to(acc))
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.total, ctx.dims, ctx.dtype = total, dims, x.dtype
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        xhat, invstd, weight = ctx.saved_tensors
        g = grad_out.to(xhat.dtype)
        sum_dy = g.sum(ctx.dims)
        sum_dy_xhat = (g * xhat).sum(ctx.dims)
        grad_weight = grad_bias = None
        if weight is not None:
            grad_weight = sum_dy_xhat.to(weight.dtype)
            grad_bias = sum_dy.to(weight.dtype)
        sums = mpi_ops.synchronize(mpi_ops.allreduce_async_(
            torch.cat([sum_dy, sum_dy_xhat]), op=mpi_ops.Sum))
        mean_dy, mean_dy_xhat = (sums / ctx.total).chunk(2)
        scale = invstd if weight is None else invstd * weight.to(g.dtype)
        grad_x = _channel_view(g, scale) * (
            g - _channel_view(g, mean_dy) - xhat * _channel_view(g,
                                                                 mean_dy_xhat))
        return (grad_x.to(ctx.dtype), grad_weight, grad_bias, None, None,
                None, None)


class SyncBatchNorm(_BatchNorm):
    """BatchNorm1d/2d/3d whose training statistics are those of all
    ranks' batches together (same arguments as torch.nn.BatchNorm*d).
    In evaluation, or on one rank, it is plain batch normalisation."""

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError("SyncBatchNorm: expected at least 2D input "
                             "(got %dD input)" % x.dim())

    def forward(self, x):
        self._check_input_dim(x)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            if self.momentum is None:  # cumulative moving average
                momentum = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or not self.track_running_stats
        if not use_batch or _basics.size() == 1:
            return F.batch_norm(x, self.running_mean, self.running_var,
                                self.weight, self.bias, use_batch, momentum,
                                self.eps)
        return _SyncBatchNormFunction.apply(x.contiguous(), self.weight,
                                            self.bias, self.running_mean,
                                            self.running_var, self.eps,
                                            momentum)
