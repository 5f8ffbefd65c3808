"""The scheduler: the cluster's objects, the queue, the cache, and the scheduling/binding cycles.

Scheduling cycles run one at a time (``run`` pops a pod, schedules it, and loops); each successful
cycle ends by starting the pod's binding cycle as its own task, so binding (Permit waits, PreBind,
Bind) overlaps with the next pods' scheduling. Every path out of a cycle either binds the pod or
returns it to the queue with the status that explains why, so a pod is never dropped.

Where the cluster comes from and where decisions go is the scheduler's :class:`ClusterSource`. The
default, :class:`EmbeddedSource`, makes the scheduler itself the source of truth for pods and nodes
(what an API server is to kube-scheduler): :meth:`Scheduler.apply` and :meth:`Scheduler.delete_pod`
change objects, :meth:`Scheduler.bind` sets ``nodeName``, and :meth:`Scheduler.events` streams what
happened to them. A live cluster's source (``framework.kube``) feeds the same cache and queue through
the ``observe_*`` methods (kube-scheduler's informer handlers) and takes the bindings, failures,
nominations and preemptions through the same interface; nothing above it knows which source runs.

:class:`Scheduler` is one class whose parts live in their own modules, as kube-scheduler's
``Scheduler`` methods live in several files:

- :mod:`~framework.scheduler.scheduler`: ``Scheduler`` itself: construction, the loop, controllers, what-if;
- :mod:`~framework.scheduler.base`: the state the parts share, the event log;
- :mod:`~framework.scheduler.store`: the objects (apply, delete, bind, informers) and ``EmbeddedSource``;
- :mod:`~framework.scheduler.cycle`: the scheduling cycle, and kube-scheduler's fit error text;
- :mod:`~framework.scheduler.binding`: the binding cycle;
- :mod:`~framework.scheduler.failure`: failed attempts and the nominations they set;
- :mod:`~framework.scheduler.records`: pod records, events, phases, apply results;
- :mod:`~framework.scheduler.source`: the ``ClusterSource`` protocol;
- :mod:`~framework.scheduler.handle`: the framework handle plugins get;
- :mod:`~framework.scheduler.explain`: explain, one cycle that reserves nothing.
"""

from .cycle import fit_error_message
from .explain import explain_pod
from .records import ApplyError, ApplyResult, CycleStats, Event, PodRecord
from .scheduler import Scheduler, tune_gc
from .source import ClusterSource
from .store import EmbeddedSource

__all__ = [
    "ApplyError",
    "ApplyResult",
    "ClusterSource",
    "CycleStats",
    "EmbeddedSource",
    "Event",
    "PodRecord",
    "Scheduler",
    "explain_pod",
    "fit_error_message",
    "tune_gc",
]
