"""Benchmarks of the DP step: QEMU instruction counts, Cortex-M4 cycle estimates, footprint.

- :mod:`.icount`: what a device tick is and how QEMU -icount ticks convert to instructions;
- :mod:`.timing`: the Cortex-M4 instruction timing table (ARM DDI 0439B Table 3-1);
- :mod:`.trace`: the firmware ELF executed in Unicorn, instruction by instruction;
- :mod:`.footprint`: flash and RAM per module and of the DP core;
- :mod:`.run`: ``edgedp bench`` (tables, JSON, plot).
"""
