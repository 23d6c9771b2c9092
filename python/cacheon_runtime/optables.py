"""optables: the Python kernel tables of torch's operator overloads, as
the runtime guard (guard.Guard.objects) compares them."""

# The per-operator tables of Python kernels and mode handlers that torch's
# Python dispatcher reads (OpOverload and OpOverloadPacket attributes).
TABLES = ("py_kernels", "python_key_table", "python_key_mode_table", "functorch_table")


class OpTables:
    """The Python kernel tables of every operator overload that exists at
    start (torch.ops' loaded namespaces, their packets and the overloads
    materialized on them): each table object and its entries. Clearing or
    filling one (op.py_kernels.clear(), op.py_impl(key)(fn)) changes what
    torch's Python dispatcher runs for the whole process; the scan refuses
    the names, and this is the runtime's second line. Overloads first
    materialized later are not compared (nothing to compare them with),
    and a table may grow: torch's own modules register Python kernels
    when they are first imported, so what is checked is that every
    table is still the same object holding every entry it held at start
    (a cleared, shrunk, replaced or overwritten table is a change)."""

    def __init__(self, torch):
        members = self._members(torch)
        self.saved = [(op, name, table, dict(table)) for op, name, table in self._tables(members)]
        # The packets' and overloads' own attributes (a packet's _op is
        # what calling it runs; its overloads are cached on it).
        self.attrs = []
        for op in members:
            try:
                self.attrs.append((op, vars(op), dict(vars(op))))
            except TypeError:
                pass

    @staticmethod
    def _members(torch):
        """Every operator packet of torch.ops' loaded namespaces and the
        overloads materialized on it."""
        ops = getattr(torch, "ops", None)
        try:
            spaces = [v for v in vars(ops).values() if hasattr(v, "__dict__") and not isinstance(v, type)]
        except Exception:  # noqa: BLE001 - a torch without torch.ops
            return []
        out = []
        for space in spaces:
            try:
                packets = list(vars(space).values())
            except Exception:  # noqa: BLE001
                continue
            for packet in packets:
                if not hasattr(packet, "_qualified_op_name"):
                    continue
                try:
                    members = [packet] + [v for v in vars(packet).values() if hasattr(v, "_overloadname")]
                except Exception:  # noqa: BLE001
                    continue
                out.extend(members)
        return out

    @staticmethod
    def _tables(members):
        out = []
        for op in members:
            for name in TABLES:
                table = getattr(op, name, None)
                if isinstance(table, dict):
                    out.append((op, name, table))
        return out

    def changed(self):
        """'' when every saved table is the same object and still holds
        every entry it held at start, and every packet and overload still
        holds the attributes it held (a callable a packet gains must be one
        of its own overloads), else a reason."""
        for op, d, was in self.attrs:
            try:
                same = vars(op) is d and was.items() <= d.items()
                if same and len(d) != len(was) and hasattr(op, "_qualified_op_name"):
                    # a callable a packet gained must be an overload of its
                    # own (torch caches them there); data torch may add
                    # lazily is not compared
                    same = all(k in was or not callable(v) or getattr(v, "_overloadpacket", None) is op
                               for k, v in d.items())
            except Exception:  # noqa: BLE001
                same = False
            if not same:
                return "an attribute of operator %s was set or replaced (its _op or an overload: every Python call of it would run other code)" % (
                    getattr(op, "_name", None) or getattr(op, "_qualified_op_name", "?"))
        for op, name, table, was in self.saved:
            try:
                now = getattr(op, name, None)
                same = now is table and (not was or was.items() <= now.items())
            except Exception:  # noqa: BLE001
                same = False
            if not same:
                return "the %s table of operator %s changed (a Python kernel cleared, removed or replaced)" % (
                    name, getattr(op, "_name", None) or getattr(op, "_qualified_op_name", "?"))
        return ""
