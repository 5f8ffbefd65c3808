"""Kubernetes ``v1`` manifests (YAML or JSON) to the scheduling model, and back for display.

A file may hold several YAML documents separated by ``---``, a single JSON object, and ``kind: List``
(or ``PodList``, ``NodeList``, ...) documents whose ``items`` are expanded in place. Only ``Pod``,
``Node``, ``Reservation``, ``PodDisruptionBudget`` (``policy/v1``), the volume plugins' objects
(``PersistentVolumeClaim``, ``PersistentVolume``, ``StorageClass`` and ``CSINode``) and DynamicResources'
(``ResourceClaim``, ``ResourceClaimTemplate``, ``DeviceClass``, ``ResourceSlice``: ``resource.k8s.io/v1``,
read as :class:`ResourceObject`) and workload-aware scheduling's (``Workload``, ``PodGroup``:
``scheduling.k8s.io/v1beta1`` or ``v1alpha2``, :mod:`pluginhost.workload`) are understood (the
kinds of :data:`SUPPORTED_KINDS`); everything else is an error, as is anything the
API server would reject that the scheduler depends on (operators, effects, weights, ports, quantities,
names, labels, annotations, types). Decoding is the API server's strict decoding
(:mod:`pluginhost.decode`, with the field names of :mod:`pluginhost.kubefields`): a field the type does
not have, at any depth, or a key given twice is named by its path, or reported as a warning, or
ignored, as ``kubectl apply --validate`` asks (:data:`VALIDATE_MODES`).

Errors are :class:`ManifestError` and say where the problem is, e.g.::

    pods.yaml: document 3 (Pod default/web-1): spec.containers[0].resources.requests.cpu:
        invalid quantity "abc"

(one line in practice).

The API server's defaulting that scheduling relies on is applied here, since there is no API server
(see ``_pods``). Everything is imported from here; the private modules, one job each:

- ``_reader``: the front end, text to documents to objects of each kind, and :class:`ManifestError`;
- ``_meta``: names, namespaces, labels and annotations, checked as the API server checks them;
- ``_fields``: the field readers the kinds share (resource lists, selectors, weights);
- ``_pods`` (with ``_placement``: affinity, tolerations, spread constraints), ``_nodes``,
  ``_reservations``, ``_pdb`` and ``_storage`` (a pod's volumes, claims, volumes, classes, CSINodes):
  one builder per kind;
- ``_dra``: DRA's objects, their envelope checked here and their fields by the framework's decoder;
- ``_dump``: the model back to v1 manifests.
"""

from pluginhost.decode import VALIDATE_MODES, one_line
from pluginhost.manifest._dra import RESOURCE_KINDS, ResourceObject, set_resource_decoder
from pluginhost.manifest._dump import node_to_dict, pod_to_dict
from pluginhost.manifest._podgroups import decode_pod_group, decode_workload
from pluginhost.manifest._pods import compute_requests, finish_pod
from pluginhost.manifest._reader import (
    SUPPORTED_KINDS,
    ManifestError,
    ManifestObject,
    csinode_from_dict,
    load_documents,
    node_from_dict,
    parse_objects,
    pdb_from_dict,
    pod_from_dict,
    pod_group_from_dict,
    pv_from_dict,
    pvc_from_dict,
    reservation_from_dict,
    storage_class_from_dict,
    workload_from_dict,
)

__all__ = [
    "RESOURCE_KINDS",
    "SUPPORTED_KINDS",
    "VALIDATE_MODES",
    "ManifestError",
    "ManifestObject",
    "ResourceObject",
    "compute_requests",
    "csinode_from_dict",
    "decode_pod_group",
    "decode_workload",
    "finish_pod",
    "load_documents",
    "node_from_dict",
    "node_to_dict",
    "one_line",
    "parse_objects",
    "pdb_from_dict",
    "pod_from_dict",
    "pod_group_from_dict",
    "pod_to_dict",
    "pv_from_dict",
    "pvc_from_dict",
    "reservation_from_dict",
    "set_resource_decoder",
    "storage_class_from_dict",
    "workload_from_dict",
]
