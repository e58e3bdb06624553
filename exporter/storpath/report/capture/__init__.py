"""`storpath capture`: the files storpath reads, and the outputs of the commands it runs,
in one archive that replays the machine. files: what the readers declare and a snapshot
of it with symlinks kept; redact: stand-ins for serial numbers and WWNs; archive: the
snapshot of a machine and the tar.gz. The command line is storpath.commands.capture."""
