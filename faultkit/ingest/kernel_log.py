"""Parser for the kernel log: amdgpu/amdkfd VM faults, hangs, resets, MES/KFD, and NVIDIA Xid.

Formats follow ../shared/reference/kernel_log.md. A captured line is
`[timestamp layer] [device prefix] message`; both outer layers are stripped, then the
message is matched. Fault reports span several lines that are not always contiguous, so
open reports are keyed by device.
"""

from __future__ import annotations

import calendar
from .. import lazy_re as re   # compiled at first use: start-up (issue #35)
from dataclasses import dataclass

from ..codes import (GPU_RESET_SOURCES, MES_OPCODES, SOC15_IH_CLIENTS, SOC21_IH_CLIENTS, decode_status,
                     utcl2_client_name)
from ..model import KernelEvent, KernelLog, Origin, Problem, Stamp, VMFault, Xid
from .prefilter import KERNEL, anchored, continuation, words
from .text import cut_problem, decode, numbered_lines

# The task line of a fault follows its header (or, on 6.17+, a ring timeout): read as context of
# those lines; excerpt marks close every open block.
words(KERNEL, "---", "[...]", "[\u2026]", "snip", "truncated", "cut]", "cut>", ignore_case=True)

# ---- timestamp layer ----
TS_MONO = re.compile(r"^\[\s*(?P<mono>\d+\.\d+)\]\s?")
continuation(KERNEL, TS_MONO)
TS_T = re.compile(r"^\[(?P<wall>\S+ +\S+ +\d{1,2} \d\d:\d\d:\d\d \d{4})\]\s?")
continuation(KERNEL, TS_T)
TS_H_ABS = re.compile(r"^\[(?P<abs>[^\W\d_]{2,5}\.?\s?\d{1,2} \d\d:\d\d)\]\s?")
continuation(KERNEL, TS_H_ABS)
TS_H_REL = re.compile(r"^\[\s*\+(?P<rel>\d+[.,]\d+)\]\s?")
continuation(KERNEL, TS_H_REL)
TS_JOURNAL = re.compile(r"^(?P<mon>[^\W\d_]{2,5}\.?) +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d(?:\.\d{1,9})?) (?P<host>\S*) ?(?P<ident>[\w.-]+)(?:\[\d+\])?: ")
continuation(KERNEL, TS_JOURNAL)
TS_ISO = re.compile(r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?) (?P<host>\S+) (?P<ident>[\w.-]+)(?:\[\d+\])?: ")
continuation(KERNEL, TS_ISO)
TS_HMS = re.compile(r"^(?P<hms>\d\d:\d\d:\d\d) ")
continuation(KERNEL, TS_HMS)

# ---- device prefix layer ----
DEV_PREFIX = re.compile(
    r"^(?:amdgpu (?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): (?:amdgpu: )?|drmn(?P<drmn>\d+): |"
    r"kfd kfd: amdgpu: |amdgpu: |kfd: |amdkfd: |\[drm:(?P<fn>[\w.]+) \[amdgpu\]\] \*ERROR\* |"
    r"\[drm ERROR :(?P<fn2>[\w.]+)\] )")
continuation(KERNEL, DEV_PREFIX)
RAS_ID = re.compile(r"^\{\d+\}")
continuation(KERNEL, RAS_ID)

# ---- VM fault blocks (regexes from kernel_log.md §3.6, loosened for whitespace) ----
HDR = re.compile(r"^\[(?P<hub>gfxhub0?|mmhub[01]?)\] (?:(?P<retry>retry|no-retry) )?(?P<vmc>VMC )?page fault "
                 r"\(src_id:(?P<src_id>\d+) ring:(?P<ring>\d+) (?:vmid|vm_id):(?P<vmid>\d+) (?:pasid|pas_id):(?P<pasid>\d+)"
                 r"(?:, for process (?P<proc>.*?) pid (?P<tgid>\d+) thread (?P<thread>.*?) pid (?P<tid>\d+))?\)\s*$")
anchored(KERNEL, HDR, 'page fault (src_id:', after=12)
TASK = re.compile(r"^\s*(?P<form>for process|in process|Process(?! information:)) (?P<proc>.*?) pid (?P<tgid>\d+) "
                  r"thread (?P<thread>.*?) pid (?P<tid>\d+)\)?\s*$")
continuation(KERNEL, TASK)
ADDR = re.compile(r"^\s*(?:at page|in page starting at address) 0x(?P<addr>[0-9a-fA-F]+) from (?P<ih>IH )?(?:client )?"
                  r"(?:0x(?P<client_hex>[0-9a-fA-F]+)|(?P<client_dec>\d+))(?: \((?P<client_name>[^)]*)\))?\s*$")
anchored(KERNEL, ADDR, 'at page 0x', 'page starting at address 0x')
COOKIE = re.compile(r"^\s*cookie node_id (?P<node>\d+) fault from die (?P<die>\S+)\s*$")
continuation(KERNEL, COOKIE)
STATUS = re.compile(r"^\s*(?P<reg>VM|GCVM|MMVM)_L2_PROTECTION_FAULT_STATUS(?P<lo32>_LO32)?:0x(?P<status>[0-9A-Fa-f]{8})\s*$")
anchored(KERNEL, STATUS, '_L2_PROTECTION_FAULT_STATUS')
CID = re.compile(r"^\s*Faulty UTCL2 client ID: (?:(?P<name>.*?) \((?P<cid>0x[0-9a-fA-F]+)\)|(?P<cid_only>0x[0-9a-fA-F]+))\s*$")
anchored(KERNEL, CID, 'Faulty UTCL2 client ID: ')
FIELD = re.compile(r"^\s*(?P<field>MORE_FAULTS|WALKER_ERROR|PERMISSION_FAULTS|MAPPING_ERROR|RW): 0x(?P<val>[0-9a-fA-F]+)\s*$")
anchored(KERNEL, FIELD, 'MORE_FAULTS: ', 'WALKER_ERROR: ', 'PERMISSION_FAULTS: ', 'MAPPING_ERROR: ', 'RW: ')
V8_HDR = re.compile(r"^GPU fault detected: (?P<src_id>\d+) 0x(?P<data>[0-9a-f]{8})(?: for process (?P<proc>.*?) pid "
                    r"(?P<tgid>\d+) thread (?P<thread>.*?) pid (?P<tid>\d+))?\s*$")
anchored(KERNEL, V8_HDR, 'GPU fault detected: ', after=12)
V8_REG = re.compile(r"^\s*VM_CONTEXT1_PROTECTION_FAULT_(?P<reg>ADDR|STATUS)\s+0x(?P<val>[0-9A-Fa-f]{8})\s*$")
anchored(KERNEL, V8_REG, 'VM_CONTEXT1_PROTECTION_FAULT_')
V8_DEC = re.compile(r"^VM fault \(0x(?P<prot>[0-9a-f]{2}), vmid (?P<vmid>\d+), pasid (?P<pasid>\d+)\) at page (?P<page>\d+), "
                    r"(?P<rw>read|write) from '(?P<mc>[^']*)' \(0x(?P<mcraw>[0-9a-f]{8})\) \((?P<mcid>\d+)\)\s*$")
anchored(KERNEL, V8_DEC, 'VM fault (0x')
SUPPRESSED = re.compile(r"(?<![\w.])(?P<fn>[\w.]+): (?P<n>\d+) callbacks suppressed")
anchored(KERNEL, SUPPRESSED, 'callbacks suppressed')

# ---- other messages ----
RING_TIMEOUT = re.compile(r"ring (?P<ring>\S+) timeout, (?:(?P<soft>but soft recovered)|signaled seq=(?P<sig>\d+), emitted seq=(?P<emit>\d+))")
anchored(KERNEL, RING_TIMEOUT, ' timeout, ')
PROC_INFO = re.compile(r"Process information: process (?P<proc>.*?) pid (?P<tgid>\d+) thread (?P<thread>.*?) pid (?P<tid>\d+)\s*$")
anchored(KERNEL, PROC_INFO, 'Process information: process ')
RESET_BEGIN = re.compile(r"GPU reset begin!(?:\.? ?Source:\s+(?P<src>\d+))?")
anchored(KERNEL, RESET_BEGIN, 'GPU reset begin!')
RESET_METHOD = re.compile(r"^(?P<m>MODE1 reset|MODE2 reset|BACO reset|GPU mode1 reset|GPU smu mode1 reset|GPU psp mode1 reset|"
                          r"GPU pci config reset|soft reset failed, will fallback to full reset!)")
anchored(KERNEL, RESET_METHOD, 'MODE1 reset', 'MODE2 reset', 'BACO reset', 'mode1 reset', 'GPU pci config reset', 'soft reset failed')
RESET_RESULT = re.compile(r"(?P<r>GPU reset succeeded, trying to resume|GPU reset\((?P<n>\d+)\) (?P<ok>succeeded|failed)!?|"
                          r"GPU reset end with ret = (?P<ret>-?\d+)|GPU Recovery Failed: (?P<rf>-?\d+)|"
                          r"Guilty job already signaled, skipping HW reset|device wedged, but (?:recovered through reset|no recovery needed)|"
                          r"GPU recovery disabled\.)")
anchored(KERNEL, RESET_RESULT, 'GPU reset succeeded', 'GPU reset(', 'GPU reset end with ret', 'GPU Recovery Failed', 'Guilty job already signaled', 'device wedged, but', 'GPU recovery disabled')
RING_RESET = re.compile(r"(?:Starting (?P<start>\S+) ring reset|Ring (?P<ring>\S+) reset (?P<ok>succeeded|failed)|"
                        r"reset (?:compute|gfx) queue \((?P<q>[\d:]+)\))")
anchored(KERNEL, RING_RESET, ' ring reset', ' reset succeeded', ' reset failed', 'reset compute queue (', 'reset gfx queue (')
VRAM_LOST = re.compile(r"VRAM is lost")
anchored(KERNEL, VRAM_LOST, 'VRAM is lost')
MES = re.compile(r"MES(?:\((?P<pipe>\d)\))? failed to respon(?:d to|se) msg=(?P<msg>\w+)(?: \((?P<sub>\w+)\))?|"
                 r"MES is busy|MES ring buffer is full|failed to (?:unmap|reset) legacy queue|failed to suspend all gangs|"
                 r"failed to (?:remove|add) hardware queue (?:from|to) MES, doorbell=0x[0-9a-f]+|"
                 r"MES might be in unrecoverable state")
anchored(KERNEL, MES, 'MES', 'legacy queue', 'failed to suspend all gangs')
KFD = re.compile(r"(qcm fence wait loop timeout expired|The cp might be in an unrecoverable state due to an unsuccessful queues preemption|"
                 r"Unmapping queues failed|HIQ MQD's queue_doorbell_id0 is not 0, Queue preemption time out|"
                 r"(?:XCC \d+: )?Queue preemption failed for queue with doorbell_id: [0-9a-f]+|Failed to evict process queues|"
                 r"Failed to restore process queues|Failed to quiesce KFD|Failed to resume KFD|Failed to evict queue \d+|"
                 r"Failed to restore queue \d+|Suspending all queues failed|Failed to remove queue \d+ for dev \d+|"
                 r"Failed to suspend process (?:pid )?(?:0x)?[0-9a-f]+|Failed to restore queues of (?:pasid|process pid) (?:0x)?[0-9a-f]+|"
                 r"Restore process pid \d+ failed during resume|Pasid 0x[0-9a-f]+ destroy queue \d+ failed, ret -?\d+|"
                 r"Freeing queue vital buffer 0x[0-9a-f]+, queue evicted|(?:Started |Finished )?(?:[Ee]victing|restoring) (?:PASID|pasid) (?:0x)?[0-9a-f]+(?: queues)?|"
                 r"timeout waiting for kiq fence|Fence fallback timer expired on ring \S+)")
anchored(KERNEL, KFD, 'qcm fence wait loop timeout', 'The cp might be in an unrecoverable state', 'Unmapping queues failed', 'HIQ MQD', 'Queue preemption failed', 'Failed to evict', 'Failed to restore', 'Failed to quiesce KFD', 'Failed to resume KFD', 'Suspending all queues failed', 'Failed to remove queue', 'Failed to suspend process', 'Restore process pid', ' destroy queue ', 'Freeing queue vital buffer', 'victing ', 'restoring ', 'timeout waiting for kiq fence', 'Fence fallback timer expired')
SQ_INTR = re.compile(r"sq_intr: error, (?P<rest>.*)$")
anchored(KERNEL, SQ_INTR, 'sq_intr: error, ')
RAS = re.compile(r"(uncorrectable hardware error\([^)]*\) detected!|\[Hardware Error\]: .*|poison is consumed by client \d+.*|"
                 # amdgpu_ras.c:1074/1086 (drm-kmod 129bf0f): "%lld new uncorrectable hardware errors detected in %s block"
                 r"(?<!\d)\d+ (?:new )?(?:un)?correctable hardware errors detected.*)")
anchored(KERNEL, RAS, 'uncorrectable hardware error(', '[Hardware Error]: ', 'poison is consumed by client ', 'correctable hardware errors detected')
# drivers/iommu/amd/iommu.c (amd_iommu_report_page_fault): pci_err(pdev, "Event logged [IO_PAGE_FAULT
# domain=0x%04x address=0x%llx flags=0x%04x]") where the device is known (its driver's prefix before
# `AMD-Vi: `, the file's pr_fmt), else pr_err_ratelimited("... [IO_PAGE_FAULT device=%04x:%02x:%02x.%x domain=..")
# (before Linux 6.1 `device=%02x:%02x.%x`); 6.10+ add ` vflags=%#x`; dev_err(iommu dev) prints `iommu ivhd0: `.
IOMMU = re.compile(r"(?:(?P<drv>[\w-]+) (?P<dev>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]|ivhd\d+): )?"
                   r"AMD-Vi: Event logged \[(?P<what>\w+)(?P<rest>[^\]]*)\]")
anchored(KERNEL, IOMMU, 'AMD-Vi: Event logged [')
IOMMU_FIELD = re.compile(r"(?P<k>device|domain|address|flags|vflags|pasid)=(?P<v>[0-9a-fA-Fx:.]+)")
continuation(KERNEL, IOMMU_FIELD)       # read inside an IOMMU record's brackets, never alone
DEVICE_ID = re.compile(r"(?:IP DISCOVERY 0x1002:0x(?P<did>[0-9A-Fa-f]{4})|Topology: Add dGPU node \[0x(?P<did2>[0-9a-f]{4}):0x1002\]|"
                       r"added device 1002:(?P<did3>[0-9a-f]{4})|detected ip block number \d+ <(?P<ip>\w+)>)")
anchored(KERNEL, DEVICE_ID, 'IP DISCOVERY 0x1002:0x', 'Topology: Add dGPU node [0x', 'added device 1002:', 'detected ip block number ')
USER_SEGFAULT = re.compile(r"(?<!\S)(?P<comm>\S+)\[(?P<pid>\d+)\]: segfault at (?P<addr>[0-9a-f]+) ip (?P<ip>[0-9a-f]+) "
                           r"sp [0-9a-f]+ error (?P<err>\d+)(?: in (?P<lib>\S+?)\[)?")
anchored(KERNEL, USER_SEGFAULT, ']: segfault at ')
CORE_PIPE = re.compile(r"Pid (?P<pid>\d+)\((?P<comm>[^)]*)\) over core_pipe_limit")
anchored(KERNEL, CORE_PIPE, ') over core_pipe_limit')
DEVCOREDUMP = re.compile(r"AMDGPU device coredump file has been created|Dumping IP State(?: Completed)?")
anchored(KERNEL, DEVCOREDUMP, 'AMDGPU device coredump file has been created', 'Dumping IP State')

# ---- NVIDIA ----
# kernel_rc.c:385-410 (open-gpu-kernel-modules 595.45.04): "NVRM: Xid (PCI:%04x:%02x:%02x[ GPU-I:%02u[ GPU-CI:%02u]]): %d, "
# then "pid=%s, name=%s, " when a process is known, the message and " caused by previous Xid %d".
XID = re.compile(r"NVRM: Xid \((?P<pci>PCI:[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.\d)?)(?: GPU-I:(?P<gi>\d+)"
                 r"(?: GPU-CI:(?P<ci>\d+))?)?\): (?P<xid>\d+),? (?P<rest>.*?)\s*$")
# The MMU fault itself; pid, name and channel come before it in several spellings (`channel 0x..`,
# older `Ch 000000..`, none at all in a shortened title).
anchored(KERNEL, XID, 'NVRM: Xid (')
X31 = re.compile(r"MMU Fault: ENGINE (?P<engine>\S+) (?P<gpc>GPC\d+ )?(?P<client>\S+) faulted @ 0x(?P<va>[0-9a-f_]+)\. "
                 r"Fault is of type (?P<ftype>\S+) (?P<access>\S+)$")
# GSP-RM prints a Warp Exception line, then a Global one for the same SM (`Multiple Warp Errors`)
X13 = re.compile(r"Graphics SM (?P<scope>Warp|Global) Exception on \(GPC (?P<gpc>\d+), TPC (?P<tpc>\d+), "
                 r"SM (?P<sm>\d+)\): (?P<exc>.+)$")
# Xid 109 and other RC errors: `errorString CTX SWITCH TIMEOUT, Info 0x58005`
XERRSTR = re.compile(r"errorString (?P<err>[^,]+?)(?:, Info 0x[0-9a-f]+)?$")
continuation(KERNEL, XERRSTR)
continuation(KERNEL, X31)
continuation(KERNEL, X13)
XPID = re.compile(r"pid=(?P<pid>\d+), name=(?P<name>.*?), channel 0x(?P<ch>[0-9a-f]+)")
# Some drivers print the process name without its pid (`13, name=llama-server, Graphics Exception: ...`).
continuation(KERNEL, XPID)
XNAME = re.compile(r"(?:^|, )(?:pid=(?P<pid>\d+), )?name=(?P<name>[^,]+)")
continuation(KERNEL, XNAME)
XCHANNEL = re.compile(r"\b(?:[Cc]hannel|Ch) (?:0x)?(?P<ch>[0-9a-f]{2,8})\b")
continuation(KERNEL, XCHANNEL)
XCAUSE = re.compile(r"caused by previous Xid (?P<xid>\d+)")
# A pid without a name (Xid 94/95 print `pid=%s, Contained: ...`).
XPID_ONLY = re.compile(r"(?:^|, )pid=(?P<pid>\d+),")
# Xid 94/95, kern_gpu_error_cont_ga100.c:334-340: "Contained: CE User Channel (0x9). RST: No, D-RST: No"
continuation(KERNEL, XPID_ONLY)
XCONTAINED = re.compile(r"(?P<what>(?:Un)?[Cc]ontained: (?P<unit>[^()]+?) \((?P<loc>[^)]*)\))\. RST: (?P<rst>Yes|No)")
# the RM's own MMU fault report (NV_PRINTF, not an Xid line): kern_gmmu_gv100.c:559-560
continuation(KERNEL, XCONTAINED)
RM_MMU_FAULT = re.compile(r"MMU Fault: ENGINE 0x[0-9a-f]+ \((?P<engine>\S+) (?P<client>[^)]+?)\) faulted @ "
                          r"0x(?P<va>[0-9a-f_]+)\. Fault is of type 0x[0-9a-f]+ \((?P<ftype>[^)]*)\)\. "
                          r"Access type is 0x[0-9a-f]+ \((?P<access>[^)]*)\)")
# Xid of an NVLink FLA fault, kern_gmmu_ga100.c:387-389
anchored(KERNEL, RM_MMU_FAULT, 'MMU Fault: ENGINE 0x')
FLA_FAULT = re.compile(r"NVLink remote translation error: faulted @ 0x(?P<va>[0-9a-f_]+)\. Fault is of type "
                       r"(?P<ftype>\S+) (?P<access>\S+)")
# Xid 119/120, kernel_gsp.c:2385-2386: the GSP firmware did not answer an RPC
continuation(KERNEL, FLA_FAULT)
GSP_TIMEOUT = re.compile(r"Timeout after (?P<s>\d+)s of waiting for RPC response from GPU(?P<gpu>\d+) GSP! Expected "
                         r"function (?P<fn>\d+) \((?P<name>[^)]*)\)")
continuation(KERNEL, GSP_TIMEOUT)
continuation(KERNEL, XCAUSE)
# nv.c (open-gpu-kernel-modules, RmInitAdapter's check of PMC_BOOT_0): one printk of three lines, "NVRM: The
# NVIDIA GPU %04x:%02x:%02x.%x\nNVRM: (PCI ID: %04x:%04x) installed in this system has\nNVRM: fallen off the
# bus and is not responding to commands.\n" (dmesg indents the 2nd and 3rd under the stamp); older drivers
# put the PCI ID on the first line and wrap after "in this", or print it on one line. No Xid number is printed.
GPU_LOST_HEAD = re.compile(r"NVRM: The NVIDIA GPU (?P<pci>[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\b")
anchored(KERNEL, GPU_LOST_HEAD, 'NVRM: The NVIDIA GPU ')
GPU_LOST_ID = re.compile(r"\(PCI ID: (?P<id>[0-9a-f]{4}:[0-9a-f]{4})\)")
continuation(KERNEL, GPU_LOST_ID)
GPU_LOST_END = re.compile(r"fallen off the bus")
continuation(KERNEL, GPU_LOST_END)
GPU_LOST_MID = re.compile(r"installed in this")
continuation(KERNEL, GPU_LOST_MID)
GPU_LOST_LINES = 3        # the record's lines

MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}


@dataclass
class _Parsed:
    """One kernel log line split into its stamp and message before the records are built."""
    no: int
    raw: str
    stamp: Stamp | None
    message: str | None       # None: not a kernel line (another journal identity)
    pci: str | None = None
    fn: str | None = None


def _stamp_of(text: str, state: dict) -> tuple[Stamp | None, str, bool]:
    """Strip the timestamp layer. Returns (stamp, rest, is_kernel_line)."""
    m = TS_MONO.match(text)
    if m:
        return Stamp(m.group(0).strip(), "monotonic", float(m.group("mono"))), text[m.end():], True
    m = TS_T.match(text)
    if m:
        state.setdefault("style", "dmesg -T")
        return Stamp(m.group("wall"), "wall", wall=_wall_from_t(m.group("wall"))), text[m.end():], True
    m = TS_H_REL.match(text)
    if m:
        state["rel"] = state.get("rel", 0.0) + float(m.group("rel").replace(",", "."))
        base = state.get("abs")
        s = Stamp(m.group(0).strip(), "relative", seconds=state["rel"],
                  wall=base, wall_note=f"+{state['rel']:.6f}s after {base}" if base else None)
        return s, text[m.end():], True
    m = TS_H_ABS.match(text)
    if m and not text.startswith("[drm"):
        state["abs"], state["rel"] = m.group("abs"), 0.0
        state.setdefault("style", "dmesg -H")
        return Stamp(m.group("abs"), "wall", wall_note="dmesg -H: minute resolution, no year"), text[m.end():], True
    m = TS_ISO.match(text)
    if m:
        state.setdefault("style", "iso8601 syslog")
        rest = text[m.end():]
        stamp = Stamp(m.group("iso"), "wall", wall=m.group("iso"))
        return _printk_inside(stamp, rest), TS_MONO.sub("", rest, count=1), m.group("ident") == "kernel"
    m = TS_JOURNAL.match(text)
    if m and m.group("mon").lower().rstrip(".") not in ("amdgpu",):
        state.setdefault("style", "journalctl/syslog")
        mon = MONTHS.get(m.group("mon").lower()[:3])
        wall = None
        if mon:
            wall = f"{mon:02d}-{int(m.group('day')):02d}T{m.group('hms')}"
        raw = f"{m.group('mon')} {m.group('day')} {m.group('hms')}"
        stamp = Stamp(raw, "wall", wall=wall, wall_note="journal stamp without a year"
                      + ("" if mon else " (month name in a locale faultkit does not map)"))
        rest = text[m.end():]
        return _printk_inside(stamp, rest), TS_MONO.sub("", rest, count=1), m.group("ident") == "kernel"
    m = TS_HMS.match(text)
    if m:
        state.setdefault("style", "time of day only")
        return Stamp(m.group("hms"), "wall", wall_note="time of day only"), text[m.end():], True
    return None, text, True


def _printk_inside(stamp: Stamp, rest: str) -> Stamp:
    m = TS_MONO.match(rest)
    if m:
        stamp.seconds = float(m.group("mono"))
    return stamp


def _wall_from_t(text: str) -> str | None:
    parts = text.split()
    try:
        mon = MONTHS[parts[1].lower()[:3]]
        return f"{parts[4]}-{mon:02d}-{int(parts[2]):02d}T{parts[3]}"
    except (KeyError, IndexError, ValueError):
        return None


def _order_key(stamp: Stamp | None):
    if stamp is None:
        return None
    if stamp.clock == "monotonic":
        return stamp.seconds
    if stamp.clock == "wall" and stamp.wall:
        return stamp.wall
    return None


def _looks_reversed(parsed: list[_Parsed]) -> bool:
    keys = [k for k in (_order_key(p.stamp) for p in parsed) if k is not None]
    ups = downs = 0
    for a, b in zip(keys, keys[1:]):
        if type(a) is not type(b):
            continue
        if b > a:
            ups += 1
        elif b < a:
            downs += 1
    if downs > 0 and downs > ups:
        return True
    if downs == 0 and ups == 0:
        return _structure_reversed(parsed)
    return False


def _structure_reversed(parsed: list[_Parsed]) -> bool:
    """With equal stamps only the block structure tells: forward logs print the header
    before the address line, `journalctl -r` prints it after."""
    msgs = [DEV_PREFIX.sub("", p.message or "", count=1) for p in parsed]
    forward = backward = 0
    for i, msg in enumerate(msgs):
        if not HDR.match(msg):
            continue
        if i + 1 < len(msgs) and (ADDR.match(msgs[i + 1]) or TASK.match(msgs[i + 1])):
            forward += 1
        if i > 0 and (ADDR.match(msgs[i - 1]) or TASK.match(msgs[i - 1])):
            backward += 1
    return backward > forward


def parse_kernel_log(data: bytes | str, name: str = "<kernel log>") -> KernelLog:
    """Parse dmesg / journalctl -k / syslog text. Never raises on bad input."""
    if isinstance(data, bytes):
        text, problems = decode(data, name)
    else:
        text, problems = data, []
    out = KernelLog(problems=list(problems))
    state: dict = {}
    segments: list[list[_Parsed]] = [[]]
    for line in numbered_lines(text):
        if line.boundary:
            segments.append([])
            continue
        if line.cut:
            out.problems.append(cut_problem(name, line))
        try:
            stamp, rest, is_kernel = _stamp_of(line.text, state)
        except Exception as exc:  # defensive: a stamp we mis-read must not lose the line
            out.problems.append(Problem(name, f"unreadable timestamp ({exc!r})", line.no, internal=True))
            stamp, rest, is_kernel = None, line.text, True
        if stamp is not None and stamp.clock == "monotonic":
            state.setdefault("style", "dmesg")
        segments[-1].append(_Parsed(line.no, line.text, stamp, rest if is_kernel else None))
    out.timestamp_style = state.get("style", "none")
    for seg in segments:
        if _looks_reversed(seg):
            seg.reverse()
            out.reversed_input = True
        _Blocks(name, out).run(seg)
    if out.reversed_input:
        out.problems.append(Problem(name, "timestamps run backwards (journalctl -r?); lines were read in reverse"))
    return out


def _iommu_fields(m: re.Match, pci: str | None) -> dict:
    """An AMD-Vi event's fields: the device (its driver's prefix, or the `device=` field where the
    IOMMU knew no driver for it), the I/O virtual address, domain and flags (flags 0x20: a write)."""
    got = {f["k"]: f["v"] for f in IOMMU_FIELD.finditer(m.group("rest"))}
    dev = got.get("device") or (m.group("dev") if m.group("dev") and not m.group("dev").startswith("ivhd") else None) or pci
    if dev and dev.count(":") == 1:
        dev = "0000:" + dev          # before Linux 6.1 the segment was not printed
    fields: dict = {"event": m.group("what"), "device": dev,
                    "driver": "amdgpu" if pci and not m.group("drv") else m.group("drv")}
    for k in ("domain", "address", "flags", "pasid"):
        if k in got:
            try:
                fields[k] = int(got[k], 16)
            except ValueError:
                pass
    if "flags" in fields:
        fields["write"] = bool(fields["flags"] & 0x20)      # EVENT_FLAG_RW
    return fields


class _Blocks:
    """Assembles fault blocks and events from stripped lines of one excerpt."""

    def __init__(self, name: str, out: KernelLog):
        self.name = name
        self.out = out
        self.open: dict[str, VMFault] = {}        # device key -> fault being assembled
        self.last_timeout: dict[str, KernelEvent] = {}
        self.generation_hint: dict[str, str] = {}
        self.lost: KernelEvent | None = None      # an open `The NVIDIA GPU ... fallen off the bus` record

    def run(self, lines: list[_Parsed]) -> None:
        for p in lines:
            if p.message is None:
                continue
            try:
                self.line(p)
            except Exception as exc:
                self.out.problems.append(Problem(self.name, f"internal parser error ({exc!r}); line skipped", p.no,
                                                 internal=True))
        for key in list(self.open):
            self.close(key)

    def line(self, p: _Parsed) -> None:
        msg = p.message
        m = DEV_PREFIX.match(msg)
        pci = None
        fn = None
        if m:
            pci = m.group("pci") or (f"drmn{m.group('drmn')}" if m.group("drmn") else None)
            fn = m.group("fn") or m.group("fn2")
            msg = msg[m.end():]
            m2 = DEV_PREFIX.match(msg)  # 'amdgpu 0000:..: amdgpu: [drm:...' doubles
            if m2 and m2.group(0).startswith("[drm"):
                fn = m2.group("fn") or m2.group("fn2")
                msg = msg[m2.end():]
        msg = RAS_ID.sub("", msg)
        key = pci or "?"
        org = Origin(self.name, p.no)

        x = XID.search(msg)
        if x:
            self.xid(x, p, org)
            return
        if self.gpu_lost(msg, p, org):
            return
        if self.fault_line(msg, key, pci, p, org, fn):
            return
        self.event(msg, key, pci, p, org, fn)

    def gpu_lost(self, msg: str, p: _Parsed, org: Origin) -> bool:
        """The NVIDIA driver's `The NVIDIA GPU <pci> ... has fallen off the bus` record, on one line or
        three: an event of kind gpu-fallen-off-bus once its end is read."""
        head = GPU_LOST_HEAD.search(msg)
        if head is not None:
            self.lost = KernelEvent(org, "gpu-fallen-off-bus", msg.strip(), p.stamp, head["pci"],
                                    {"device": head["pci"], "lines": 1})
        elif self.lost is None:
            return False
        elif not (GPU_LOST_ID.search(msg) or GPU_LOST_END.search(msg) or GPU_LOST_MID.search(msg)):
            self.lost = None          # another message: the record ended without its last line
            return False
        ev = self.lost
        if head is None:
            ev.text += " " + msg.strip()
            ev.fields["lines"] += 1
        if (m := GPU_LOST_ID.search(msg)):
            ev.fields["pci_id"] = m["id"]
        if GPU_LOST_END.search(msg):
            del ev.fields["lines"]
            self.out.events.append(ev)
            self.lost = None
        elif ev.fields["lines"] >= GPU_LOST_LINES:
            self.lost = None          # no end within the record's lines: another message
        return True

    # ---------- fault blocks ----------
    def start(self, key: str, fault: VMFault) -> VMFault:
        self.close(key)
        self.open[key] = fault
        return fault

    def close(self, key: str) -> None:
        f = self.open.pop(key, None)
        if f is None:
            return
        self.finish(f)
        self.out.faults.append(f)

    def finish(self, f: VMFault) -> None:
        if f.generation is None:
            f.generation = self.generation_hint.get(f.pci or "?")
        if f.status is not None:
            d = decode_status(f.status, f.generation, f.hub)
            f.secondary = f.status == 0
            f.client_id = d["cid"] if f.client_id is None else f.client_id
            for k in ("rw", "permission_faults", "walker_error", "mapping_error", "more_faults"):
                if getattr(f, k) is None:
                    setattr(f, k, d[k])
            if f.secondary:
                # An all-zero status belongs to a fault latched behind an earlier one; its printed
                # client (CB, CB/DB, MP0, unknown) is an artefact, not the faulting block.
                f.client_name = None
            elif f.client_name is None:
                f.client_name = utcl2_client_name(f.client_id, f.generation, f.hub, f.rw or 0, f.die)
        if f.ih_client is not None and f.ih_client_name is None:
            table = SOC21_IH_CLIENTS if f.generation in ("gfx11", "gfx12", "gc12.1") else SOC15_IH_CLIENTS
            f.ih_client_name = table.get(f.ih_client)

    def fault_line(self, msg: str, key: str, pci, p: _Parsed, org: Origin, fn) -> bool:
        """One line of a VM fault block; each kind of line has its handler (in the order tried)."""
        for rx, handler in FAULT_LINES:
            m = rx.match(msg)
            if m and handler(self, m, key, pci, p, org):
                return True
        m = SUPPRESSED.search(msg)
        if m:
            gen = re.match(r"gmc_v(\d+)_", m.group("fn"))
            if gen:
                self.generation_hint[key] = f"gfx{gen.group(1)}"
            self.out.events.append(KernelEvent(org, "callbacks-suppressed", msg.strip(), p.stamp, pci,
                                               {"function": m.group("fn"), "count": int(m.group("n"))}))
            return True
        return False

    def _header(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self.start(key, VMFault(origin=org, stamp=p.stamp, pci=pci, hub=m.group("hub"),
                                    retry=(m.group("retry") == "retry") if m.group("retry") else None,
                                    src_id=int(m.group("src_id")), ring=int(m.group("ring")),
                                    vmid=int(m.group("vmid")), pasid=int(m.group("pasid"))))
        if m.group("tgid"):
            f.process, f.pid, f.thread, f.tid = m.group("proc"), int(m.group("tgid")), m.group("thread"), int(m.group("tid"))
            f.format_hint = "task inline (Linux <= 6.9)"
        if m.group("vmc"):
            f.generation, f.format_hint = "gfx9", "gmc_v9, Linux 4.13-4.16"
        elif m.group("hub") in ("gfxhub0", "mmhub0", "mmhub1"):
            f.generation = "gfx9"
        f.lines.append(p.raw)
        return True

    def _v8_header(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self.start(key, VMFault(origin=org, stamp=p.stamp, pci=pci, src_id=int(m.group("src_id")),
                                    generation="gfx8", format_hint="gmc_v8"))
        if m.group("tgid"):
            f.process, f.pid, f.thread, f.tid = m.group("proc"), int(m.group("tgid")), m.group("thread"), int(m.group("tid"))
        f.lines.append(p.raw)
        return True

    def _task(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        """The task line follows a fault header or, on 6.17+, a ring timeout of the same device."""
        f = self.open.get(key)
        target = f if f is not None and f.pid is None else None
        if target is None and key in self.last_timeout and self.last_timeout[key].fields.get("pid") is None:
            self.last_timeout[key].fields.update(process=m.group("proc"), pid=int(m.group("tgid")),
                                                 thread=m.group("thread"), tid=int(m.group("tid")))
            return True
        if target is None:
            return False
        target.process, target.pid = m.group("proc"), int(m.group("tgid"))
        target.thread, target.tid = m.group("thread"), int(m.group("tid"))
        target.format_hint = {"for process": "task on its own line (Linux ~6.10-6.16)",
                              "in process": "task on its own line (Linux ~6.10-6.16)",
                              "Process": "' Process' task line (Linux >= ~6.17)"}[m.group("form")]
        target.lines.append(p.raw)
        return True

    def _block_for(self, key: str, p: _Parsed, org: Origin, pci, filled: str, problem: str) -> VMFault:
        """The open block, or a new one where this line has no header before it or its field is
        already filled (a cut excerpt): the line is kept, and the cut said."""
        f = self.open.get(key)
        if f is None or getattr(f, filled) is not None:
            f = self.start(key, VMFault(origin=org, stamp=p.stamp, pci=pci))
            self.out.problems.append(Problem(self.name, problem, p.no))
        return f

    def _address(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self._block_for(key, p, org, pci, "address", "fault address without its header line (cut excerpt)")
        f.address = int(m.group("addr"), 16)
        if m.group("client_hex") is not None:
            f.ih_client = int(m.group("client_hex"), 16)
            if f.generation is None and f.hub in ("gfxhub", "mmhub"):
                f.generation = "gfx10"
        elif m.group("client_dec") is not None:
            f.ih_client = int(m.group("client_dec"))
            if f.generation is None and f.hub in ("gfxhub", "mmhub"):
                f.generation = "gfx11"  # gmc_v11/v12 print the IH client in decimal
        f.ih_client_name = m.group("client_name")
        f.lines.append(p.raw)
        return True

    def _cookie(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self.open.get(key)
        if f is None:
            return False
        f.die = m.group("die")
        f.lines.append(p.raw)
        return True

    def _status(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self._block_for(key, p, org, pci, "status", "status lines without their fault header (cut excerpt)")
        f.status = int(m.group("status"), 16)
        f.status_register = m.group(0).split(":")[0].strip()
        reg = m.group("reg")
        if m.group("lo32") and f.hub in ("gfxhub0", "mmhub0"):
            f.generation = "gc12.1"      # gmc_v12_1 names hubs like gmc_v9, which never prints _LO32
        elif m.group("lo32"):
            f.generation = "gfx12"       # only gmc_v12 prints _LO32 (its decimal client looked like gmc_v11)
        elif f.generation is None or (reg != "VM" and f.generation == "gfx9"):
            f.generation = "gfx9" if reg == "VM" else f.generation or None
        if f.hub is None:
            f.hub = "mmhub" if reg == "MMVM" else ("gfxhub" if reg == "GCVM" else None)
        f.lines.append(p.raw)
        return True

    def _client_id(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self.open.get(key)
        if f is None:
            return self.orphan(p)
        if m.group("cid"):
            f.client_id = int(m.group("cid"), 16)
            f.client_name = m.group("name")
            if f.generation is None and f.client_name == "CB/DB":
                f.generation = "gfx10"
        else:
            f.client_id = int(m.group("cid_only"), 16)
            f.format_hint = f.format_hint or "client id without name (Linux ~5.8/5.9)"
        f.lines.append(p.raw)
        return True

    def _field(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self.open.get(key)
        if f is None:
            return self.orphan(p)
        attr = m.group("field").lower()
        setattr(f, "rw" if attr == "rw" else attr, int(m.group("val"), 16))
        f.lines.append(p.raw)
        return True

    def orphan(self, p: _Parsed) -> bool:
        """Status sub-lines whose header was cut off: nothing to attach them to."""
        if not self.out.problems or "orphaned status" not in self.out.problems[-1].message:
            self.out.problems.append(Problem(self.name, "orphaned status lines before the first fault header "
                                                        "(cut excerpt); ignored", p.no))
        return True

    def _v8_register(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self.open.get(key)
        if f is None or f.generation != "gfx8":
            return False
        val = int(m.group("val"), 16)
        if m.group("reg") == "ADDR":
            f.address = val << 12
        else:
            f.status = val
        f.lines.append(p.raw)
        return True

    def _v8_decoded(self, m: re.Match, key: str, pci, p: _Parsed, org: Origin) -> bool:
        f = self.open.get(key)
        if f is None or f.generation != "gfx8":
            f = self.start(key, VMFault(origin=org, stamp=p.stamp, pci=pci, generation="gfx8"))
        f.vmid, f.pasid = int(m.group("vmid")), int(m.group("pasid"))
        f.rw = 1 if m.group("rw") == "write" else 0
        f.client_name = m.group("mc")
        f.permission_faults = int(m.group("prot"), 16)
        if f.address is None:
            f.address = int(m.group("page")) << 12 if int(m.group("page")) < (1 << 36) else int(m.group("page"))
        f.lines.append(p.raw)
        self.close(key)  # the decoded line ends a gmc_v8 report
        return True

    def event(self, msg: str, key: str, pci, p: _Parsed, org: Origin, fn) -> None:
        text = msg.strip()
        add = lambda kind, **fields: self.out.events.append(KernelEvent(org, kind, text, p.stamp, pci, fields))  # noqa: E731
        m = RING_TIMEOUT.search(msg)
        if m:
            fields = {"ring": m.group("ring"), "soft_recovered": bool(m.group("soft"))}
            if m.group("sig"):
                fields.update(signaled=int(m.group("sig")), emitted=int(m.group("emit")),
                              in_flight=int(m.group("emit")) - int(m.group("sig")))
            ev = KernelEvent(org, "ring-timeout", text, p.stamp, pci, fields)
            self.out.events.append(ev)
            self.last_timeout[key] = ev
            return
        m = PROC_INFO.search(msg)
        if m:
            ev = self.last_timeout.get(key) or (self.out.events[-1] if self.out.events and
                                                self.out.events[-1].kind == "ring-timeout" else None)
            if ev is not None:
                ev.fields.update(process=m.group("proc"), pid=int(m.group("tgid")), thread=m.group("thread"),
                                 tid=int(m.group("tid")))
            return
        m = RESET_BEGIN.search(msg)
        if m:
            src = int(m.group("src")) if m.group("src") else None
            add("gpu-reset", source=src, source_meaning=GPU_RESET_SOURCES.get(src) if src is not None else None)
            return
        m = RESET_METHOD.search(text)
        if m:
            add("reset-method", method=m.group("m"))
            return
        m = RESET_RESULT.search(msg)
        if m:
            ok = not re.search(r"failed|Failed", m.group(0)) and m.group("ret") in (None, "0")
            add("reset-result", ok=ok)
            return
        m = RING_RESET.search(msg)
        if m:
            add("ring-reset", ring=m.group("start") or m.group("ring"), ok=(m.group("ok") != "failed") if m.group("ok") else None)
            return
        if VRAM_LOST.search(msg):
            add("vram-lost")
            return
        m = MES.search(msg)
        if m:
            msg_name = m.group("msg") if m.lastindex else None
            if msg_name and msg_name.isdigit():
                msg_name = MES_OPCODES.get(int(msg_name), msg_name)
            add("mes", message=msg_name, pipe=int(m.group("pipe")) if m.group("pipe") else None)
            return
        m = KFD.search(msg)
        if m:
            fields = {}
            pid = re.search(r"process pid (\d+)|suspend process pid (\d+)", msg)
            if pid:
                fields["pid"] = int(pid.group(1) or pid.group(2))
            pas = re.search(r"(?:PASID|pasid|Pasid) (0x[0-9a-f]+|\d+)", msg)
            if pas:
                fields["pasid"] = int(pas.group(1), 0)
            add("kfd", **fields)
            return
        m = SQ_INTR.search(msg)
        if m:
            add("sq-intr", **dict(re.findall(r"(\w+) (0x[0-9a-f]+|\d+)", m.group("rest"))))
            return
        m = RAS.search(msg)
        if m:
            add("ras")
            return
        m = IOMMU.search(msg)
        if m:
            add("iommu", **_iommu_fields(m, pci))
            return
        m = RM_MMU_FAULT.search(msg)
        if m:
            add("nvidia-mmu-fault", engine=m.group("engine"), client=m.group("client"),
                address=int(m.group("va").replace("_", ""), 16), fault_type=m.group("ftype"), access=m.group("access"))
            return
        m = USER_SEGFAULT.search(msg)
        if m:
            add("host-segfault", process=m.group("comm"), pid=int(m.group("pid")), address=int(m.group("addr"), 16),
                ip=m.group("ip"), error=int(m.group("err")), library=m.group("lib"))
            return
        m = CORE_PIPE.search(msg)
        if m:
            add("core-dump", pid=int(m.group("pid")), process=m.group("comm"))
            return
        if DEVCOREDUMP.search(msg):
            add("devcoredump")
            return
        m = DEVICE_ID.search(msg)
        if m:
            if m.group("ip"):
                ip = m.group("ip")
                gm = re.match(r"gmc_v(\d+)_", ip)
                if gm:
                    self.generation_hint[key] = {"8": "gfx8", "9": "gfx9", "10": "gfx10", "11": "gfx11",
                                                 "12": "gfx12"}.get(gm.group(1), None)
                add("device", ip_block=ip)
            else:
                add("device", device_id=(m.group("did") or m.group("did2") or m.group("did3")).lower())

    def xid(self, m: re.Match, p: _Parsed, org: Origin) -> None:
        rest = m.group("rest")
        x = Xid(origin=org, xid=int(m.group("xid")), pci=m.group("pci"), text=m.group(0), stamp=p.stamp)
        m31 = X31.search(rest)
        if m31:
            x.engine, x.client = m31.group("engine"), m31.group("client")
            x.location = (m31.group("gpc") or "").strip() or None
            x.address = int(m31.group("va").replace("_", ""), 16)
            x.fault_type, x.access = m31.group("ftype"), m31.group("access")
            x.trusted = "UNRECOGNIZED" not in rest
        m13 = X13.search(rest)
        if m13:
            x.location = f"GPC {m13.group('gpc')}, TPC {m13.group('tpc')}, SM {m13.group('sm')}"
            x.exception = m13.group("exc") if m13.group("scope") == "Warp" else f"{m13.group('exc')} (SM global)"
        elif (me := XERRSTR.search(rest)):
            x.exception = me.group("err")
        mp = XPID.search(rest)
        if mp:
            x.pid, x.process, x.channel = int(mp.group("pid")), mp.group("name"), mp.group("ch")
        else:
            mn, mc = XNAME.search(rest), XCHANNEL.search(rest)
            if mn and mn.group("name").strip() != "<unknown>":
                x.pid = int(mn.group("pid")) if mn.group("pid") else None
                x.process = mn.group("name").strip()
            if mc:
                x.channel = mc.group("ch")
        mc = XCAUSE.search(rest)
        if mc:
            x.caused_by = int(mc.group("xid"))
        if x.pid is None and (mp := XPID_ONLY.search(rest)):
            x.pid = int(mp.group("pid"))
        if m.group("gi"):
            x.gpu_instance = int(m.group("gi"))
            x.compute_instance = int(m.group("ci")) if m.group("ci") else None
        if (mk := XCONTAINED.search(rest)):
            x.containment, x.reset_required = mk.group("what"), mk.group("rst") == "Yes"
        if (mf := FLA_FAULT.search(rest)) and x.address is None:
            x.address = int(mf.group("va").replace("_", ""), 16)
            x.fault_type, x.access = mf.group("ftype"), mf.group("access")
        if (mg := GSP_TIMEOUT.search(rest)):
            x.exception = (f"GSP did not answer RPC {mg.group('fn')} ({mg.group('name')}) of GPU{mg.group('gpu')} "
                           f"for {mg.group('s')} s")
        self.out.xids.append(x)


# The lines of a VM fault block, in the order they are tried: (pattern, handler).
FAULT_LINES = (
    (HDR, _Blocks._header), (V8_HDR, _Blocks._v8_header), (TASK, _Blocks._task), (ADDR, _Blocks._address),
    (COOKIE, _Blocks._cookie), (STATUS, _Blocks._status), (CID, _Blocks._client_id), (FIELD, _Blocks._field),
    (V8_REG, _Blocks._v8_register), (V8_DEC, _Blocks._v8_decoded),
)
