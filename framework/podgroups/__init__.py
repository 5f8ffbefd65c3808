"""Workload-aware scheduling (kube-scheduler 1.37, the GenericWorkload gate): the PodGroups and
Workloads the scheduler knows and the state of each group's pods (:mod:`.store`: ``PodGroupStore``, the
scheduler's ``cache.podgroups``, and the ``PodGroupStatusWriter`` the PodGroup cycle writes conditions
through), and the embedded store's side of them (:mod:`.embedded`: applying manifests, printing them as
``kubectl get`` and ``describe`` do).

The objects' model is :mod:`pluginhost.workload`; the plugin interfaces of the group cycle are
:mod:`pluginhost.placement`; the in-tree plugins are :mod:`framework.plugins.gangscheduling`.
"""
