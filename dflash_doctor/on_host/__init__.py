"""The code that runs on hosts: each module here is shipped as text and run there with `-c`.

One home for what runs outside this interpreter: the bundle and the log filter under the
host's system python3 (3.8 and newer), SGLang's own parse and the attention probe under the
server's interpreter. Every module here is listed in `shipped.HOST_SCRIPTS` with the oldest
Python it must run under (tests/test_host_side_python.py runs each under that floor and
fails on a module here that the list lacks). Stdlib only (the probe adds torch); they import
nothing from the package, so the rest of the package may import their tables and parsers.
"""
