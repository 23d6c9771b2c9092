a dot b
