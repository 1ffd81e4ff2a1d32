"""How a Dataset holds and reads its data, measured on this machine's CPU (TDR305, TDR306).

TDR306: ``__getitem__`` that parses a whole JSON file (20,000 records) for every sample, against
the same records parsed once in ``__init__``; per-sample time over 200 samples, no workers.

TDR305: a dataset holding 40,000 samples of 1 KiB as a list of Python ``bytes`` objects,
against the same bytes in one blob that ``__getitem__`` slices. Two ``fork`` workers each read
the samples of their batches (half of them) once and report the memory they have privately
copied from the parent (``Private_Dirty`` in ``/proc/self/smaps_rollup``, Linux only). Touching
a Python object writes its reference count, so the list's pages are copied into the worker;
the blob's are not.

    python bench/cpu_dataset_reads.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

RECORDS, READS = 20_000, 200
SAMPLES, SAMPLE_BYTES, BATCH = 40_000, 1024, 1000


class ReadsEveryTime(Dataset):
    def __init__(self, path: str) -> None:
        self.path = path

    def __len__(self) -> int:
        return RECORDS

    def __getitem__(self, i: int) -> dict:
        with open(self.path) as f:
            return json.load(f)[i]


class ReadsOnce(Dataset):
    def __init__(self, path: str) -> None:
        with open(path) as f:
            self.records = json.load(f)

    def __len__(self) -> int:
        return RECORDS

    def __getitem__(self, i: int) -> dict:
        return self.records[i]


def per_sample_ms(ds: Dataset) -> float:
    t0 = time.perf_counter()
    for i in range(READS):
        ds[i]
    return (time.perf_counter() - t0) / READS * 1000


def private_dirty_kib() -> int:
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1])
    return 0


def _report(i: int, sample: bytes) -> torch.Tensor:
    """The sample's size, and at the start and end of each batch the worker's copied memory."""
    edge = i % BATCH in (0, BATCH - 1)
    dirty = private_dirty_kib() if edge else -1
    return torch.tensor([len(sample), dirty, get_worker_info().id])


class Objects(Dataset):
    """One Python object per sample."""

    def __init__(self) -> None:
        self.items = [os.urandom(SAMPLE_BYTES) for _ in range(SAMPLES)]

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> torch.Tensor:
        return _report(i, self.items[i])


class Blob(Dataset):
    """All samples in one object."""

    def __init__(self) -> None:
        self.blob = os.urandom(SAMPLE_BYTES * SAMPLES)

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, i: int) -> torch.Tensor:
        return _report(i, self.blob[i * SAMPLE_BYTES : (i + 1) * SAMPLE_BYTES])


def worker_copies_mib(ds: Dataset) -> float:
    """Largest growth of a worker's privately copied memory over one epoch, in MiB."""
    loader = DataLoader(ds, batch_size=BATCH, num_workers=2, multiprocessing_context="fork")
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for batch in loader:
        for _, dirty, worker in batch.tolist():
            if dirty >= 0:
                first.setdefault(worker, dirty)
                last[worker] = dirty
    return max(last[w] - first[w] for w in last) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    records = [{"id": i, "text": f"caption {i} " * 8, "label": i % 10} for i in range(RECORDS)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "records.json")
        with open(path, "w") as f:
            json.dump(records, f)
        size_mib = os.path.getsize(path) / 2**20
        every = per_sample_ms(ReadsEveryTime(path))
        once = per_sample_ms(ReadsOnce(path))
    info: dict[str, object] = {
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "TDR306": {
            "file_mib": round(size_mib, 1),
            "reads_every_sample_ms": round(every, 2),
            "read_once_us": round(once * 1000, 2),
            "epoch_parsing_s": round(every * RECORDS / 1000),
        },
    }
    if os.path.exists("/proc/self/smaps_rollup"):
        info["TDR305"] = {
            "dataset_mib": SAMPLES * SAMPLE_BYTES / 2**20,
            "objects_worker_copy_mib": round(worker_copies_mib(Objects()), 1),
            "blob_worker_copy_mib": round(worker_copies_mib(Blob()), 1),
        }
    if args.json:
        print(json.dumps(info, indent=2))
        return
    t306 = info["TDR306"]
    assert isinstance(t306, dict)
    print(f"torch {info['torch']}, {info['cpu_count']} CPUs")
    print(
        f"TDR306: a {t306['file_mib']} MiB JSON parsed per sample: "
        f"{t306['reads_every_sample_ms']} ms per sample ({t306['epoch_parsing_s']} s per epoch of "
        f"{RECORDS} samples); parsed once: {t306['read_once_us']} µs per sample"
    )
    t305 = info.get("TDR305")
    if isinstance(t305, dict):
        print(
            f"TDR305: {t305['dataset_mib']:.0f} MiB of samples; memory each worker copied in "
            f"one epoch: list of objects {t305['objects_worker_copy_mib']} MiB, one blob "
            f"{t305['blob_worker_copy_mib']} MiB"
        )


if __name__ == "__main__":
    main()
