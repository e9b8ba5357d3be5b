"""tierbot's benchmarks: speed targets measured with the machine's noise in mind.

Not a library: nothing outside ``benchmarks/`` imports from here.  See README.md for the
convention every benchmark follows and ``python -m benchmarks`` for the harness.
"""
