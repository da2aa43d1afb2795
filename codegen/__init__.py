"""Backends: lowered functions to native code (``codegen.build``) and the :class:`Module` that runs it."""
from __future__ import annotations

from .build import build, lower_to_func
from .model.build import build_model
from .runtime import ArtifactError, GraphModule, ModelModule, load_model
from .export import load_module
from .extern_code import load_library
from .llvm import CodegenError
from .module import Module, default_num_threads
from .runnable import CPUFeatureError
from .target import Target, host
from .target import parse as parse_target
from .timer import ProfileResult

__all__ = ["build", "lower_to_func", "load_module", "CodegenError", "Module", "default_num_threads", "Target",
           "host", "parse_target", "ProfileResult", "load_library", "build_model", "GraphModule",
           "ModelModule", "load_model", "ArtifactError", "CPUFeatureError"]
