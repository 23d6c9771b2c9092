"""cacheon_runtime: the sandboxed, untrusted side of Cacheon.

Everything here runs next to candidate code. It reports raw facts only; the
Go validator owns inputs, references, grading and timing.
"""
