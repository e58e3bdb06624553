"""What the commands that run fio probes show while fio runs (`storpath probe`,
`storpath check --probe`)."""

from __future__ import annotations


class Progress:
    """A bar on stderr while fio runs (a terminal), or one line per profile (a pipe)."""

    def __init__(self, stream, runtime: float):
        self.stream = stream
        self.runtime = runtime
        self.tty = stream.isatty()
        self.label = ""

    def start(self, label: str) -> None:
        self.label = label
        if not self.tty:
            print(f"probing {label} for {self.runtime:g}s ...", file=self.stream, flush=True)
        else:
            self.tick(0.0)

    def tick(self, elapsed: float) -> None:
        if not self.tty:
            return
        width = 30
        done = min(width, int(width * elapsed / self.runtime)) if self.runtime else width
        over = " (finishing)" if elapsed > self.runtime else ""
        self.stream.write(f"\r{self.label:<28} [{'#' * done}{'.' * (width - done)}] {elapsed:4.1f}/{self.runtime:g}s{over}")
        self.stream.flush()

    def end(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
