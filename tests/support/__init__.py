"""What the test suites share: error assertions, byte normalizers, a driver that runs a
prepared request through the real response bodies (``streaming/body.py``), a fake engine at the
socket level, polling helpers, and a driver for simulator subprocesses (``sim_driver``)."""
