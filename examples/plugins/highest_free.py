"""A placement plug-in: every job on the highest-numbered free hosts.

    interleave schedule examples/highest-free.yaml
    interleave simulate examples/highest-free.yaml --scheduler highest-free+cassini
"""
import interleave


@interleave.register_scheduler("highest-free")
class HighestFree(interleave.PlacementPolicy):
    def place(self, job, free_hosts, cluster):
        # free_hosts come in host order (with +cassini, CASSINI also offers them rack by rack in other
        # orders to get alternatives); take the last job.workers of them
        return free_hosts[-job.workers:]
