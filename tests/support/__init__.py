"""What the test suites share: error assertions, byte normalizers, and a driver that runs a
prepared request through the real response bodies (``streaming/body.py``)."""
