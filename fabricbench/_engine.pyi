"""Stubs of fabricbench._engine, the compiled measurement core (csrc/). Private: use it through
fabricbench/measuring/engines/native.py. Errors arrive as fabricbench.errors classes: CudaError, NcclError,
CollectiveTimeout, else FabricbenchError; bad arguments as ValueError."""

from typing import Callable, Literal, TypedDict

class RuntimeInfo(TypedDict):
    driver_version: int  # e.g. 13000 for CUDA 13.0; 0 when no driver is installed
    runtime_version: int
    device_count: int  # 0, not an error, where there is no driver or no GPU

class DeviceInfo(TypedDict):
    index: int
    name: str
    uuid: str  # "GPU-xxxxxxxx-xxxx-..."
    pci_bus_id: str
    total_bytes: int
    free_bytes: int
    multiprocessors: int
    l2_bytes: int
    cc: str  # "9.0"

class NcclInfo(TypedDict):
    path: str  # realpath of the loaded library
    version: int  # e.g. 22809
    version_str: str  # "2.28.9"

class RunResult(TypedDict):
    times_us: list[float]  # timing "events": per timed iteration, the slowest of this process's GPUs;
                           # timing "loop": one value, the host-timed loop / iters
    wrong: int | None  # elements differing from the exact result; None when check is False
    rotate: int  # buffer sets cycled through: "rotate" k x set bytes >= ~2 x L2, at most 16; "reuse" 1

class PeerCopyResult(TypedDict):
    times_us: list[float]
    peer_access: bool  # direct peer access was enabled (False for src == dst)

class HostCopyResult(TypedDict):
    times_us: list[float]

def _raise_for_test(kind: Literal["cuda", "nccl", "timeout", "engine", "cuda_check"], message: str) -> None: ...
def runtime_info() -> RuntimeInfo: ...
def devices(indices: list[int] | None = None) -> list[DeviceInfo]: ...
def load_nccl(path: str) -> NcclInfo: ...
def unique_id(nccl_path: str) -> bytes: ...  # 128 bytes
def copy_peer(src: int, dst: int, nbytes: int, warmup: int = 5, iters: int = 20,
              bidirectional: bool = False) -> PeerCopyResult: ...
def copy_host(device: int, nbytes: int, warmup: int = 5, iters: int = 20,
              direction: Literal["h2d", "d2h", "bidir"] = "h2d") -> HostCopyResult: ...

class Communicator:
    @staticmethod
    def single_process(nccl_path: str, devices: list[int], timeout_s: float = 300.0) -> Communicator: ...
    @staticmethod
    def per_rank(nccl_path: str, device: int, rank: int, nranks: int, unique_id: bytes,
                 timeout_s: float = 300.0) -> Communicator: ...
    @property
    def nranks(self) -> int: ...
    @property
    def devices(self) -> list[int]: ...
    @property
    def ranks(self) -> list[int]: ...
    def run(self, op: str, dtype: str, count: int, inplace: bool = False, warmup: int = 5, iters: int = 20,
            graph: bool = False, graph_iters: int = 100, check: bool = False, seed: int = 0,
            timeout_s: float = 300.0, barrier: Callable[[], None] | None = None,
            buffers: Literal["rotate", "reuse"] = "rotate",
            timing: Literal["events", "loop"] = "events",
            alloc: Literal["cuda", "nccl"] = "cuda", loops: int = 1) -> RunResult: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
