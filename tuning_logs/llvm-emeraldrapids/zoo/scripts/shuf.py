"""Pack ONNX files for the 64 MiB transfer: float32 raw initializers byte-shuffled (xz compresses them
better), external data made internal; with -r also large float tensors replaced by their mean/std
(regenerated from a seed on unpacking). -d undoes the packing."""
import sys
import zlib

import numpy as np
import onnx

mode = sys.argv[1]
for f in sys.argv[2:]:
    m = onnx.load(f)
    for t in m.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        if mode == "-d":
            if t.doc_string.startswith("regen "):
                mean, std = map(float, t.doc_string.split()[1:])
                rng = np.random.default_rng(zlib.crc32(t.name.encode()))
                t.raw_data = rng.normal(mean, std, tuple(t.dims)).astype(np.float32).tobytes()
                t.doc_string = ""
            elif t.raw_data:
                t.raw_data = np.frombuffer(t.raw_data, np.uint8).reshape(4, -1).T.tobytes()
        elif t.raw_data:
            a = np.frombuffer(t.raw_data, np.float32)
            if mode == "-r" and a.size >= 4096:
                t.doc_string = f"regen {a.mean():.9g} {a.std():.9g}"
                t.raw_data = b""
            else:
                t.raw_data = np.frombuffer(t.raw_data, np.uint8).reshape(-1, 4).T.tobytes()
    onnx.save(m, f)
