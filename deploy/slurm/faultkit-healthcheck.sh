#!/bin/sh
# Slurm health check (slurm.conf: HealthCheckProgram=/etc/slurm/faultkit-healthcheck.sh,
# HealthCheckInterval=300) or epilog: drains the node only when faultkit suspects the hardware
# (Xid 48/63/64/74/79/92/94/95/119/120, amdgpu RAS, VRAM lost); a software fault is reported, not drained.
msg=$(/usr/local/bin/faultkit watch --mode slurm --kernel-log kmsg --spool /var/spool/faultkit --quiet-after 0s)
rc=$?
[ -n "$msg" ] && logger -t faultkit "$msg"
if [ "$rc" -eq 1 ]; then
    scontrol update NodeName="$(hostname -s)" State=DRAIN Reason="$(printf '%s' "$msg" | tail -n 1 | cut -c1-200)"
fi
exit 0
