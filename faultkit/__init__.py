"""faultkit: GPU fault forensics."""

__version__ = "0.1.0"
