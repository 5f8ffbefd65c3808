"""Field readers the kinds share: resource lists, label selectors, node selector terms and weights.

Each reads one field of a decoded object into the model and checks it as the API server's validation
does, raising :class:`~pluginhost.decode.FieldError` with the field's path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pluginhost.decode import (
    FieldError,
    get_int,
    get_list,
    get_map,
    item_map,
    join,
    one_of,
    required_str,
    str_map,
    str_tuple,
    type_name,
)
from pluginhost.model import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceList,
)
from pluginhost.quantity import QuantityError, canonical

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "label_selector",
    "node_selector_term",
    "node_selector_terms",
    "preferred",
    "resource_list",
    "shown",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_SELECTOR_OPERATORS = _LABEL_SELECTOR_OPERATORS | {"Gt", "Lt"}
_INTEGER_RE = re.compile(r"[+-]?\d+")
_R = TypeVar("_R", LabelSelectorRequirement, NodeSelectorRequirement)
_T = TypeVar("_T")


def shown(value: object) -> str:
    """A value quoted in a message when it is a string, else named by its type."""
    return f'"{value}"' if isinstance(value, str) else type_name(value)


def resource_list(m: Mapping[str, Any], key: str, parent: str) -> ResourceList:
    """A ResourceList (``requests``, ``capacity``, ...): resource name -> canonical quantity."""
    v = get_map(m, key, parent)
    out: ResourceList = {}
    for name, raw in v.items():
        if not isinstance(name, str) or not name:
            raise FieldError(join(parent, key), f"invalid resource name {name!r}")
        try:
            out[name] = canonical(name, raw)
        except QuantityError as e:
            raise FieldError(join(join(parent, key), name), str(e)) from None
    return out


def _check_values(op: str, values: tuple[str, ...], path: str) -> None:
    """metav1/core validation of a requirement's values for its operator."""
    if op in ("In", "NotIn"):
        if not values:
            raise FieldError(f"{path}.values", f"must be non-empty when operator is {op}")
    elif op in ("Exists", "DoesNotExist"):
        if values:
            raise FieldError(f"{path}.values", f"must be empty when operator is {op}")
    elif len(values) != 1 or _INTEGER_RE.fullmatch(values[0]) is None:
        # Gt/Lt: the node's label value is compared as an integer with this single value.
        raise FieldError(f"{path}.values", f"must be a single integer when operator is {op}")


def _match_expressions(
    m: Mapping[str, Any], path: str, operators: Iterable[str], requirement: Callable[..., _R]
) -> list[_R]:
    """``matchExpressions``: key, one of ``operators`` and the values that operator takes, each."""
    out = []
    for i, e in enumerate(get_list(m, "matchExpressions", path)):
        epath = f"{path}.matchExpressions[{i}]"
        req = item_map(e, epath)
        k = required_str(req, "key", epath)
        op = one_of(required_str(req, "operator", epath), operators, f"{epath}.operator", "operator")
        values = str_tuple(req, "values", epath)
        _check_values(op, values, epath)
        out.append(requirement(key=k, operator=op, values=values))
    return out


def label_selector(m: Mapping[str, Any], key: str, parent: str) -> LabelSelector | None:
    """A metav1.LabelSelector, or None when ``key`` is not set."""
    v = m.get(key)
    if v is None:
        return None
    path = join(parent, key)
    sel = item_map(v, path)
    exprs = _match_expressions(sel, path, _LABEL_SELECTOR_OPERATORS, LabelSelectorRequirement)
    return LabelSelector(match_labels=str_map(sel, "matchLabels", path), match_expressions=exprs)


def node_selector_term(v: object, path: str) -> NodeSelectorTerm:
    """A NodeSelectorTerm: label requirements, and field requirements on the node's name."""
    term = item_map(v, path)
    exprs = _match_expressions(term, path, _NODE_SELECTOR_OPERATORS, NodeSelectorRequirement)
    fields = []
    for i, e in enumerate(get_list(term, "matchFields", path)):
        epath = f"{path}.matchFields[{i}]"
        req = item_map(e, epath)
        # The API server accepts only metadata.name here, with In/NotIn and exactly one value.
        k = required_str(req, "key", epath)
        if k != "metadata.name":
            raise FieldError(f"{epath}.key", f'unsupported field "{k}" (supported: metadata.name)')
        op = one_of(required_str(req, "operator", epath), ("In", "NotIn"), f"{epath}.operator", "operator")
        values = str_tuple(req, "values", epath)
        if len(values) != 1:
            raise FieldError(f"{epath}.values", f"must have exactly one value when operator is {op}")
        fields.append(NodeSelectorRequirement(key=k, operator=op, values=values))
    return NodeSelectorTerm(match_expressions=exprs, match_fields=fields)


def node_selector_terms(selector: Mapping[str, Any], path: str) -> list[NodeSelectorTerm]:
    """A NodeSelector's ``nodeSelectorTerms``, at least one (node affinity, a volume's node affinity)."""
    terms = get_list(selector, "nodeSelectorTerms", path)
    if not terms:
        raise FieldError(f"{path}.nodeSelectorTerms", "must have at least one node selector term")
    return [node_selector_term(t, f"{path}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)]


def _weight(m: Mapping[str, Any], path: str) -> int:
    if m.get("weight") is None:
        raise FieldError(f"{path}.weight", "required field is missing")
    w = get_int(m, "weight", path, 0)
    if not 1 <= w <= 100:
        raise FieldError(f"{path}.weight", f"must be in the range 1-100, got {w}")
    return w


def preferred(
    m: Mapping[str, Any], path: str, field: str, build: Callable[[object, str], _T]
) -> list[tuple[int, _T]]:
    """``preferredDuringSchedulingIgnoredDuringExecution``: a weight from 1 to 100 and the required
    ``field`` (built by ``build``), each."""
    out = []
    for i, p in enumerate(get_list(m, "preferredDuringSchedulingIgnoredDuringExecution", path)):
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        pm = item_map(p, ppath)
        weight = _weight(pm, ppath)
        if pm.get(field) is None:
            raise FieldError(f"{ppath}.{field}", "required field is missing")
        out.append((weight, build(pm[field], f"{ppath}.{field}")))
    return out
