"""What makes a text a kernel log: a line opened by the kernel's stamp and a driver's prefix
(sources.kernel_log recognises kernel logs by it; the front end tells a kernel line from a
paste's wrapper by it)."""

from __future__ import annotations

import re

# Under re.M, `\s` after `^` would run across the newlines that follow and back off at every
# line start: quadratic on blank lines (100 KB of newlines took > 30 s). Inside a line, only
# blanks and tabs.
MARKERS = re.compile(
    r"^(?:\d\d:\d\d:\d\d(?:\.\d+)? |\[[ \t]*\d+\.\d+\]|\[\w{3} [\w ]+\d\d:\d\d:\d\d \d{4}\]|\[[ \t]*\+\d+[.,]\d+\]|\S+ +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)? \S* ?kernel:|"
    r"\d{4}-\d\d-\d\dT\S+ \S+ kernel:)?[ \t]*(?:\[[ \t]*\d+\.\d+\][ \t]*)?(?:amdgpu[ :]|NVRM: |kfd |\[drm|drmn\d|(?:[\w-]+ [\w:.]+: )?AMD-Vi: |gmc_v\d+_\d+_process_interrupt|"
    r"Evicting PASID|qcm fence|\S+\[\d+\]: segfault at )", re.M)
