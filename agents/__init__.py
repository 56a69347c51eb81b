"""The agents' runtime: what runs on each emulated host. ``agent`` (one worker of a job: its
iterations, compute and communication phases on the plan's grid), ``stage`` (a pipeline or tensor
job's worker: ops and flows), ``wire`` (sockets, pacing, the bytes on the wire), ``timing`` (the grid
rule, re-alignment, time dilation) and ``patterns`` (which workers exchange what in a phase).
Standard library only: it imports nothing of the harness or of the profile data (workloads)."""
