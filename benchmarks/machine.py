"""What every benchmark prints about the machine it ran on: the CPU with the features that decide its speed,
and the load average (other jobs sharing the cores)."""

from __future__ import annotations

import os


def cpu_line() -> str:
    """The CPU's model name and which of the features that matter it has."""
    from protoembed.model.precision import cpu_features, cpu_model

    features = ", ".join(f"{flag} {'yes' if present else 'no'}" for flag, present in cpu_features().items())
    return f"CPU: {cpu_model()}, {os.cpu_count()} logical cores ({features})"


def load_line() -> str:
    """``load average: 1, 5 and 15 minutes``."""
    return "load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def device_line(device: str) -> str:
    """What a device figure was measured on: the device (a CUDA GPU's name and memory, else the CPU line),
    the host's cores and the versions of the libraries that ran."""
    import importlib.metadata as metadata

    import torch

    versions = []
    for name in ("protoembed", "torch", "transformers", "sentence-transformers", "tokenizers"):
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        where = f"GPU: {props.name} ({props.total_memory / 2**30:.0f} GiB), CUDA {torch.version.cuda}"
    else:
        where = cpu_line()
    return f"{where}; host: {len(os.sched_getaffinity(0))} cores usable of {os.cpu_count()}; {', '.join(versions)}"
