"""The chunk NCCL's NVLS kernel moves at a time, per message size (NCCL ``src/enqueue.cc``,
``calcCollChunking``, 2.19-2.27: the NVLS branch).

Why: NCCL's NVLS bandwidth (its tuner's, and the presets' engine rate) is what NVLS reaches at its full chunk
(``nvlsChunkSize``, 128 KiB). For smaller messages NCCL halves the chunk so that every one of its concurrent
pipelines (channels x NVLS heads) still gets several chunks; each chunk pays a fixed synchronisation cost,
so a smaller chunk moves fewer bytes per second. The measured 8x H200 curve shows the step where the chunk
doubles: busbw 442.7 -> 467.6 GB/s from 512 MiB to 1 GiB, where 64 x (16 channels x 8 heads) x 64 KiB = 1 GiB
(ccviz/data/measured_nccl.csv, NCCL 2.20.5). The link model turns the chunk into a bandwidth share
(``LinkModel.chunk_share``).
"""

from __future__ import annotations

KiB = 1 << 10
NVLS_CHUNK_BYTES = 128 * KiB  # NCCL nvlsChunkSize default (NCCL_NVLS_CHUNKSIZE, src/init.cc)
NVLS_CHANNELS = 16  # NCCL_NVLS_NCHANNELS default on Hopper (NVLS_NCHANNELS_SM90, src/transport/nvls.cc)
# Blackwell: NVLS_NCHANNELS_SM100 32, and 24 on a multi-node NVLink domain (NVLS_NCHANNELS_SM100_NVL, nvls.cc)
NVLS_CHANNELS_BY_SYSTEM = {"hgxb200": 32, "nvl72": 24}
NVLS_LOW_BW_GBPS = 150.0  # across nodes, an NVLS bandwidth under this caps the chunk at 32 KiB (enqueue.cc)


def nvls_chunk_bytes(size_bytes: float, heads: int, nodes: int = 1, nvls_algbw_GBps: float | None = None,
                     channels: int = NVLS_CHANNELS) -> int:
    """NCCL's NVLS chunk for a message of ``size_bytes`` over ``heads`` NVLS heads (the GPUs of a box)."""
    chunk = NVLS_CHUNK_BYTES
    if nodes > 1 and nvls_algbw_GBps is not None and nvls_algbw_GBps < NVLS_LOW_BW_GBPS:
        chunk = min(chunk, 32 * KiB)
    concurrent = channels * max(1, heads)
    for factor, below in ((64, 64 * KiB), (8, 32 * KiB), (2, 16 * KiB)):
        if size_bytes < factor * concurrent * chunk and chunk > below:
            chunk = below
    return chunk


def nvls_channels(system: str | None) -> int:
    """How many channels NCCL runs NVLS on for this system preset (``NVLS_CHANNELS_BY_SYSTEM``)."""
    return NVLS_CHANNELS_BY_SYSTEM.get(system or "", NVLS_CHANNELS)


def nvls_pipeline(size_bytes: float, heads: int, nodes: int, nvls_algbw_GBps: float | None,
                  system: str | None) -> dict[str, int]:
    """What an NVLS schedule declares (``options['nccl_chunk']``): its chunk, NCCL's full chunk and how many
    pipelines (channels x heads) run at once."""
    channels = nvls_channels(system)
    chunk = nvls_chunk_bytes(size_bytes, heads, nodes, nvls_algbw_GBps, channels)
    return {"bytes": chunk, "full": NVLS_CHUNK_BYTES, "pipelines": channels * max(1, heads)}
