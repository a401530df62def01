"""hvd/__init__.py: Python's way into hvd's C core (hvd/hvd.h, built as
libhvd.so), loaded with ctypes: no compiled extension, so the package
works with whatever PyTorch is installed. This module holds what every
framework binding shares (Horovod's horovod.common.basics): the library,
its statuses as exceptions, init/shutdown and the topology. The tensor
API is hvd.torch (`import hvd.torch as hvd`, as `import horovod.torch`).

The library is found at $HVD_LIBRARY, else next to this package (the
build tree: ../libhvd.so), else in the libdir make install recorded
(hvd/_installed.py), else by the dynamic loader's search."""

import atexit
import ctypes
import os

__version__ = "0.1.0"  # configure.ac's AC_INIT

__all__ = ["__version__", "HorovodInternalError", "init", "shutdown", "is_initialized",
           "size", "rank", "local_size", "local_rank", "cross_size",
           "cross_rank", "mpi_enabled", "mpi_built", "mpi_threads_supported",
           "gloo_enabled", "gloo_built", "nccl_built", "cuda_built"]


class HorovodInternalError(RuntimeError):
    """A collective failed in hvd's engine (ranks that disagree on a
    tensor's count, dtype or memory kind, MPI or CUDA errors, a stall);
    its text is hvd's own message (hvd_last_error)."""


def _library_path():
    path = os.environ.get("HVD_LIBRARY")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    built = os.path.join(os.path.dirname(here), "libhvd.so")
    if os.path.exists(built):
        return built
    try:  # written by make install
        from hvd._installed import libdir
        return os.path.join(libdir, "libhvd.so")
    except ImportError:
        return "libhvd.so"


def _load():
    path = _library_path()
    try:
        # RTLD_GLOBAL: Open MPI dlopens its plugins, which look for
        # libmpi's symbols in the global scope.
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise ImportError("hvd: cannot load %s (%s); set HVD_LIBRARY to "
                          "the path of libhvd.so" % (path, e)) from None
    c_int, c_size, ptr = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p
    handle_p = ctypes.POINTER(ptr)
    prototypes = {
        "hvd_init": (c_int, [ptr, ptr]),
        "hvd_shutdown": (c_int, []),
        "hvd_is_initialized": (c_int, []),
        "hvd_strerror": (ctypes.c_char_p, [c_int]),
        "hvd_last_error": (ctypes.c_char_p, []),
        "hvd_allreduce_async": (c_int, [ptr, ptr, c_size, c_int, c_int,
                                        ctypes.c_char_p, handle_p]),
        "hvd_allreduce_async_stream": (c_int, [ptr, ptr, c_size, c_int,
                                               c_int, ctypes.c_char_p, ptr,
                                               handle_p]),
        "hvd_broadcast_async": (c_int, [ptr, c_size, c_int, c_int,
                                        ctypes.c_char_p, handle_p]),
        "hvd_broadcast_async_stream": (c_int, [ptr, c_size, c_int, c_int,
                                               ctypes.c_char_p, ptr,
                                               handle_p]),
        "hvd_allgather": (c_int, [ptr, c_size, ptr, c_int, ctypes.c_char_p]),
        "hvd_wait": (c_int, [ptr]),
        "hvd_wait_stream": (c_int, [ptr, ptr]),
        "hvd_poll": (c_int, [ptr]),
        "hvd_barrier": (c_int, []),
        "hvd_join": (c_int, []),
        "hvd_last_joined": (c_int, []),
        "ring_is_device_memory": (c_int, [ptr]),
    }
    for name in ("rank", "size", "local_rank", "local_size", "cross_rank",
                 "cross_size"):
        prototypes["hvd_" + name] = (c_int, [])
    for name, (restype, argtypes) in prototypes.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


_lib = _load()


def _error_text(status):
    """hvd's message for the error the calling thread just got."""
    message = _lib.hvd_last_error().decode("utf-8", "replace")
    return message or _lib.hvd_strerror(status).decode()


def _check(status, error=HorovodInternalError):
    """Raises error with hvd's message when a call returned a status < 0;
    else returns the value."""
    if status < 0:
        raise error(_error_text(status))
    return status


def _require_init():
    if not is_initialized():
        raise ValueError("Horovod has not been initialized; use hvd.init().")


def init(comm=None, process_sets=None):
    """Starts hvd (MPI, unless the program started it, and the engine)
    on every rank; the HVD_* variables are read here, and a bad one
    raises ValueError naming it. A second call while initialised does
    nothing. comm and process_sets are Horovod's: hvd runs on all ranks,
    so only None is taken."""
    if comm is not None or process_sets is not None:
        raise ValueError("hvd.init: comm and process_sets are not "
                         "supported; hvd runs on all of MPI_COMM_WORLD")
    if is_initialized():
        return
    _check(_lib.hvd_init(None, None), ValueError)
    atexit.register(_shutdown_at_exit)


def _shutdown_at_exit():
    if is_initialized():
        _lib.hvd_shutdown()


def shutdown():
    """Finishes outstanding work and stops hvd (MPI too, when hvd
    started it: it cannot be initialised again in this process)."""
    if is_initialized():
        _check(_lib.hvd_shutdown())


def is_initialized():
    return bool(_lib.hvd_is_initialized())


def _topology(function):
    def query():
        _require_init()
        return _check(function())
    query.__name__ = function.__name__[len("hvd_"):]
    return query


size = _topology(_lib.hvd_size)
rank = _topology(_lib.hvd_rank)
local_size = _topology(_lib.hvd_local_size)
local_rank = _topology(_lib.hvd_local_rank)
cross_size = _topology(_lib.hvd_cross_size)
cross_rank = _topology(_lib.hvd_cross_rank)


def mpi_threads_supported():
    _require_init()
    return True  # hvd_init refuses an MPI with less than SERIALIZED


def mpi_enabled():
    return True


def mpi_built():
    return True


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    return 0


def cuda_built():
    """Whether libhvd.so was built with CUDA, GPU or not (Horovod's
    answer: the build's). Such a build links the CUDA runtime, and a
    lookup through the library searches what it links, not the process
    (where PyTorch may have loaded its own)."""
    return hasattr(_lib, "cudaRuntimeGetVersion")
