def system(cmd):
    return 0
