"""Unit conversion constants. Each exists once in the project (style.md, "Units in names")."""

GIB = 2**30
"""Bytes per GiB (binary)."""
MIB = 2**20
"""Bytes per MiB (binary)."""
KB = 1000
"""Bytes per kB (decimal, as switch and NIC buffer datasheets state them)."""
MB = 1000**2
"""Bytes per MB (decimal: flow sizes of the packet-level references)."""
TERA = 1e12
"""FLOP/s per TFLOP/s: decimal, as GPU datasheets state them (never 2**40)."""
GIGA = 1e9
"""Decimal giga, for Gb/s (bits) and GB/s (bytes)."""
BITS_PER_BYTE = 8
US = 1e-6
"""Seconds per microsecond."""
