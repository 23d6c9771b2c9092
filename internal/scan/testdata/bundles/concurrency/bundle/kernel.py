import threading
import _thread
import multiprocessing as mp
import subprocess
import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
import torch.multiprocessing

t = threading.Thread(target=print)
pid = os.fork()
subprocess.run(["true"])
os.system("true")
