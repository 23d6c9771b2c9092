from .helpers import T, fetch
from . import helpers
from pkg import again

x = fetch("w.pt")
y = T.load("w.pt")
z = helpers.T.jit.load("m.pt")
w = helpers.serializer.loads(b"")
v = again.fetch("w.pt")
T.backends.cudnn.benchmark = True
