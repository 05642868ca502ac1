"""Write the rocprofv3 trace of the bundled sample incident (traces/sglang-tp2-mi300x/rocprofv3/):
ROCm 7.x CSV headers, two TP ranks decoding in 25 ms steps, the overlap scheduler's host-to-device
copy for the next batch on its own stream, and rank 1's last moments: a 4 MiB buffer freed 3.1 ms
before the fault and the `_fwd_grouped_kernel_stage1` launch with no completion record.

Deterministic (no randomness), so the sample and its expected triage stay fixed. Run from the
repository root: python scripts/make_sample_trace.py"""

from __future__ import annotations

from pathlib import Path

OUT = Path("traces/sglang-tp2-mi300x/rocprofv3/node17")
FAULT_NS = 183402551203000          # dmesg's [183402.551203], CLOCK_MONOTONIC taken as BOOTTIME
MS, US = 1_000_000, 1_000
K70 = ('"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name",'
       '"Correlation_Id","Start_Timestamp","End_Timestamp","LDS_Block_Size","Scratch_Size","VGPR_Count",'
       '"Accum_VGPR_Count","SGPR_Count","Workgroup_Size_X","Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X",'
       '"Grid_Size_Y","Grid_Size_Z"')
API = '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"'
ALLOC = '"Kind","Operation","Agent_Id","Allocation_Size","Address","Correlation_Id","Start_Timestamp","End_Timestamp"'
COPY = ('"Kind","Direction","Stream_Id","Source_Agent_Id","Destination_Agent_Id","Correlation_Id",'
        '"Start_Timestamp","End_Timestamp"')
AGENTS = ('"Node_Id","Logical_Node_Id","Agent_Type","Name","Product_Name"\n0,0,"CPU","cpu","AMD EPYC 9654"\n'
          '2,1,"GPU","gfx942","AMD Instinct MI300X"\n3,2,"GPU","gfx942","AMD Instinct MI300X"\n')
STEP = [("rmsnorm_kernel", 40), ("fused_qkv_gemm", 310), ("rotary_embedding_kernel", 25),
        ("_fwd_grouped_kernel_stage1", 420), ("_fwd_kernel_stage2", 90), ("o_proj_gemm", 260),
        ("all_reduce_kernel", 180), ("fused_moe_kernel", 640)]
STEPS = 12
VICTIM = 0x7F3A2C400000              # dmesg's page; 4 MiB buffer freed by the scheduler


def rank(pid: int, agent: int, faulting: bool) -> dict[str, list[str]]:
    tid = pid + 78
    kern, api, copies = [], [], []
    corr, did = 1, 1
    t0 = FAULT_NS - STEPS * 25 * MS
    for step in range(STEPS):
        t = t0 + step * 25 * MS
        copies.append(f'"MEMORY_COPY","MEMORY_COPY_HOST_TO_DEVICE",2,"Agent 0","Agent {agent}",{corr},'
                      f'{t + 2 * MS},{t + 2 * MS + 180 * US}')
        api.append(f'"HIP_RUNTIME_API","hipMemcpyAsync",{pid},{tid},{corr},{t + 1900 * US},{t + 1950 * US}')
        corr += 1
        at = t + 3 * MS
        for name, dur in STEP:
            last = faulting and step == STEPS - 1 and name == "_fwd_grouped_kernel_stage1"
            api.append(f'"HIP_RUNTIME_API","hipLaunchKernel",{pid},{tid},{corr},{at - 30 * US},{at - 20 * US}')
            if last:
                return {"kernel": kern, "api": api, "copy": copies, "last_launch": at}
            kern.append(f'"KERNEL_DISPATCH","Agent {agent}",1,1,{tid},{did},{did % 97 + 3},"{name}",{corr},'
                        f'{at},{at + dur * US},0,0,64,0,32,256,1,1,8192,1,1')
            corr, did, at = corr + 1, did + 1, at + dur * US + 15 * US
    return {"kernel": kern, "api": api, "copy": copies}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for pid, agent, faulting in ((48212, 1, False), (48213, 2, True)):
        r = rank(pid, agent, faulting)
        (OUT / f"{pid}_kernel_trace.csv").write_text(K70 + "\n" + "\n".join(r["kernel"]) + "\n")
        (OUT / f"{pid}_hip_api_trace.csv").write_text(API + "\n" + "\n".join(r["api"]) + "\n")
        (OUT / f"{pid}_memory_copy_trace.csv").write_text(COPY + "\n" + "\n".join(r["copy"]) + "\n")
        (OUT / f"{pid}_agent_info.csv").write_text(AGENTS)
        allocs = []
        if faulting:
            allocs = [f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_ALLOCATE","Agent {agent}",4194304,"0x{VICTIM:016x}",'
                      f'9001,{FAULT_NS - 900 * MS},{FAULT_NS - 900 * MS + 40 * US}',
                      f'"MEMORY_ALLOCATION","MEMORY_ALLOCATION_FREE","",0,"0x{VICTIM:016x}",9002,'
                      f'{FAULT_NS - 3100 * US},{FAULT_NS - 3100 * US + 25 * US}']
        (OUT / f"{pid}_memory_allocation_trace.csv").write_text(ALLOC + "\n" + "\n".join(allocs) + "\n")


if __name__ == "__main__":
    main()
