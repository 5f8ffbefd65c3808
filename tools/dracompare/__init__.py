"""Compare Outrigger's DRA allocator (framework/dra) with kube-scheduler's: random ResourceSlices,
DeviceClasses, ResourceClaims and allocated devices go through both, and every case where the devices
allocated (or the error text) differ is printed.

``python -m tools.dracompare --cases 1000 --seed 1`` builds the Go harness (``harness/``, which links
``k8s.io/dynamic-resource-allocation`` v0.37.2; the first build downloads it through the Go module proxy)
into ``~/.cache/outrigger/dracompare`` and exits 1 when any case differs. :mod:`.cases` makes the inputs.
"""
