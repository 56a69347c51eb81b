"""An event-driven plug-in: a job waits up to MAX_WAIT_S for one rack with room for all its workers,
then takes any free hosts. It decides at arrivals, at finishes and at the timers it asks for.

    interleave simulate examples/rack-or-wait.yaml
"""
import interleave

MAX_WAIT_S = 5.0


@interleave.register_scheduler("rack-or-wait")
class RackOrWait(interleave.EventPolicy):
    def decide(self, t, waiting, running):
        topo = self.spec.topology
        used = {h for hosts in running.values() for h in hosts}
        free = [h for h in topo.hosts if h not in used]
        place, wake = {}, None
        for w in waiting:                       # in arrival order; w.job is the spec's job
            n = w.job.workers
            by_rack = {}
            for h in free:
                by_rack.setdefault(topo.edge_of(h), []).append(h)
            rack = next((hs for hs in by_rack.values() if len(hs) >= n), None)
            if rack is not None:
                hosts = rack[:n]
            elif t - w.since >= MAX_WAIT_S and len(free) >= n:
                hosts = free[:n]
            else:
                deadline = w.since + MAX_WAIT_S
                if deadline > t:
                    wake = deadline if wake is None else min(wake, deadline)
                continue
            place[w.job.name] = hosts
            free = [h for h in free if h not in hosts]
        return interleave.Decision(place=place, wake_at=wake)
