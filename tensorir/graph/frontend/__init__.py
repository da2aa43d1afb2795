"""Model importers (``onnx``)."""
