"""hvd/torch/compression.py: how gradients travel (Horovod's
Compression.none and Compression.fp16): compress before the allreduce,
decompress after it."""

import torch


class Compressor:
    @staticmethod
    def compress(tensor):
        """(the tensor to reduce, what decompress needs)"""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Floating-point tensors travel as float16; others as they are."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
