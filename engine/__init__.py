"""greenfront's side of the vLLM v1 engine-core link: wire protocol, client and simulator."""
