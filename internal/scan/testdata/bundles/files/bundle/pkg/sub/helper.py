from ..deep import chained
