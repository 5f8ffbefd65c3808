"""Example plugins, each meant to run as its own plugin host process (a sidecar)::

    outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061
    outrigger plugin serve pluginhost.examples.nodelabels:NodeLabels --listen 127.0.0.1:50062
    outrigger plugin serve pluginhost.examples.provisioner:Provisioner --listen 127.0.0.1:50063
    outrigger plugin serve pluginhost.examples.gputopology:GpuTopology --listen 127.0.0.1:50064

They are ordinary plugin classes (the same base classes as the in-tree plugins), so they also run
in-process: ``registry.register_class(Coscheduling)``.

- :mod:`~pluginhost.examples.coscheduling`: gang scheduling (PreFilter, Reserve/Unreserve, Permit with
  waiting pods released or rejected through the framework's Handle).
- :mod:`~pluginhost.examples.nodelabels`: Filter and Score on node labels chosen by pod annotations,
  prepared in PreFilter and handed over in CycleState, answered in one exchange (``filter_and_score``).
- :mod:`~pluginhost.examples.provisioner`: a slow PreBind that can fail, with Reserve/Unreserve, to show
  Unreserve crossing processes.
- :mod:`~pluginhost.examples.gputopology`: a Score plugin reading the device objects of dynamic resource
  allocation from the snapshot mirror (``needs_devices``): nodes where most free devices of the pod's
  device classes share one topology attribute value (a NUMA node, a PCIe root) score highest.
- :mod:`~pluginhost.examples.noderank`: one plugin in three versions whose manifests differ (Filter;
  Filter and Score; another Score), to try host upgrades, shadow and canary plugins (docs/plugins-live.md).
"""

from __future__ import annotations

from pluginhost.examples.coscheduling import Coscheduling
from pluginhost.examples.gputopology import GpuTopology
from pluginhost.examples.nodelabels import NodeLabels
from pluginhost.examples.provisioner import Provisioner

__all__ = ["ALL", "Coscheduling", "GpuTopology", "NodeLabels", "Provisioner"]

ALL = [Coscheduling, NodeLabels, Provisioner, GpuTopology]
