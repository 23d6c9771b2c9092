scale = 1.01
