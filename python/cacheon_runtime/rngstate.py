"""rngstate: whether torch's default random generators moved.

``torch.rand``, ``randn``, ``randint``, ``bernoulli_``, ``normal_`` and
every other random function called on the CPU without a ``generator=`` of
its own draw from the process's default generator. A kernel that draws
from it changes what every later draw of the process gives: in serving,
another component's sampling or initialisation. Neither the runtime nor
the engine draws from it (the engine's weights use generators of their
own), so any move is the candidate's. The runtime guard asks ``changed``
after every candidate call (verify) and every engine request.

The same holds for each CUDA device's default generator (a Philox seed and
offset; reading it costs no device work). They are read at start when
CUDA is already initialised (a CUDA worker's is, before any candidate
import), else at the first check that finds CUDA initialised: a draw
made by the very call that first initialised CUDA is then not seen.

Works with torch 1.13 and torch 2.x.
"""


class RngState:
    """The default generators' states at start, and the check."""

    def __init__(self, torch):
        self.torch = torch
        try:
            self.cpu = torch.default_generator.get_state()
        except Exception:  # noqa: BLE001 - a torch without one: nothing to watch
            self.cpu = None
        self.cuda = self._cuda_states()

    def _cuda_states(self):
        """The CUDA default generators' states, or None before CUDA is
        initialised (reading them would initialise it)."""
        cuda = getattr(self.torch, "cuda", None)
        try:
            if cuda is None or not cuda.is_initialized():
                return None
            return [g.get_state() for g in cuda.default_generators]
        except Exception:  # noqa: BLE001 - no CUDA generators to watch
            return None

    def changed(self):
        """A reason when the default CPU generator's or a CUDA device's
        default generator's state differs from start; '' otherwise."""
        if self.cpu is not None:
            try:
                now = self.torch.default_generator.get_state()
            except Exception as e:  # noqa: BLE001
                return "torch's default random generator cannot be read (%s)" % type(e).__name__
            if not self.torch.equal(now, self.cpu):
                return ("torch's default CPU random generator advanced: candidate code drew random numbers "
                        "without a generator of its own, which changes every later draw of the process")
        return self._cuda_changed()

    def _cuda_changed(self):
        if self.cuda is None:
            self.cuda = self._cuda_states()
            return ""
        try:
            now = [g.get_state() for g in self.torch.cuda.default_generators]
        except Exception as e:  # noqa: BLE001
            return "torch's CUDA random generators cannot be read (%s)" % type(e).__name__
        for i, (a, b) in enumerate(zip(self.cuda, now)):
            if not self.torch.equal(a, b):
                return ("torch's default CUDA random generator of device %d advanced: candidate code drew random "
                        "numbers without a generator of its own, which changes every later draw of the process" % i)
        return ""
