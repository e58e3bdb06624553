"""Read-only fio probes: measured read throughput against what the path should give.

- `config`: the `probes:` section of the config file, checked at load (write options refused);
- `devices`: where a target's I/O lands (kernel device, md members), /proc/diskstats, the file target;
- `fio`: the fio command line, running it out of process under a hard timeout, parsing its JSON;
- `state`: the state file that keeps results across restarts;
- `engine`: one probe end to end (locks, budget, busy check, fio, bookkeeping), shared by
  the `probes` collector (background tasks) and `storpath probe` (one probe now).
"""
