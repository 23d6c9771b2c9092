"""conditions: the process-wide conditions candidate code runs under.

``read`` returns them as a tuple of (what, value) pairs, the same in the
verify worker and the engine; the runtime guard (``guard.Guard``) keeps
the tuple it read before any candidate import and refuses a process whose
conditions differ after a call or a load: grad and inference mode,
autocast, threads, the default dtype, deterministic algorithms, float32
matmul precision, anomaly mode, and since session 50 the backends'
switches (cuDNN, cuBLAS, mkldnn, opt_einsum) and the thread's subnormal
flush (rt50a left ``torch.set_flush_denormal(True)`` on at import).
"""


def read(torch):
    """The process-wide conditions candidate code runs under (a tuple)."""
    calls = [(n, ()) for n in ("is_grad_enabled", "is_inference_mode_enabled", "get_num_threads",
                               "get_num_interop_threads", "get_default_dtype",
                               "is_autocast_cache_enabled", "are_deterministic_algorithms_enabled",
                               "get_float32_matmul_precision", "is_anomaly_enabled")]
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4 (the old names warn)
        for dev in ("cpu", "cuda"):
            calls += [("is_autocast_enabled", (dev,)), ("get_autocast_dtype", (dev,))]
    else:
        calls += [(n, ()) for n in ("is_autocast_enabled", "is_autocast_cpu_enabled",
                                    "get_autocast_gpu_dtype", "get_autocast_cpu_dtype")]
    out = []
    for name, args in calls:
        f = getattr(torch, name, None)
        try:
            out.append(("torch.%s()" % name, f(*args) if f is not None else None))
        except Exception as e:  # noqa: BLE001
            out.append(("torch.%s()" % name, type(e).__name__))
    # The backends' process-wide switches (torch.backends.cudnn.*,
    # torch.backends.cuda.matmul.*, mkldnn), read from torch's own getters
    # (those this torch has): each changes the arithmetic of every later
    # call in the process.
    C = torch._C
    for name in _BACKEND_FLAGS:
        f = getattr(C, name, None)
        if f is None:
            continue
        try:
            out.append(("torch._C.%s()" % name, f()))
        except Exception as e:  # noqa: BLE001
            out.append(("torch._C.%s()" % name, type(e).__name__))
    oe = getattr(getattr(torch, "backends", None), "opt_einsum", None)  # rt50c: its set_flags
    for name in ("enabled", "strategy"):
        try:
            out.append(("torch.backends.opt_einsum." + name, getattr(oe, name, None)))
        except Exception as e:  # noqa: BLE001
            out.append(("torch.backends.opt_einsum." + name, type(e).__name__))
    out.append(("flushing float32 subnormals to zero (torch.set_flush_denormal)", _flushes_denormals(torch)))
    return tuple(out)


# torch._C's getters of the backends' switches (torch 1.13 and 2.x names;
# a torch without one skips it).
_BACKEND_FLAGS = ("_get_cudnn_enabled", "_get_cudnn_benchmark", "_get_cudnn_deterministic",
                  "_get_cudnn_allow_tf32", "_get_cublas_allow_tf32",
                  "_get_cublas_allow_fp16_reduced_precision_reduction",
                  "_get_cublas_allow_bf16_reduced_precision_reduction",
                  "_get_mkldnn_enabled", "_get_deterministic_algorithms_warn_only")


def _flushes_denormals(torch, tiny=float("1e-310"), one=1.5):
    """Whether this thread's floating-point unit flushes subnormals to zero
    (torch.set_flush_denormal, which has no getter): the product of a
    subnormal double and 1.5, made by the interpreter's own arithmetic
    (no torch call a candidate could have replaced), comes out 0. The
    flag is the thread's, and candidate calls run on this one."""
    return tiny * one == 0.0
