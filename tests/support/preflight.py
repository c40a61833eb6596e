"""A healthy DGX Spark as the preflight's probes see it."""

from __future__ import annotations

from app.backend.firststart.preflight import GIB, GpuInfo, Probes

SPARK_MEMTOTAL = 121 * GIB
GB10 = GpuInfo(name="NVIDIA GB10", sm=121, total_bytes=int(119.6 * GIB))
HEALTHY_SPARK = Probes(
    nvcc="/usr/local/cuda/bin/nvcc",
    cuda_version=(13, 0),
    cxx="/usr/bin/c++",
    driver=(580, 95, 5),
    gpu=GB10,
    mem_total=SPARK_MEMTOTAL,
    mem_available=115 * GIB,
    modprobe_override=False,
    resident=(),
    disk_free=500 * GIB,
)
