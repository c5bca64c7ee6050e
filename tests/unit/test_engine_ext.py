"""CPU tier of the compiled engine: it imports without a driver, reports no GPU without throwing, maps
its C++ exceptions onto fabricbench.errors, refuses non-NCCL libraries, and the NCCL path resolution
and the native session's no-GPU message are right.

    python -m pytest tests/unit/test_engine_ext.py -q
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

from fabricbench import errors
from fabricbench.measuring import nccl_lib
from fabricbench.measuring.config import SweepConfig
from fabricbench.measuring.nccl_lib import ENV_VAR, resolve_nccl_library

BUILT = importlib.util.find_spec("fabricbench._engine") is not None
needs_ext = pytest.mark.skipif(not BUILT, reason="fabricbench._engine not built (no CUDA toolkit at install time)")


@pytest.fixture
def engine():
    return importlib.import_module("fabricbench._engine")


@needs_ext
def test_runtime_info_without_driver_or_gpu(engine):
    info = engine.runtime_info()
    assert set(info) == {"driver_version", "runtime_version", "device_count"}
    assert info["runtime_version"] >= 11000
    if info["driver_version"] == 0:  # this CPU machine / CI: no driver
        assert info["device_count"] == 0
        assert engine.devices() == []


@needs_ext
@pytest.mark.parametrize("kind, cls", [
    ("cuda", errors.CudaError),
    ("nccl", errors.NcclError),
    ("timeout", errors.CollectiveTimeout),
    ("engine", errors.FabricbenchError),
])
def test_exception_translation(engine, kind, cls):
    message = f"a {kind} failure at csrc/x.cpp:12 (exact text)"
    with pytest.raises(cls) as info:
        engine._raise_for_test(kind, message)
    assert type(info.value) is cls
    assert str(info.value) == message


@needs_ext
def test_check_macro_carries_expression_location_and_name(engine):
    with pytest.raises(errors.CudaError, match=r"failed at csrc/bind_errors\.cpp:\d+: cudaErrorInvalidValue"):
        engine._raise_for_test("cuda_check", "")


@needs_ext
def test_timeout_is_also_a_timeout_error(engine):
    with pytest.raises(TimeoutError):
        engine._raise_for_test("timeout", "x")


@needs_ext
def test_load_nccl_missing_file(engine, tmp_path):
    missing = tmp_path / "libnccl.so.2"
    with pytest.raises(errors.NcclError, match="no such file"):
        engine.load_nccl(str(missing))


@needs_ext
def test_load_nccl_rejects_a_library_without_nccl(engine):
    libm = next((p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6", "/lib64/libm.so.6",
                             "/lib/aarch64-linux-gnu/libm.so.6") if Path(p).is_file()), None)
    if libm is None:
        pytest.skip("no libm.so.6 at a known path")
    with pytest.raises(errors.NcclError, match=r"is not an NCCL library \(no symbol ncclGetVersion\)"):
        engine.load_nccl(libm)


@needs_ext
def test_load_nccl_rejects_a_file_that_is_no_library(engine, tmp_path):
    junk = tmp_path / "libnccl.so.2"
    junk.write_bytes(b"not an ELF file")
    with pytest.raises(errors.NcclError, match="cannot load NCCL from"):
        engine.load_nccl(str(junk))


def _lib(tmp_path: Path, name: str) -> str:
    path = tmp_path / name / "libnccl.so.2"
    path.parent.mkdir()
    path.write_bytes(b"\x7fELF")
    return str(path)


@pytest.fixture
def candidates(tmp_path, monkeypatch):
    wheel, system = _lib(tmp_path, "wheel"), _lib(tmp_path, "system")
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setattr(nccl_lib, "wheel_library", lambda: wheel)
    monkeypatch.setattr(nccl_lib, "system_library", lambda: system)
    return {"wheel": wheel, "system": system, "env": _lib(tmp_path, "env"), "explicit": _lib(tmp_path, "explicit")}


def test_resolve_precedence_explicit_env_wheel_system(candidates, monkeypatch):
    monkeypatch.setenv(ENV_VAR, candidates["env"])
    assert resolve_nccl_library(candidates["explicit"]) == candidates["explicit"]
    assert resolve_nccl_library(None) == candidates["env"]
    monkeypatch.delenv(ENV_VAR)
    assert resolve_nccl_library(None) == candidates["wheel"]
    monkeypatch.setattr(nccl_lib, "wheel_library", lambda: None)
    assert resolve_nccl_library(None) == candidates["system"]
    monkeypatch.setattr(nccl_lib, "system_library", lambda: None)
    with pytest.raises(errors.EngineUnavailable, match="--nccl-lib"):
        resolve_nccl_library(None)


def test_resolve_missing_explicit_path_is_a_usage_error(candidates, tmp_path):
    bad = str(tmp_path / "x" / "libnccl.so.2")
    with pytest.raises(errors.UsageError) as info:
        resolve_nccl_library(bad)
    assert str(info.value) == (f"--nccl-lib {bad}: no such file; point it at libnccl.so.2 "
                               f"(e.g. {candidates['wheel']})")


def test_resolve_directory_or_bad_env_is_a_usage_error(candidates, monkeypatch, tmp_path):
    with pytest.raises(errors.UsageError, match="no such file"):
        resolve_nccl_library(str(tmp_path))
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nope.so"))
    with pytest.raises(errors.UsageError, match=f"^{ENV_VAR} .*nope.so: no such file"):
        resolve_nccl_library(None)


@pytest.mark.parametrize("layout", nccl_lib.WHEEL_LAYOUTS)
def test_wheel_library_finds_each_nvidia_namespace_layout(layout, tmp_path, monkeypatch):
    lib = tmp_path / "nvidia" / layout / "libnccl.so.2"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    importlib.invalidate_caches()
    assert nccl_lib.wheel_library() == str(lib)


@needs_ext
def test_native_session_without_gpu_names_the_torch_engine(engine):
    if engine.runtime_info()["device_count"]:
        pytest.skip("a GPU is visible here")
    from fabricbench.measuring.engines.native import open_session

    with pytest.raises(errors.EngineUnavailable, match="--engine torch"):
        open_session(SweepConfig(), None)


def test_native_module_imports_without_the_extension():
    # The engine module never imports the extension at import time.
    mod = importlib.import_module("fabricbench.measuring.engines.native")
    assert "--engine torch" in mod.NOT_BUILT and "--engine torch" in mod.NO_GPU
