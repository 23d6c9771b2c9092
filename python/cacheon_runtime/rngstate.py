"""rngstate: whether torch's default CPU random generator moved.

``torch.rand``, ``randn``, ``randint``, ``bernoulli_``, ``normal_`` and
every other random function called on the CPU without a ``generator=`` of
its own draw from the process's default generator. A kernel that draws
from it changes what every later draw of the process gives: in serving,
another component's sampling or initialisation. Neither the runtime nor
the engine draws from it (the engine's weights use generators of their
own), so any move is the candidate's. The runtime guard asks ``changed``
after every candidate call (verify) and every engine request.

The CUDA devices' default generators are not watched yet: whether torch's
own CUDA operators (attention without dropout among them) leave them
untouched has not been checked on a GPU.

Works with torch 1.13 and torch 2.x.
"""


class RngState:
    """The default CPU generator's state at start, and the check."""

    def __init__(self, torch):
        self.torch = torch
        try:
            self.cpu = torch.default_generator.get_state()
        except Exception:  # noqa: BLE001 - a torch without one: nothing to watch
            self.cpu = None

    def changed(self):
        """A reason when the default CPU generator's state differs from
        start; '' otherwise."""
        if self.cpu is None:
            return ""
        try:
            now = self.torch.default_generator.get_state()
        except Exception as e:  # noqa: BLE001
            return "torch's default random generator cannot be read (%s)" % type(e).__name__
        if not self.torch.equal(now, self.cpu):
            return ("torch's default CPU random generator advanced: candidate code drew random numbers "
                    "without a generator of its own, which changes every later draw of the process")
        return ""
