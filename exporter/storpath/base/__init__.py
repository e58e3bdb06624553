"""What every layer uses: reading files under a deadline (sysfs), units and sysfs spellings,
the problems a reader reports, where files are (roots), logging, the config and its YAML
files, writing files, bounded JSON, running commands, background tasks, the build."""
