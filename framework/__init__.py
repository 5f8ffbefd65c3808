"""The scheduling framework. Its top-level modules are the core: :mod:`.runtime` (runs one extension
point over a profile's plugins), :mod:`.outcomes`, :mod:`.transformers`, :mod:`.waiting` and
:mod:`.hooks` beside it, the :mod:`.cache` and the :mod:`.queue`, :mod:`.whatif` snapshots,
:mod:`.reservations`, :mod:`.disruption` and :mod:`.profiles` (where a scheduler's plugins come from).

Every other concern is a package: :mod:`.config` (KubeSchedulerConfiguration), :mod:`.plugins` (the
in-tree plugins), :mod:`.scheduler` (the scheduling and binding cycles), :mod:`.remote` (plugins in
other processes), :mod:`.service` (the gRPC Scheduler API), :mod:`.observe` (traces, metrics and the
HTTP endpoints), :mod:`.kube` (a live cluster), :mod:`.cli` (``outrigger``) and :mod:`.bench` (the
benchmark)."""
