ONE = 1
