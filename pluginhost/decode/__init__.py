"""Decoding Kubernetes objects and configuration documents: one YAML/JSON front end and one strict,
typed field reader, shared by manifests (:mod:`pluginhost.manifest`), the KubeSchedulerConfiguration
(:mod:`framework.config`) and the RemotePlugins document (:mod:`framework.remote.config`).

Three steps, one private module each, all imported from here:

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

from pluginhost.decode._fields import (
    FieldError,
    as_bool,
    as_int,
    as_list,
    as_map,
    as_str,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_str,
    item_map,
    join,
    one_line,
    one_of,
    required_str,
    str_map,
    str_tuple,
    timestamp,
    type_name,
    wrong_type,
)
from pluginhost.decode._strict import (
    LIST,
    MAP,
    OBJECT,
    VALIDATE_MODES,
    Schema,
    check_validate,
    report,
    schemas,
    strict_problems,
    unknown_fields,
)
from pluginhost.decode._text import Document, TextError, load_document, load_documents, paused_gc
from pluginhost.safeyaml import MAX_DEPTH

__all__ = [
    "LIST",
    "MAP",
    "MAX_DEPTH",
    "OBJECT",
    "VALIDATE_MODES",
    "Document",
    "FieldError",
    "Schema",
    "TextError",
    "as_bool",
    "as_int",
    "as_list",
    "as_map",
    "as_str",
    "check_validate",
    "get_bool",
    "get_int",
    "get_list",
    "get_map",
    "get_str",
    "item_map",
    "join",
    "load_document",
    "load_documents",
    "one_line",
    "one_of",
    "paused_gc",
    "report",
    "required_str",
    "schemas",
    "str_map",
    "str_tuple",
    "strict_problems",
    "timestamp",
    "type_name",
    "unknown_fields",
    "wrong_type",
]
