"""dflash-doctor: finds, proves and fixes DFlash speculative-decoding misconfigurations."""

__version__ = "0.1.0"
