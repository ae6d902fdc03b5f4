"""The project's ``.proto`` files (vLLM 0.32's gRPC wire contract, the standard health service)
and the message classes ``protoc`` generated from them (``*_pb2.py``, committed; ``generate.py``
remakes them and ``tests/unit/rpc/test_proto.py`` checks they are up to date)."""
