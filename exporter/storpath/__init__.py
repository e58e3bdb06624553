"""storpath: shows when Linux storage runs below the speed its hardware can deliver."""

__version__ = "0.1.0"
