"""Outrigger's tools: what measures, compares and demonstrates the scheduler, none of it needed to run it.

- :mod:`tools.bench`: the benchmark (``make bench``), in-process scenarios and the ``apiserver`` one
  through a real kube-apiserver (:mod:`tools.bench.apiserver`);
- :mod:`tools.compare`: Outrigger side by side with the real kube-scheduler (``make compare``);
- :mod:`tools.compat`: the live-cluster tests against each pinned Kubernetes release (``make compat``);
- :mod:`tools.democluster`: the live-cluster demo (``make demo-cluster``);
- :mod:`tools.dracompare`: random DRA inputs through Outrigger's allocator and kube-scheduler's;
- :mod:`tools.featuregates`: kube-scheduler's feature gates, read from a release's code, into
  ``framework/featuregates_data.py``;
- :mod:`tools.fakedriver`: a fake DRA driver's ResourceSlices, DeviceClass and claims (the live-cluster
  demo's and tests' GPUs);
- :mod:`tools.localcluster`: etcd and kube-apiserver on loopback, the one local cluster the tools and the
  live-cluster tests start;
- :mod:`tools.workloads`: scheduler_perf's nodes and pods, the one set of templates every tool builds on,
  and :class:`~tools.workloads.BoundWatch`, the one watch of bound pods.

The arrows point one way: a tool imports ``framework``, ``pluginhost`` and ``clients``; no module of
those imports ``tools`` (tests/test_layout.py checks it), so the product packages and their images carry
none of this.
"""
