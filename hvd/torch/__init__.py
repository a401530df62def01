"""hvd/torch: Horovod's PyTorch API over hvd's engine. A script written
for Horovod runs on hvd with its import changed:

    import hvd.torch as hvd      # was: import horovod.torch as hvd

CPU and CUDA tensors of float32, float64, float16, bfloat16, int32, int64
and uint8. What differs from Horovod is in hvd/README.md ("PyTorch")."""

from hvd import (__version__, HorovodInternalError, init, shutdown,
                 is_initialized, size, rank, local_size, local_rank,
                 cross_size, cross_rank, mpi_enabled, mpi_built,
                 mpi_threads_supported, gloo_enabled, gloo_built, nccl_built,
                 cuda_built)
from hvd.torch.compression import Compression
from hvd.torch.mpi_ops import (Average, Sum, Adasum, Min, Max, Product,
                               allreduce, allreduce_async, allreduce_,
                               allreduce_async_, grouped_allreduce,
                               grouped_allreduce_async, grouped_allreduce_,
                               grouped_allreduce_async_, broadcast,
                               broadcast_async, broadcast_, broadcast_async_,
                               allgather, allgather_async, poll, synchronize,
                               join, barrier)
from hvd.torch.functions import (broadcast_parameters,
                                 broadcast_optimizer_state, broadcast_object,
                                 allgather_object)
from hvd.torch.optimizer import DistributedOptimizer
from hvd.torch.sync_batch_norm import SyncBatchNorm
