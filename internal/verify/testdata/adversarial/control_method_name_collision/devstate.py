class DevState:
    def __init__(self):
        self.device = None

    def to(self, device):
        self.device = device
        return self
