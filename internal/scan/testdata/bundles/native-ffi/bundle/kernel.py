import ctypes
from ctypes import CDLL
import cffi

libc = ctypes.CDLL(None)
ffi = cffi.FFI()
