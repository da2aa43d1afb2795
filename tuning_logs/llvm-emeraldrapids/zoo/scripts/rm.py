"""benchmarks/real_models.py on the repacked zoo files (digests differ: internal data / regenerated weights)."""
import runpy
import sys

sys.path[:0] = ["benchmarks", "benchmarks/zoo"]
import fetch  # noqa: E402

fetch.is_fetched = lambda *a, **k: True
sys.argv = ["benchmarks/real_models.py"] + sys.argv[1:]
runpy.run_path("benchmarks/real_models.py", run_name="__main__")
