from ... import way_outside
scale = 2
