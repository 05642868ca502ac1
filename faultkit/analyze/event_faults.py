"""Kernel-log events that are GPU faults by themselves: a device's DMA the AMD IOMMU blocked
(`AMD-Vi: Event logged [IO_PAGE_FAULT ...]`) and an NVIDIA GPU that fell off the bus without an
Xid line (the driver's `The NVIDIA GPU <pci> ... has fallen off the bus` record)."""

from __future__ import annotations

from ..model import Fault, KernelEvent, KernelLog

# an IO page fault of a device another driver owns (a NIC's, an NVMe's) is no GPU's: drivers of GPUs
# (and the IOMMU's own line, or none, where it knew no driver for the device)
GPU_DRIVERS = frozenset({"amdgpu", "nvidia", "iommu", None})


def _iommu_fault(e: KernelEvent) -> Fault | None:
    f = e.fields
    if f.get("event") != "IO_PAGE_FAULT" or f.get("driver") not in GPU_DRIVERS:
        return None
    dev = f.get("device")
    addr = f.get("address")
    if addr is None:
        return None        # (words about such a line, `address=...`, are no record of one)
    rw = "write" if f.get("write") else "read" if "flags" in f else "access"
    meaning = (f"The IOMMU (AMD-Vi) blocked a DMA {rw} by device {dev or '?'} to I/O virtual address "
               f"{hex(addr) if addr is not None else '?'} (domain {hex(f['domain']) if 'domain' in f else '?'}): "
               f"the address was not mapped for the device, so the access never reached memory.")
    detail = {k: (hex(v) if isinstance(v, int) and not isinstance(v, bool) else v)
              for k, v in f.items() if k in ("device", "driver", "domain", "flags", "pasid", "write") and v is not None}
    detail["text"] = e.text
    return Fault(source="kernel-log", kind="iommu-io-page-fault", address=addr, gpu=dev,
                 time=e.stamp.raw if e.stamp else None, detail=detail, meaning=meaning, origin=e.origin)


def _lost_fault(e: KernelEvent) -> Fault:
    pci_id = e.fields.get("pci_id")
    meaning = (f"The NVIDIA driver found GPU {e.pci}" + (f" (PCI ID {pci_id})" if pci_id else "") +
               " not responding: it has fallen off the bus (the same loss Xid 79 reports). A hardware, power or "
               "link failure, not a kernel's fault.")
    return Fault(source="kernel-log", kind="gpu-fallen-off-bus", gpu=e.pci, time=e.stamp.raw if e.stamp else None,
                 detail={"device": e.pci, "pci_id": pci_id, "text": e.text} if pci_id else
                 {"device": e.pci, "text": e.text}, meaning=meaning, origin=e.origin)


def event_faults(kernel: KernelLog) -> list[Fault]:
    out: list[Fault] = []
    seen: set[tuple] = set()
    for e in kernel.events:
        # (the IOMMU logs one event per blocked request: the same page of one device, once)
        key = tuple(e.fields.get(k) for k in ("device", "domain", "address", "flags"))
        if e.kind == "iommu" and key not in seen and (f := _iommu_fault(e)) is not None:
            seen.add(key)
            out.append(f)
        elif e.kind == "gpu-fallen-off-bus":
            out.append(_lost_fault(e))
    return out
