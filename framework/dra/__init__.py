"""Dynamic Resource Allocation: ``resource.k8s.io/v1`` models and the structured-parameters allocator
of ``k8s.io/dynamic-resource-allocation/structured`` v0.37.2 (the incubating implementation, which
kube-scheduler 1.37 uses with its default feature gates), and what DynamicResources
(framework/plugins/dynamicresources.py) schedules with: the scheduler's DRA store and a pod's claims.

Modelled (on by default in 1.37): ExactCount and All requests, ``firstAvailable`` prioritized lists
(DRAPrioritizedList), admin access (DRAAdminAccess), device taints and request tolerations
(DRADeviceTaints) and DeviceTaintRules (DRADeviceTaintRules), ``matchAttribute`` and
``distinctAttribute`` constraints, per-node, node-selector, all-nodes and per-device node selection
slices, partitionable devices (shared counters and ``consumesCounters``, DRAPartitionableDevices),
consumable capacity (``allowMultipleAllocations`` devices shared by several claims, ``capacity``
requests, request policies with fractional ranges: DRAConsumableCapacity, DRAFractionalCapacityRange),
pools complete only with every slice of their newest generation, and devices with binding conditions
(DRADeviceBindingConditions with DRAResourceClaimDeviceStatus: their pools are tried last, the conditions
copied to the result).

Not modelled: the features off by default in 1.37 (list-type attributes, derived attributes,
compatibility groups, optional node operations, node-allocatable resources).

Modules: :mod:`.models` (typed objects, strict decoding), :mod:`.selectors` (CEL), :mod:`.pools`
(which slices a node sees), :mod:`.capacity` (consumable capacity), :mod:`.allocator` (the search),
:mod:`.store` (``DraStore``, the scheduler's ``cache.dra``, and the ``ClaimWriter`` PreBind writes
through), :mod:`.taintrules` (DeviceTaintRules and the taints they add to devices), :mod:`.claims`
(a pod's claims as the plugin reads them, the statuses it writes),
:mod:`.extended` (extended resources backed by DeviceClasses: the claim DynamicResources makes for a pod
that asks for them, DRAExtendedResource) and :mod:`.embedded` (the embedded store's objects and the
resourceclaim controller's part).
"""
