"""The cluster as plugins read it: a columnar table of nodes and placed pods, its immutable
snapshots, and the storage objects the volume plugins read.

- ``_table``: :class:`ClusterTable`, the mutable store (one row per node, resource usage as NumPy
  arrays, copy-on-write), and the :class:`Snapshot` it hands out at a generation, with the node-tree
  order Filter walks (:func:`zone_order`) and the change events a table tells its listeners.
- ``_volumes``: :class:`VolumeStore`, the PersistentVolumeClaims, PersistentVolumes, StorageClasses
  and CSINodes with the volume binder's assume cache, live like kube-scheduler's listers (every
  snapshot refers to its table's store), and the :class:`VolumeWriter` PreBind writes through.
- ``_devices``: :class:`DeviceStore`, the ResourceSlices, DeviceClasses and ResourceClaims a remote
  host's mirror follows for plugins that declare ``needs_devices`` (live like the volumes).
"""

from pluginhost.snapshot import _devices, _table, _volumes
from pluginhost.snapshot._devices import *  # noqa: F403
from pluginhost.snapshot._table import *  # noqa: F403
from pluginhost.snapshot._volumes import *  # noqa: F403

__all__ = [*_table.__all__, *_volumes.__all__, *_devices.__all__]
