"""The conformance suite's own run: every installed strategy on the runtime the ``pacer_runtimes`` hook
finds (``sim`` unless ``PACER_CONFORMANCE_RUNTIME`` names another): the default ``conformance_runtime`` fixture."""
