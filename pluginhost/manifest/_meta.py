"""An object's metadata checked as the API server checks it: names, namespaces, labels and annotations.

The rules and their messages are k8s.io/apimachinery's (``util/validation`` and ``api/validation``), so
an error reads as ``kubectl apply`` would print it::

    metadata.name: Invalid value: "Web_1": a lowercase RFC 1123 subdomain must consist of ...
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pluginhost.decode import FieldError, get_map, get_str, str_map

__all__ = [
    "TOTAL_ANNOTATION_SIZE_LIMIT",
    "check_labels",
    "dns_label_problem",
    "invalid",
    "metadata",
    "namespace",
    "object_meta",
    "quoted",
    "subdomain_problem",
    "uid",
]

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_LABEL_KEY_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_NAME_FMT + ")?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_LABEL_KEY_NAME_RE = re.compile(_LABEL_KEY_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
#: The most bytes all annotations of an object may hold, keys and values together (256 KiB).
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    # RegexError's wording, its double space before "or" included.
    shown = "".join(f"{' or ' if i else ''}'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


_SUBDOMAIN_MESSAGE = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT,
    "example.com",
)
_DNS_LABEL_MESSAGE = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character",
    _DNS1123_LABEL_FMT,
    "my-name",
    "123-abc",
)
_LABEL_KEY_NAME_MESSAGE = "name part " + _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character",
    _LABEL_KEY_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)
_LABEL_VALUE_MESSAGE = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)


def subdomain_problem(value: str) -> str | None:
    """IsDNS1123Subdomain: the first of its messages that applies, or None."""
    if len(value) > 253:
        return "must be no more than 253 characters"
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        return _SUBDOMAIN_MESSAGE
    return None


def dns_label_problem(value: str) -> str | None:
    """IsDNS1123Label: the first of its messages that applies, or None."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if _DNS1123_LABEL_RE.fullmatch(value) is None:
        return "must not contain dots" if _DNS1123_SUBDOMAIN_RE.fullmatch(value) else _DNS_LABEL_MESSAGE
    return None


def _label_key_problem(key: str) -> str | None:
    """IsQualifiedName (label keys, annotation keys): ``[prefix/]name``."""
    parts = key.split("/")
    if len(parts) > 2:
        return "a valid label key " + _LABEL_KEY_NAME_MESSAGE[len("name part ") :] + (
            " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "prefix part must be non-empty"
        problem = subdomain_problem(prefix)
        if problem is not None:
            return "prefix part " + problem
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if _LABEL_KEY_NAME_RE.fullmatch(name) is None:
        return _LABEL_KEY_NAME_MESSAGE
    return None


def _label_value_problem(value: str) -> str | None:
    """IsValidLabelValue: at most 63 characters of the label alphabet, or empty."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        return _LABEL_VALUE_MESSAGE
    return None


def quoted(value: str) -> str:
    """``value`` in double quotes, as the API server quotes a value in its messages."""
    return json.dumps(value, ensure_ascii=False)


def invalid(path: str, value: str, problem: str) -> FieldError:
    """The API server's ``Invalid value`` error for ``value`` at ``path``."""
    return FieldError(path, f"Invalid value: {quoted(value)}: {problem}")


# Keys and values seen valid already: labels repeat across the objects of a manifest, so most are
# checked once. Bounded: cleared when full.
_VALID_KEYS: set[str] = set()
_VALID_VALUES: set[str] = set()
_VALID_CACHE_SIZE = 4096


def _check_new(value: str, valid: set[str], problem_of: Callable[[str], str | None], path: str) -> None:
    """Check a key or value not in ``valid`` yet, and remember it there once it passes."""
    problem = problem_of(value)
    if problem is not None:
        raise invalid(path, value, problem)
    if len(valid) >= _VALID_CACHE_SIZE:
        valid.clear()
    valid.add(value)


def check_labels(labels: Mapping[str, str], path: str) -> None:
    """ValidateLabels: every key a qualified name, every value a label value."""
    for key, value in labels.items():
        # The membership tests stay here: they are all most labels need.
        if key not in _VALID_KEYS:
            _check_new(key, _VALID_KEYS, _label_key_problem, path)
        if value not in _VALID_VALUES:
            _check_new(value, _VALID_VALUES, _label_value_problem, path)


def _check_annotations(annotations: Mapping[str, str], path: str) -> None:
    """ValidateAnnotations: keys are qualified names (in any case); keys and values together hold at
    most TOTAL_ANNOTATION_SIZE_LIMIT bytes."""
    chars = 0
    for key, value in annotations.items():
        chars += len(key) + len(value)
        if key not in _VALID_KEYS:
            problem = _label_key_problem(key.lower())
            if problem is not None:
                raise invalid(path, key, problem)
    # UTF-8 takes at most 4 bytes a character: count bytes only when characters alone do not decide.
    if chars * 4 > TOTAL_ANNOTATION_SIZE_LIMIT and (
        chars > TOTAL_ANNOTATION_SIZE_LIMIT
        or sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > TOTAL_ANNOTATION_SIZE_LIMIT
    ):
        raise FieldError(path, f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")


def metadata(meta: Mapping[str, Any]) -> tuple[str, dict[str, str], dict[str, str]]:
    """The object's name, labels and annotations, checked as the API server checks them."""
    name = get_str(meta, "name", "metadata")
    if not name:
        raise FieldError("metadata.name", "Required value: name or generateName is required")
    problem = subdomain_problem(name)
    if problem is not None:
        raise invalid("metadata.name", name, problem)
    labels = str_map(meta, "labels", "metadata")
    check_labels(labels, "metadata.labels")
    annotations = str_map(meta, "annotations", "metadata")
    if annotations:
        _check_annotations(annotations, "metadata.annotations")
    return name, labels, annotations


def namespace(meta: Mapping[str, Any]) -> str:
    """The object's namespace (``default`` when not given), a DNS label."""
    ns = get_str(meta, "namespace", "metadata") or "default"
    problem = dns_label_problem(ns)
    if problem is not None:
        raise invalid("metadata.namespace", ns, problem)
    return ns


def object_meta(
    obj: Mapping[str, Any], namespaced: bool
) -> tuple[Mapping[str, Any], str, str, dict[str, str], dict[str, str]]:
    """``obj``'s metadata, name, namespace ("" when not ``namespaced``), labels and annotations, checked."""
    meta = get_map(obj, "metadata", "")
    name, labels, annotations = metadata(meta)
    return meta, name, namespace(meta) if namespaced else "", labels, annotations


def uid(meta: Mapping[str, Any]) -> str:
    """The object's uid; a new one when the manifest has none, as the API server assigns one."""
    return get_str(meta, "uid", "metadata") or str(uuid.uuid4())
