"""harness: the output contract of a slot call in the engine and the check
of it after the call, shared by a candidate's calls and the stock calls of
a poisoned target slot (dispatch.Dispatch._mirrored), which go through the
same host work so that the referee's reads differ in the kernel alone."""

from . import msacalls


class CandidateAbort(Exception):
    """A selected candidate failed in strict mode (or in a replayed graph,
    where nothing can fall back): the engine must abort."""

    def __init__(self, slot, variant, reason, traceback=""):
        Exception.__init__(self, "%s (variant %s): %s" % (slot, variant, reason))
        self.slot, self.variant, self.reason, self.traceback = slot, variant, reason, traceback


def out_spec(name, shape, dtype, alignment):
    """The output spec (host.output_spec) of an output: shape a tuple (the
    call's input dtype, contiguous) or a msacalls.OutShape."""
    if not isinstance(shape, msacalls.OutShape):
        shape = msacalls.OutShape(shape, dtype)
    spec = {"name": name, "dtype": str(shape.dtype).replace("torch.", ""), "shape": list(shape.shape),
            "alignment": alignment}
    if shape.stride is not None:
        spec["stride"] = list(shape.stride)
    return spec


def revalidate(ops, outs, specs, before, bases):
    """Reason string when an output's identity or layout changed, else ''."""
    for n, o in outs.items():
        after = ops.fact(o.visible)
        if after != before[n]:
            diff = sorted(k for k in after if after[k] != before[n].get(k))
            return "output %s identity changed during the call (%s)" % (n, ", ".join(diff))
        if ops.data_ptr(o.contract) != bases[n]:
            return "output %s storage moved during the call" % n
        sp = specs[n]
        if after["shape"] != list(sp.shape) or after["stride"] != list(sp.stride):
            return "output %s layout differs from the contract" % n
        if after["data_ptr"] % sp.align:
            return "output %s is not %d-byte aligned" % (n, sp.align)
    return ""
