"""Decoding Kubernetes objects and configuration documents: one YAML/JSON front end and one strict,
typed field reader, shared by manifests (:mod:`pluginhost.manifest`), the KubeSchedulerConfiguration
(:mod:`framework.config`) and the RemotePlugins document (:mod:`framework.remote.config`).

Three steps, one private module each; their names (each module's ``__all__``) are imported from here:

- **Text to documents** (``_text``): :func:`load_documents` reads a YAML stream or one JSON object,
  :func:`load_document` exactly one document; the only exception is :class:`TextError`, and no input
  reaches Python's recursion limit (collections nest at most :data:`MAX_DEPTH` deep). A key given twice
  in one mapping is not an error there: each :class:`Document` lists the paths of its duplicated keys
  and the caller's validation mode decides.
- **Documents to values** (``_fields``): the readers check a value's type and raise :class:`FieldError`
  naming the field by its path, e.g. ``spec.containers[0].name: expected a string, got integer``:
  ``get_*`` read a field of a mapping, ``as_*`` a value whose path is known.
- **Strict decoding** (``_strict``): a :class:`Schema` per object type (:func:`schemas`);
  :func:`unknown_fields` finds the fields it does not know, :func:`strict_problems` words them as the API
  server does (``unknown field "spec.nodeSelectr"``, ``duplicate field "metadata.name"``) and
  :func:`report` applies one of :data:`VALIDATE_MODES`, ``kubectl apply --validate``'s ``strict``,
  ``warn`` and ``ignore``.
"""

from pluginhost.decode import _fields, _strict, _text
from pluginhost.decode._fields import *  # noqa: F403
from pluginhost.decode._strict import *  # noqa: F403
from pluginhost.decode._text import *  # noqa: F403
from pluginhost.safeyaml import MAX_DEPTH

__all__ = ["MAX_DEPTH", *_fields.__all__, *_strict.__all__, *_text.__all__]
